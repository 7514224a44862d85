"""JavaScript, TypeScript and TSX: one package for the three grammars (`syntax`: symbols,
`calls`: call resolution, `modules`: which file a specifier names). The three Languages share
one resolver class, so CallResolution gives them one resolver: their files import each other."""

from __future__ import annotations

from functools import partial

from repomem.languages.javascript.calls import JavaScriptCallResolver
from repomem.languages.javascript.syntax import JavaScriptSymbols
from repomem.languages.language import Language, brace_language

# Statements that bring other modules' names into scope: ES imports (TypeScript's `import x =
# require()` too) and CommonJS (`const { a } = require("./b")`); a re-export (`export { a } from`)
# binds no name of the file's own.
IMPORT_PREFIXES = ("import ", "const ", "let ", "var ")
IMPORT_PATTERN = r"^import\b|\brequire\s*\("


def _language(grammar: str, extensions: tuple[str, ...]) -> Language:
    return brace_language(grammar, extensions, symbols=partial(JavaScriptSymbols, grammar),
                          call_resolver=JavaScriptCallResolver, import_prefixes=IMPORT_PREFIXES,
                          import_pattern=IMPORT_PATTERN)


JAVASCRIPT = _language("javascript", (".js", ".mjs", ".cjs", ".jsx"))
TYPESCRIPT = _language("typescript", (".ts", ".mts", ".cts"))
TSX = _language("tsx", (".tsx",))
