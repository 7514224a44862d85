"""Names in scope: the cursor file's hidden imports of repository code, pinned above the blocks.

When the prompt's left context no longer shows the current file's import statements that bind
repository code (resolved through the index's import edges), up to `prompt.scope_imports` of
their lines are shown above the retrieved blocks, taken from the left context's room. A small
model otherwise calls a similar-looking name (docs/eval-history.md). Statements the fitted left
context shows after all are not repeated: the prompt is fitted again without them.

The RepoEval prompt keeps the lines just before the cursor; in a long file the import header is
cut away, and with it the names the code may call. On the dev set the called function's name was
in the prompt of every API task the embedded model got right, and for most of those it got wrong
the name was only in the part of the file the budget cut (docs/eval-history.md). These spans give the
prompt that header back, limited to imports of the repository's own modules (relative imports,
or modules the index holds), which are what an API completion calls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repomem.completion.levers.base import Pins, PromptLever
from repomem.completion.prompt import Prompt
from repomem.config import Config
from repomem.languages.registry import language_named
from repomem.retrieval.symbol_view import SymbolView

_WORD = re.compile(r"[^\W\d]\w*")  # a name in any script (in ASCII: [A-Za-z_][A-Za-z_0-9]*)


def import_statements(lines: Sequence[str], prefixes: Sequence[str], before: int, comment: str = "#",
                      pattern: str = "") -> list[tuple[int, int]]:
    """[start, end) line spans of the top-level import statements that start before line `before`
    (0-based): a line at column 0 opening with one of `prefixes`, continued while a bracket stays
    open or a line ends in a backslash (`comment`: what starts a line comment, whose brackets do
    not count), whose text holds `pattern` where one is given (a regex: JavaScript's `const` opens
    a `require` and any other declaration alike)."""
    holds = re.compile(pattern).search if pattern else None
    spans: list[tuple[int, int]] = []
    line = 0
    stop = min(before, len(lines))
    while line < stop:
        if not lines[line].startswith(tuple(prefixes)):
            line += 1
            continue
        start, depth = line, 0
        while line < len(lines):
            code = lines[line].split(comment, 1)[0]
            depth += code.count("(") + code.count("[") + code.count("{")
            depth -= code.count(")") + code.count("]") + code.count("}")
            line += 1
            if depth <= 0 and not code.rstrip().endswith("\\"):
                break
        if holds is None or holds("\n".join(lines[start:line])):
            spans.append((start, line))
    return spans


def repository_imports(symbols: SymbolView, path: str, lines: Sequence[str], prefixes: Sequence[str], before: int,
                       max_lines: int) -> list[tuple[int, int]]:
    """Spans of import statements before line `before` that bind a module or definition of the
    repository, the last ones first kept, `max_lines` lines in all (whole statements only)."""
    resolved = symbols.resolved_file(path) if max_lines > 0 and prefixes else None
    if resolved is None:
        return []
    file_id, syntax, resolution = resolved
    language = language_named(syntax.language)
    statements = import_statements(lines, prefixes, before, language.line_comment, language.import_pattern)
    if not statements:
        return []
    bound = {binding.local.split(".", 1)[0] for binding in syntax.imports
             if resolution.binds_repository(file_id, binding)}
    chosen: list[tuple[int, int]] = []
    room = max_lines
    for start, end in reversed(statements):
        if end - start > room:
            continue
        if bound & set(_WORD.findall("\n".join(lines[start:end]))):
            chosen.append((start, end))
            room -= end - start
    return sorted(chosen)


class NamesInScope(PromptLever):
    name = "names-in-scope"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.scope_imports > 0

    def __init__(self, round):
        super().__init__(round)
        self.spans: list[tuple[int, int]] | None = None  # read at the first fit

    def _hidden_imports(self) -> list[tuple[int, int]]:
        round = self.round
        prefixes = language_named(round.context.language).import_prefixes
        if not prefixes:
            return []
        symbols = round.view.symbols
        if symbols is None:
            return []
        cursor = round.request.cursor
        return repository_imports(symbols, cursor.path, round.file_lines, prefixes, cursor.line,
                                  round.config.prompt.scope_imports)

    def pin(self, pins: Pins) -> None:
        if self.spans is None:
            self.spans = self._hidden_imports()
        pins.import_spans.extend(self.spans)

    def restart_fit(self) -> None:
        self.spans = None

    def refit(self, prompt: Prompt, unsettled: bool) -> bool:
        still_hidden = [span for span in self.spans or () if span[1] <= prompt.left_first_line]
        if still_hidden == (self.spans or []):
            return False
        self.spans = still_hidden
        return True
