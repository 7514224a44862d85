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


@pytest.mark.parametrize(("language", "prefix", "raw", "body"), [
    (BASH, "deploy() {", "\n  echo deploying\n  rsync -a build/ host:\n}\n\nmain \"$@\"\n",
     "\n  echo deploying\n  rsync -a build/ host:\n}"),
    (BASH, "function deploy {", "\n  make all\n}\nmain\n", "\n  make all\n}"),
    (LUA, "repeat", "\n  i = i + 1\nuntil i > 3\nprint(i)\n", "\n  i = i + 1\nuntil i > 3"),
])
def test_a_shell_function_and_a_lua_repeat_run_to_their_closer(language, prefix, raw, body):
    """A shell function's `{` group and Lua's `repeat ... until`: they completed one line, and a
    body begun with a line break completed nothing."""
    assert completed(language, prefix, "\n", raw) == body


@pytest.mark.parametrize("line", ["echo ${", "echo a{", "echo '{'"])
def test_an_expansion_brace_opens_no_group(line):
    assert not completion_shape(line, "\n", BASH).multiline


@pytest.mark.parametrize(("language", "prefix", "raw", "body"), [
    (LUA, "local function usage()", "\n  return [[\nusage: tool\nend of options\n]]\nend\n\nprint(1)\n",
     "\n  return [[\nusage: tool\nend of options\n]]\nend"),
    (LUA, "local function f()", "\n  --[==[\nend\n]==]\n  return 1\nend\nprint(1)\n",
     "\n  --[==[\nend\n]==]\n  return 1\nend"),
    (BASH, "if [ -z \"$1\" ]; then", "\n  cat <<'EOF'\nusage: deploy HOST\nfi\nEOF\n  exit 1\nfi\necho go\n",
     "\n  cat <<'EOF'\nusage: deploy HOST\nfi\nEOF\n  exit 1\nfi"),
    (RUBY, "def usage", "\n  s = <<-TXT\nend of options\n  TXT\n  s\nend\nputs 1\n",
     "\n  s = <<-TXT\nend of options\n  TXT\n  s\nend"),
    (RUBY, "def query", "\n  <<~SQL\nSELECT 1\n  SQL\nend\nputs 1\n", "\n  <<~SQL\nSELECT 1\n  SQL\nend"),
])
def test_a_heredoc_or_long_string_at_column_0_ends_no_body(language, prefix, raw, body):
    """A heredoc's text and a Lua long string stand at any indent and may hold `end` or `fi`: their
    first line at the opener's indent ended the body inside the literal, left open."""
    assert completed(language, prefix, "\n", raw) == body


def test_a_closer_inside_a_heredoc_below_is_not_the_blocks():
    # The code below has a `fi` at the opener's indent, but inside a heredoc: the block is still open.
    suffix = "\n  cat <<EOF\nfi\nEOF\n"
    assert completed(BASH, "if [ -n \"$x\" ]; then", suffix, "\n  echo x\nfi\n") == "\n  echo x\nfi"


@pytest.mark.parametrize(("language", "prefix", "raw", "body"), [
    (BASH, 'case "$1" in', "\n  start)\n    run\n    ;;\n  *)\n    usage\n    ;;\nesac\necho done\n",
     "\n  start)\n    run\n    ;;\n  *)\n    usage\n    ;;\nesac"),
    # Arms at the `case`'s own indent go on with its body.
    (BASH, 'case "$1" in', "\nstart)\n    run\n    ;;\n-h|--help)\n    usage\n;;\nesac\necho done\n",
     "\nstart)\n    run\n    ;;\n-h|--help)\n    usage\n;;\nesac"),
    (BASH, 'case "$1" in\n  start)', "\n    run\n    ;;\n  stop)\n    halt\n    ;;\nesac\n", "\n    run\n    ;;"),
    (BASH, 'case "$1" in\n  start)', "\n    run\n  ;;\n  stop)\n    halt\n  ;;\nesac\n", "\n    run\n  ;;"),
    (RUBY, "items.each { |item|", "\n  puts item\n}\nputs 'done'\n", "\n  puts item\n}"),
    (RUBY, "def f\n  items.map { |a, b|", "\n    a + b\n  }.sum\nend\n", "\n    a + b\n  }.sum"),
    (RUBY, "loop {", "\n  tick\n  break if done?\n}\nputs 1\n", "\n  tick\n  break if done?\n}"),
    (RUBY, "items.map do |x|", "\n  x * 2\nend.sum\nputs 1\n", "\n  x * 2\nend.sum"),
])
def test_a_shell_case_and_a_ruby_brace_block_run_to_their_closer(language, prefix, raw, body):
    """A shell `case x in` runs to its `esac`, one of its arms (`start)`) to its `;;`; a Ruby block
    in braces (`items.each { |x|`) to its `}`: they completed one line, nothing after a line break."""
    assert completed(language, prefix, "\n", raw) == body


@pytest.mark.parametrize(("language", "line"), [
    (BASH, "echo case in"), (BASH, "x=$(date)"), (BASH, "  start) run ;;"),
    (RUBY, "items.each { |x| puts x }"), (RUBY, 's = "{"'), (RUBY, "h = {} # {"),
])
def test_a_line_that_closes_its_case_or_brace_opens_no_block(language, line):
    assert not completion_shape(line, "\n", language).multiline, line


def test_a_brace_block_closed_by_the_code_below_is_not_closed_twice():
    assert completed(RUBY, "def f\n  items.each { |x|", "\n  }\nend\n", "\n    puts x\n  }\n") == "\n    puts x"


def test_a_line_at_the_openers_indent_that_may_go_on_with_the_block_is_not_decided_yet():
    """`els` of `else` and a `case` arm's pattern being written (`sto` of `stop)`) at the opener's
    indent: generation was stopped there, and the block left without its other branch and closer."""
    shape = completion_shape("if cart.empty?", "\n", RUBY)
    assert not completion_settled("\n  warn 'empty'\nels", shape, suffix="\n")
    assert not completion_settled("\n  warn 'empty'\nelse", shape, suffix="\n")
    assert completion_settled("\n  warn 'empty'\nelse\n  ship(cart)\nend\n", shape, suffix="\n")
    shape = completion_shape('case "$1" in', "\n", BASH)
    assert not completion_settled("\nstart)\n  run\n  ;;\nsto", shape, suffix="\n")
    assert not completion_settled("\nstart)\n  run\n  ;;\nstop)", shape, suffix="\n")
    assert completion_settled("\nstart)\n  run\n  ;;\nesac\n", shape, suffix="\n")
    assert completion_settled("\nstart)\n  run\n  ;;\necho done\nx", shape, suffix="\n")


def test_an_opener_before_code_on_the_cursors_line_completes_that_line():
    # `{|}`: an editor's auto-paired brace is the line's rest; a body would write it again.
    shape = completion_shape("items.each { |x| ", "}\n", RUBY)
    assert not shape.multiline
    assert clean_completion("puts x }\nputs 2\n", shape, suffix="}\n") == "puts x"


@pytest.mark.parametrize(("prefix", "suffix", "raw", "body"), [
    ("local defaults = {", "\n\nlocal function log(opts)\nend\n",
     "\n  retries = 3,\n  verbose = false,\n}\n\nlocal function log(opts)\n",
     "\n  retries = 3,\n  verbose = false,\n}"),
    ("for _, job in ipairs(jobs) do\n  queue:push({", "\nend\n", "\n    job = job,\n    attempts = 0,\n  })\nend\n",
     "\n    job = job,\n    attempts = 0,\n  })"),
    # The code below closes the table already: its `}` is not written twice.
    ("local defaults = {", "\n}\n", "\n  retries = 3,\n}\n", "\n  retries = 3,"),
])
def test_a_lua_table_constructor_over_lines_runs_to_its_brace(prefix, suffix, raw, body):
    """`local defaults = {` ending its line: the fields below, up to the `}` at its indent; it
    completed the line's rest, nothing after the model's line break."""
    assert completed(LUA, prefix, suffix, raw) == body


@pytest.mark.parametrize("line", ["local t = {}", "local t = { a = 1 }", 'local s = "{"', "local t = {} -- {"])
def test_a_lua_table_closed_on_its_line_opens_no_block(line):
    assert not completion_shape(line, "\n", LUA).multiline, line
