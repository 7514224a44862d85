"""Ruby, Lua and the shell: after a line that opens a block (`def total(items)`, `then`, `do`) the
completion is the block's body up to the keyword that closes it, as a brace language's runs to its
`}`; before, these languages completed the cursor's line only, and a model that began the body
with a line break completed nothing."""

from __future__ import annotations

import pytest

from repomem.completion.postprocess import clean_completion, completion_settled, completion_shape
from repomem.languages.registry import language_named

RUBY, LUA, BASH = language_named("ruby"), language_named("lua"), language_named("bash")


def completed(language, prefix: str, suffix: str, raw: str) -> str:
    return clean_completion(raw, completion_shape(prefix, suffix, language), suffix=suffix)


@pytest.mark.parametrize(("language", "prefix", "raw", "body"), [
    (RUBY, "class Cart\n  def total(items)", "\n    items.sum(&:price)\n  end\n\n  def tax\n",
     "\n    items.sum(&:price)\n  end"),
    (RUBY, "items.each do |item|", "\n  puts item\nend\nputs 'done'\n", "\n  puts item\nend"),
    (RUBY, "if cart.empty?", "\n  warn 'empty'\nelse\n  ship(cart)\nend\nlog(cart)\n",
     "\n  warn 'empty'\nelse\n  ship(cart)\nend"),
    (RUBY, "def total(items)\n  ", "items.sum\nend\n", "items.sum\nend"),  # on the blank line below
    (LUA, "local function add(a, b)", "\n  return a + b\nend\n\nlocal x = 1\n", "\n  return a + b\nend"),
    (LUA, "for i = 1, n do", "\n  total = total + i\nend\nprint(total)\n", "\n  total = total + i\nend"),
    (BASH, "if [ -f \"$file\" ]; then", "\n  echo found\nelse\n  echo missing\nfi\necho after\n",
     "\n  echo found\nelse\n  echo missing\nfi"),
    (BASH, "for f in *.txt; do", "\n  wc -l \"$f\"\ndone\nexit 0\n", "\n  wc -l \"$f\"\ndone"),
])
def test_the_body_runs_to_the_keyword_that_closes_it(language, prefix, raw, body):
    assert completed(language, prefix, "\n", raw) == body


def test_a_closer_the_code_below_has_already_is_not_written_twice():
    # An editor that writes `end` with the opener (vim-endwise), or a body being rewritten.
    assert completed(RUBY, "class Cart\n  def total(items)", "\n  end\nend\n",
                     "\n    items.sum(&:price)\n  end\n") == "\n    items.sum(&:price)"
    assert completed(LUA, "if x > 1 then", "\nend\n", "\n  print(x)\nend\n") == "\n  print(x)"
    # The class's `end` below is farther out: the method's own is still missing.
    assert completed(RUBY, "class Cart\n  def total(items)", "\nend\n",
                     "\n    items.sum(&:price)\n  end\n") == "\n    items.sum(&:price)\n  end"


@pytest.mark.parametrize(("language", "line"), [
    (RUBY, "x = 1 if ready"), (RUBY, "def area = width * height"), (RUBY, "puts 'do'"),
    (RUBY, "run # do"), (LUA, "if x then y() end"), (LUA, "print('then')"), (BASH, "echo then"),
    (BASH, "grep x file # then"),
])
def test_a_line_that_opens_no_block_completes_itself(language, line):
    shape = completion_shape(line, "\n", language)
    assert not shape.multiline and not shape.keyword_closer


def test_generation_stops_once_the_closer_is_whole_not_at_its_first_letters():
    shape = completion_shape("def total(items)", "\n", RUBY)
    assert not completion_settled("\n  items.sum\nen", shape, suffix="\n")
    assert not completion_settled("\n  items.sum\nend", shape, suffix="\n")  # `end` or `ending = 1`?
    assert completion_settled("\n  items.sum\nend\n", shape, suffix="\n")
    assert completion_settled("\n  items.sum\nputs 1", shape, suffix="\n")  # dedented: the body is over
