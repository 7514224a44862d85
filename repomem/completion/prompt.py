"""Prompt assembly with exact token budgets (docs/design.md section 4; RepoCoder / FragRel prompt 2).

    # Here are some relevant code fragments from other files of the repo:
    # --------------------------------------------------
    # the below code fragment can be found in:
    # path/to/file.py
    # --------------------------------------------------
    # <each line of the fragment, commented>
    # --------------------------------------------------
    <current file: the lines before the cursor>

Retrieved blocks get `context_share` of the budget, best first; the current file's left context
is trimmed from the top to whole lines. Token counts come from the backend's own tokenizer.
Block order: "score" puts the best-scored block last (RepoCoder); "similarity" puts the most
lexically similar block (BM25's s_ind) last whatever ranked the blocks in; "stable" orders blocks by
path and line so that neighbouring cursors produce prompts sharing their prefix (prompt caches).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from repomem.backends.templates import Template
from repomem.completion.warm_prefix import COLD_START, PromptStart, first_kept_line
from repomem.failures import Failure, FailureKind
from repomem.prompt_names import one_line

# U+FEFF, the byte-order mark some editors write before a file's first line: an encoding's mark,
# no character of the code (editors hide it). The file's first line as read carries it; the prompt
# shows that line without it, where it would stand mid-prompt (inside a commented block line, at
# the head of a file section, after the frame above the current file) and cost tokens that no
# file the model learned from shows there.
BYTE_ORDER_MARK = "\ufeff"


def _code(text: str) -> str:
    """`text`, lines of a file, as the prompt shows them: without a byte-order mark before them."""
    return text.removeprefix(BYTE_ORDER_MARK)


# The words of RepoCoder's frame around the blocks: the line above them all, and each block's first line.
HEADER_WORDS = "Here are some relevant code fragments from other files of the repo:"
BLOCK_WORDS = "the below code fragment can be found in:"


def commented(comment: str, text: str) -> str:
    """`text` as a comment of the cursor file's language: after its line comment (`#`, `//`), or
    inside its block comment for a language with none, given as opener and closer with a space
    between (`/* */` for CSS, `<!-- -->` for HTML, Vue and Markdown, where `#` is no comment: a
    selector, text, a heading). A closer inside `text` is broken up, so the comment holds."""
    opener, _, closer = comment.partition(" ")
    if not closer:
        return f"{opener} {text}"
    return f"{opener} {text.replace(closer, ' '.join(closer))} {closer}"


def header(comment: str = "#") -> str:
    """The line above the retrieved blocks (RepoCoder's), in the cursor file's comments."""
    return commented(comment, HEADER_WORDS) + "\n"


def separator(comment: str = "#") -> str:
    return commented(comment, "-" * 50) + "\n"


# Python's, RepoCoder's exactly.
HEADER, SEPARATOR = header(), separator()


class Tokenizer(Protocol):
    def count(self, text: str) -> int:
        """Tokens of `text` as the model sees it (special strings parsed, no BOS)."""


@dataclass(frozen=True)
class PromptBudget:
    max_prompt_tokens: int = 2048
    context_share: float = 0.5  # share of the prompt for retrieved blocks (RepoCoder: half)
    max_suffix_tokens: int = 256  # right context kept for fill-in-the-middle


# The code after the cursor takes at most this share of the prompt, whatever max_suffix_tokens says:
# the code before the cursor, which the completion continues, keeps room beside the blocks (with
# max_suffix_tokens at or above max_prompt_tokens the suffix took the whole budget, and every
# completion with code below it failed as if the line at the cursor alone were too long).
MAX_SUFFIX_SHARE = 0.25


def suffix_budget(budget: PromptBudget) -> int:
    """Tokens the code after the cursor may take: max_suffix_tokens, at most MAX_SUFFIX_SHARE of the prompt."""
    return max(0, min(budget.max_suffix_tokens, int(budget.max_prompt_tokens * MAX_SUFFIX_SHARE)))


@dataclass(frozen=True)
class ContextBlock:
    fragment: int  # the best-ranked fragment this block shows
    path: str
    start_line: int  # 0-based
    end_line: int  # exclusive
    text: str
    score: float
    # Every fragment whose lines this block shows (packing merges overlapping windows); () = `fragment`.
    members: tuple[int, ...] = ()
    summary: bool = False  # `text` summarises the lines (a gist), so packing keeps it whole
    similarity: float | None = None  # BM25 s_ind of the block's best window (order "similarity"); None = score

    @property
    def similarity_key(self) -> float:
        return self.score if self.similarity is None else self.similarity

    @property
    def fragments(self) -> tuple[int, ...]:
        return self.members or (self.fragment,)


# (candidates best first, block budget in tokens, cost of one rendered block) -> chosen blocks
BlockSelection = Callable[[Sequence[ContextBlock], int, Callable[[ContextBlock], int]], list[ContextBlock]]


@dataclass(frozen=True)
class Prompt:
    text: str
    n_tokens: int
    blocks: tuple[ContextBlock, ...]  # in prompt order
    block_tokens: int
    left_first_line: int  # first line of the current file kept in the prompt (0-based)
    left_tokens: int
    suffix_tokens: int
    template: str
    fim: bool
    suffix_lines: int = 0  # lines of the code after the cursor the prompt shows (its cursor line's rest first)

    @property
    def fragment_ids(self) -> frozenset[int]:
        """Ids of every fragment whose lines are in the prompt's blocks."""
        return frozenset(f for block in self.blocks for f in block.fragments)


def _fitting_tail(line: str, fits: Callable[[str], bool]) -> str | None:
    """The longest end of `line` that `fits`, begun after a space where one is near the cut (so
    no word is shown half); None when not even an empty one fits."""
    if not fits(""):
        return None
    cut = len(line) - _longest_fitting(line, fits, end=True)
    space = line.find(" ", cut, cut + WORD_CUT_REACH)
    return line[space + 1:] if space >= 0 else line[cut:]


# Characters past the cut at most to the next space, where the cut line's shown end begins.
WORD_CUT_REACH = 32


def _nearest_lines(lines: Sequence[str], tokens: int, first: bool = False) -> str:
    """The last (`first`: the first) of `lines`, joined, that a prompt part of `tokens` tokens
    could show: up to ~8 characters a token, twice what code takes; farther lines are counted
    only when asked."""
    kept, characters = 0, 0
    for line in (lines if first else reversed(lines)):
        characters += len(line) + 1
        if characters > 8 * tokens:
            break
        kept += 1
    return "\n".join(lines[:kept] if first else lines[len(lines) - kept:])


def _fitted_suffix(lines: Sequence[str], tokenizer: Tokenizer, limit: int) -> str:
    """The most whole lines of the code after the cursor, nearest first, within `limit` tokens;
    where the cursor line's rest alone is longer, as much of it as fits (an empty suffix would
    tell the model that nothing follows the cursor)."""

    def fits(text: str) -> bool:
        return not exceeds(tokenizer, text, limit)

    kept, too_many = len(lines), len(lines) + 1
    while kept > 0 and not fits("\n".join(lines[:kept])):  # halving: the whole file may follow
        too_many = kept
        kept = kept // 2 if kept > 8 else kept - 1
    high = too_many - 1  # the halving may have passed counts that fit: the most that do
    while kept < high:
        middle = (kept + high + 1) // 2
        kept, high = (middle, high) if fits("\n".join(lines[:middle])) else (kept, middle - 1)
    if kept or not lines or not lines[0]:
        return "\n".join(lines[:kept])
    return lines[0][:_longest_fitting(lines[0], fits)]


def _longest_fitting(text: str, fits: Callable[[str], bool], end: bool = False) -> int:
    """How many characters of `text` fit: its longest beginning (with `end`, its longest end) that
    `fits` (0 when none does)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(text[len(text) - middle:] if end else text[:middle]) else (low, middle - 1)
    return low


def exceeds(tokenizer: Tokenizer, text: str, limit: int) -> bool:
    """tokenizer.count(text) > limit. A tokenizer with an `exceeds` of its own answers from a
    cheap lower bound when it can (`BackendTokenizer`, `backends.token_floor`): the fit probes
    texts many times too long, the whole file on either side of the cursor."""
    own = getattr(tokenizer, "exceeds", None)
    return own(text, limit) if own is not None else tokenizer.count(text) > limit


def render_block(block: ContextBlock, comment: str = "#") -> str:
    """One block as RepoCoder lays it out: its path and lines, each line commented out with
    `comment` (the cursor file's comment, see `commented`)."""
    lines = "".join(commented(comment, line) + "\n" for line in _code(block.text).split("\n"))
    rule = separator(comment)
    return f"{commented(comment, BLOCK_WORDS)}\n{commented(comment, one_line(block.path))}\n{rule}{lines}{rule}"


# A frame line's first four words, which a model cut short still writes, in any case, and the
# block line turned round (`# The above code fragment can be found in`: the 0.5B on a new line
# below code, completing left to right).
_FRAME_STARTS = tuple(" ".join(words.lower().split()[:4]) for words in (BLOCK_WORDS, HEADER_WORDS)) + (
    "the above code fragment",)


def frames_blocks(line: str, comment: str = "#") -> bool:
    """Whether `line` is a line of the frame `render_context` puts around the blocks (its header, a
    block's first line, a rule of dashes, shortened or not) rather than code: what a model writes
    when it continues the frame instead of the file (the 1.5B now and then:
    eval/results/devset-ten-em-cpu-1.5b-definitions/README.md)."""
    opener, _, closer = comment.partition(" ")
    body = line.strip()
    if not body.startswith(opener):
        return False
    words = body[len(opener):].strip()
    if closer and words.endswith(closer):
        words = words[: -len(closer)].strip()
    return (len(words) >= 2 and words == "-" * len(words)) or words.lower().startswith(_FRAME_STARTS)


def render_context(blocks: Sequence[ContextBlock], comment: str = "#") -> str:
    if not blocks:
        return ""
    return header(comment) + separator(comment) + "".join(render_block(b, comment) for b in blocks)


def _ordered(blocks: list[ContextBlock], order: str) -> list[ContextBlock]:
    if order == "stable":
        return sorted(blocks, key=lambda b: (b.path, b.start_line))
    if order == "similarity":
        return sorted(blocks, key=lambda b: (b.similarity_key, b.score))  # the most similar block sits last
    return sorted(blocks, key=lambda b: b.score)  # ascending: the best-scored block sits last


def _repo_form(template: Template, style: str) -> bool:
    return style == "repo" and template.supports_repo_form


def _context_text(template: Template, style: str, repo: str, pinned: Sequence[ContextBlock],
                  blocks: Sequence[ContextBlock], comment: str) -> str:
    """What the prompt shows before the code at the cursor, but the current file's own header.
    In RepoCoder's form the pinned blocks (the current file's import lines, signatures) come first
    among the commented blocks; in the repository form each block is a file section and the
    pinned lines open the current file's section (written by `_assemble`)."""
    if _repo_form(template, style):
        return template.repo_files(repo, [(b.path, _code(b.text)) for b in blocks])
    return render_context([*pinned, *blocks], comment)


def _assemble(
    template: Template, style: str, repo: str, path: str, pinned: Sequence[ContextBlock],
    blocks: Sequence[ContextBlock], left: str, suffix: str | None, comment: str,
) -> str:
    context = _context_text(template, style, repo, pinned, blocks, comment)
    if _repo_form(template, style):
        # Qwen2.5-Coder's repository form: each block a file of its own, then the current file,
        # whose shown import statements come first (as in the file) and the code at the cursor after.
        head = "".join(f"{_code(b.text)}\n" for b in pinned)
        prefix = head + left
        return context + template.current_file(path) + (template.infill(prefix, suffix) if suffix is not None
                                                         else template.plain(prefix))
    prefix = context + left
    return template.infill(prefix, suffix) if suffix is not None else template.plain(prefix)


def build_prompt(
    *,
    left_lines: Sequence[str],
    suffix: str | None,
    candidates: Sequence[ContextBlock],
    tokenizer: Tokenizer,
    template: Template,
    budget: PromptBudget,
    order: str = "score",
    style: str = "comments",
    repo: str = "",
    path: str = "",
    start: PromptStart = COLD_START,
    select: BlockSelection | None = None,
    pinned: Sequence[ContextBlock] = (),
    comment: str = "#",
) -> Prompt | Failure:
    """Fit blocks and the current file into the budget.

    `left_lines`: the current file up to the cursor, one entry per line (the last one cut at the
    cursor). `candidates`: retrieved blocks, best first. `suffix`: text after the cursor for
    fill-in-the-middle (None for left-to-right). `start`: where the function's previous prompt
    began the current file and the tokens to leave free (order "stable", completion/warm_prefix.py).
    `select`: chooses the blocks within the block budget (default: best first, each block whole).
    `pinned`: blocks shown first, outside the block budget (their room comes from the current
    file's left context); dropped only when the line at the cursor would not fit otherwise.
    `comment`: the cursor file's line comment, which the blocks and their headers are written in.
    """
    use_fim = suffix is not None and template.supports_fim
    if left_lines and left_lines[0].startswith(BYTE_ORDER_MARK):  # the file's first line, read with its mark
        left_lines = [_code(left_lines[0]), *left_lines[1:]]
    repo_form = _repo_form(template, style)

    def shown_block(block: ContextBlock) -> str:
        return template.file_section(block.path, _code(block.text)) if repo_form else render_block(block, comment)

    suffix_limit = suffix_budget(budget)
    warm = getattr(tokenizer, "warm", None)
    if warm is not None:  # what the fit counts below, counted at once where the backend can
        near_suffix = [_nearest_lines(suffix.split("\n"), suffix_limit, first=True)] \
            if use_fim and suffix else []
        warm([shown_block(block) for block in candidates]
             + [_nearest_lines(left_lines, budget.max_prompt_tokens), *near_suffix])
    suffix_text: str | None = None
    suffix_tokens = 0
    if use_fim:
        assert suffix is not None
        suffix_lines = suffix.split("\n")
        suffix_text = _fitted_suffix(suffix_lines, tokenizer, suffix_limit)
        suffix_tokens = tokenizer.count(suffix_text) if suffix_text else 0

    block_budget = int(budget.max_prompt_tokens * budget.context_share)

    def block_cost(block: ContextBlock) -> int:
        """Tokens of one block as the prompt's style writes it."""
        return tokenizer.count(shown_block(block))

    if select is not None:
        chosen = select(candidates, block_budget, block_cost)
    else:
        chosen = []
        spent = 0
        for block in candidates:  # best first; a block that does not fit leaves room for smaller ones
            cost = block_cost(block)
            if spent + cost <= block_budget:
                chosen.append(block)
                spent += cost
    blocks = _ordered(chosen, order)
    pinned = list(pinned)

    def render(first_line: int, with_blocks: list[ContextBlock]) -> str:
        return _assemble(template, style, repo, path, pinned, with_blocks, "\n".join(left_lines[first_line:]),
                         suffix_text, comment)

    n_lines = len(left_lines)

    def fits(first_line: int, spared: int) -> bool:
        return not exceeds(tokenizer, render(first_line, blocks), budget.max_prompt_tokens - spared)

    while True:
        low = first_kept_line(n_lines, fits, start)
        if low is None:  # not even the cursor line fits: drop the pins, then the weakest block
            if not blocks and pinned:
                pinned = []
                continue
            if not blocks:
                # The line at the cursor alone is longer than the budget (a data line, minified
                # code): its end, where the completion goes on, is what the model needs.
                tail = _fitting_tail(left_lines[-1] if left_lines else "",
                                     lambda kept: not exceeds(tokenizer, _assemble(
                                         template, style, repo, path, [], [], kept, suffix_text, comment),
                                         budget.max_prompt_tokens))
                if tail is None:
                    return Failure(
                        FailureKind.PROMPT_TOO_LONG,
                        f"the code after the cursor alone exceeds the prompt budget of {budget.max_prompt_tokens} "
                        "tokens (completion.max_prompt_tokens)",
                    )
                left_lines = [*left_lines[:-1], tail]
                start = COLD_START
                continue
            weakest = min(range(len(blocks)), key=lambda i: blocks[i].score)
            blocks = blocks[:weakest] + blocks[weakest + 1 :]
            continue
        text = render(low, blocks)
        left_text = "\n".join(left_lines[low:])
        shown = [*pinned, *blocks]
        return Prompt(
            text=text,
            n_tokens=tokenizer.count(text),
            blocks=tuple(shown),
            block_tokens=tokenizer.count(_context_text(template, style, repo, pinned, blocks, comment)) if shown else 0,
            left_first_line=low,
            left_tokens=tokenizer.count(left_text) if left_text else 0,
            suffix_tokens=suffix_tokens,
            template=template.family,
            fim=use_fim,
            suffix_lines=suffix_text.count("\n") + 1 if suffix_text else 0,
        )
