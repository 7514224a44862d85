"""One completion request, and what its cursor shows, computed once per request.

`CompletionRequest` carries every choice a caller makes (strategy, order, masks, budgets);
`CursorContext` is what the engine derives from the cursor before any retrieval: the visible
left context, the code after the cursor, the completion's shape under the file's own language,
the retrieval query and the function the cursor sits in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from repomem.completion.postprocess import CompletionShape, completion_shape
from repomem.failures import Failure, FailureKind
from repomem.index.identifier_chars import identifier_pattern
from repomem.languages.language import BRACE_DEFINITION_TYPES, BRACE_NAMED_FUNCTION_VALUE_TYPES, Language
from repomem.languages.registry import language_named, language_of
from repomem.languages.treesitter import parse
from repomem.positions import Cursor, window_before
from repomem.strategies import Strategy


@dataclass(frozen=True)
class CompletionRequest:
    cursor: Cursor
    strategy: Strategy
    alpha: float  # eq. 10's alpha this request ranks with (0 for BM25-only strategies)
    order: str  # "score" (RepoCoder: most similar block last) | "stable" (kept per function)
    use_suffix: bool  # fill in the middle with the code after the cursor when the model can
    max_new_tokens: int
    # 0-based first line of the current file the prompt may show (RepoEval's context_start_lineno).
    visible_from: int = 0
    # Fragment ids retrieval must neither offer nor read (text the user cannot see).
    excluded: np.ndarray | None = None
    # Fragment ids retrieval must not offer but may read as neighbours (RepoEval's leakage rule).
    unlisted: np.ndarray | None = None
    cancel: Callable[[], bool] | None = None  # polled between generated tokens
    enough: Callable[[str], bool] | None = None  # ends generation early (see GenerationRequest)
    prefix_only: bool = False  # no cached run of the prompt moved into place (see GenerationRequest)
    # Told, between tokens, the text the model has written after the cursor so far (a user's
    # completion only: the language server stops one the user has typed past; lsp/scheduler.py).
    written: Callable[[str], None] | None = None


@dataclass(frozen=True)
class CursorContext:
    language: str  # grammar the cursor's file is parsed with
    left_lines: tuple[str, ...]  # visible lines up to the cursor, the last one cut there (healed)
    # Taken off the cursor line for the model to write back: trailing spaces, or a partly typed
    # word with the space before it (only for a backend that holds its answer's start to it).
    healed: str
    after: str  # everything after the cursor
    suffix: str | None  # `after` when the prompt fills in the middle, else None
    shape: CompletionShape
    query: str  # the last query_lines lines before the cursor
    definition_line: int  # 0-based line of the enclosing def / class (-1 at module level)
    file_lines: tuple[str, ...] = ()  # the cursor's whole file, secrets masked (what levers read of it)

    @property
    def forced_start(self) -> str:
        """What the answer must start with: the healed word (spaces alone are left to the model)."""
        return self.healed if self.healed.strip() else ""


_DEFINITION = re.compile(r"^(\s*)(async\s+def|def|class)\s")
# A name being typed at the end of the cursor's line, with the space BPE vocabularies glue to it.
_ASCII_WORD_BEING_TYPED = re.compile(r" ?[A-Za-z_][A-Za-z0-9_]*$")


@functools.cache
def _word_being_typed_in_any_script() -> re.Pattern[str]:
    """The same in any script, by the rule BM25's words follow (identifier_chars: `हिन्दी`, whose
    vowel signs continue a word, which `\\w` does not take). The start is held byte by byte
    (forced_start), so a letter of several UTF-8 bytes that tokens split is held like an ASCII one."""
    return re.compile(f" ?(?:{identifier_pattern()})$")


def _word_being_typed(line: str) -> re.Match[str] | None:
    return (_ASCII_WORD_BEING_TYPED if line.isascii() else _word_being_typed_in_any_script()).search(line)


def enclosing_definition(lines: list[str], line: int) -> int:
    """0-based line of the innermost def / class above `line` that contains it (-1 at module level)."""
    current = lines[line] if line < len(lines) else ""
    indent = len(current) - len(current.lstrip()) if current.strip() else None
    for number in range(line, -1, -1):
        match = _DEFINITION.match(lines[number])
        if match is None:
            continue
        if indent is None or len(match.group(1)) < indent or number == line:
            return number
    return -1


def enclosing_definition_of(language: Language, lines: list[str], line: int) -> int:
    """0-based first line of the innermost definition holding `line` (-1 at module level): Python's
    by its def / class lines, a brace language's by its syntax tree (its definition nodes, and
    function values bound to a name); other languages have none (-1)."""
    if language.indented_blocks:
        return enclosing_definition(lines, line)
    if not language.brace_blocks or line >= len(lines):
        return -1
    tree = parse(language.name, "\n".join(lines).encode("utf-8"))
    column = len(lines[line]) - len(lines[line].lstrip())
    node = tree.root_node.descendant_for_point_range((line, column), (line, column))
    while node is not None:
        if node.type in BRACE_DEFINITION_TYPES or (
                node.type in BRACE_NAMED_FUNCTION_VALUE_TYPES and node.parent is not None
                and node.parent.type == "variable_declarator"):
            return node.start_point[0]
        node = node.parent
    return -1


class SecretAtCursor(ValueError):
    """The cursor stands inside a secret: no part of it may reach the model, and a completion there
    would be one."""

    failure = Failure(FailureKind.SECRET_AT_CURSOR,
                      "the cursor is inside a secret (a key, token or password, masked before anything reaches "
                      "the model): no completion there")


_QUOTES = "\"'`"


def _open_quote(text: str) -> str | None:
    """The quote of a string literal `text` ends inside (not closed yet), or None."""
    open_quote = None
    escaped = False
    for character in text:
        if escaped:
            escaped = False
        elif character == "\\" and open_quote is not None:
            escaped = True
        elif character in _QUOTES and open_quote in (None, character):
            open_quote = None if open_quote == character else character
    return open_quote


def read_cursor(request: CompletionRequest, query_lines: int, supports_fim: bool,
                mask: Callable[[str], str] = lambda text: text, heal_words: bool = False) -> CursorContext:
    """Everything the engine needs from the cursor, from one split of the file into lines.

    `mask` hides secrets (repomem.index.secrets). It keeps line breaks, so it runs on the whole
    file at once (a secret's name on one line and its value on the next, a key block's BEGIN line
    and its body, are seen together, whatever line the cursor is on): the cursor's line stays put,
    its column moves by what masking took left of it. Raises SecretAtCursor where the cursor stands
    inside a secret: the line's halves masked apart would each show a part of it (neither looks
    like a secret alone), and a value being typed, its literal not closed yet, is one when closed
    or under a secret's name."""
    cursor = request.cursor
    raw = cursor.text.split("\n")
    lines = mask(cursor.text).split("\n")
    current_raw = raw[cursor.line] if cursor.line < len(raw) else ""
    current = lines[cursor.line] if cursor.line < len(lines) else ""
    left_raw, right_raw = current_raw[: cursor.column], current_raw[cursor.column :]
    quote = _open_quote(left_raw)
    # A literal open at the cursor: the value it holds is one once closed, or is being typed under
    # a name that says secret (masked however short; an editor that pairs quotes closed it right of
    # the cursor, where a short closed literal is taken for a fixture).
    if quote is not None and (mask(left_raw + quote) != left_raw + quote or mask(left_raw) != left_raw):
        raise SecretAtCursor
    if current.endswith(right_raw):  # nothing masked right of the cursor
        column = len(current) - len(right_raw)
    elif current.startswith(left_raw):  # nothing masked left of it
        column = len(left_raw)
    else:  # a secret on each side: each half of the line is masked on its own
        left_of_cursor, right_of_cursor = mask(left_raw), mask(right_raw)
        if left_of_cursor + right_of_cursor != current:
            raise SecretAtCursor  # one across the cursor: the halves alone do not hide it
        current, column = left_of_cursor + right_of_cursor, len(left_of_cursor)
    lines[cursor.line:cursor.line + 1] = [current]
    visible_from = min(max(request.visible_from, 0), cursor.line)
    left_lines = [*lines[visible_from : cursor.line], current[:column]]
    # Token healing: BPE vocabularies glue a space to the next word (" compute"), so a prompt
    # ending in "return " steers the model off its usual tokens. The space goes back to the
    # model, and is taken off the start of what it writes.
    healed = ""
    line_prefix = left_lines[-1]
    typed = _word_being_typed(line_prefix) if heal_words else None
    shape_lines = list(left_lines)  # the line as typed: the completion starts at the cursor
    if line_prefix.strip() and line_prefix != line_prefix.rstrip(" "):
        healed = line_prefix[len(line_prefix.rstrip(" ")):]
        left_lines[-1] = shape_lines[-1] = line_prefix.rstrip(" ")
    elif line_prefix and not line_prefix.strip(" "):
        # The cursor after a line's indentation alone (an editor's new line in a block). The
        # vocabularies write N spaces of indentation and a word as N - 1 spaces and " word", so a
        # prompt ending in all N had the model write the word's space again: every completion began
        # a column to the right (`     tax = ...` in a 4-space body). The last space goes back to
        # the model; the completion still starts at the cursor (its shape sees the line as typed).
        healed = " "
        left_lines[-1] = line_prefix[:-1]
    elif typed is not None:
        # Inside a word the prompt ends before it, and the model writes it again with its own
        # tokens, held to the typed letters (repomem.backends.forced_start).
        healed = typed.group()
        left_lines[-1] = line_prefix[: typed.start()]
    after = "\n".join([current[column:], *lines[cursor.line + 1 :]])
    suffix = after if request.use_suffix and after.strip() and supports_fim else None
    language = language_named(language_of(cursor.path) or "")
    query, _ = window_before(lines, cursor.line, column, query_lines)
    return CursorContext(
        language=language.name,
        left_lines=tuple(left_lines),
        healed=healed,
        after=after,
        suffix=suffix,
        shape=completion_shape("\n".join(shape_lines), after, language),
        query=query,
        definition_line=enclosing_definition_of(language, lines, cursor.line),
        file_lines=tuple(lines),
    )
