"""Python: statement-level graph nodes, symbols (`syntax`) and call resolution (`calls`)."""

from __future__ import annotations

from repomem.languages.language import Language
from repomem.languages.python.calls import PythonCallResolver
from repomem.languages.python.syntax import CLAUSE_TYPES, LANGUAGE_NAME, STRING_OR_COMMENT_TYPES, PythonSymbols

PYTHON = Language(
    name=LANGUAGE_NAME,
    extensions=(".py", ".pyi"),
    statement_suffixes=("_definition", "_statement"),
    clause_types=CLAUSE_TYPES,
    statements_in_expressions=False,
    symbols=PythonSymbols,
    call_resolver=PythonCallResolver,
    indented_blocks=True,
    line_comment="#",
    string_or_comment_types=STRING_OR_COMMENT_TYPES,
    import_prefixes=("import ", "from "),
)
