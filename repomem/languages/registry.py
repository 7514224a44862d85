"""The languages repomem indexes, by file-name extension (grammar names are
tree-sitter-language-pack's). Adding a language is one entry here; giving it call edges is one
module beside `python/`."""

from __future__ import annotations

from repomem.languages.language import Language
from repomem.languages.python import PYTHON

_GRAMMARS_BY_EXTENSION: dict[str, tuple[str, ...]] = {
    "javascript": (".js", ".mjs", ".cjs", ".jsx"),
    "typescript": (".ts", ".mts", ".cts"),
    "tsx": (".tsx",),
    "go": (".go",), "rust": (".rs",), "java": (".java",), "kotlin": (".kt",), "scala": (".scala",),
    "c": (".c", ".h"), "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh"),
    "csharp": (".cs",), "ruby": (".rb",), "php": (".php",), "swift": (".swift",), "lua": (".lua",),
    "bash": (".sh", ".bash"),
}

# Line comments other than `//`.
_LINE_COMMENTS = {"ruby": "#", "bash": "#", "lua": "--"}
# Languages whose blocks are braces (a body after `{` ends at the brace that balances it).
_BRACE_BLOCKS = frozenset({"javascript", "typescript", "tsx", "go", "rust", "java", "kotlin", "scala", "c", "cpp",
                           "csharp", "php", "swift"})
# Their grammars' string and comment node types: a cursor inside one completes one line.
_BRACE_STRING_OR_COMMENT_TYPES = frozenset({
    "comment", "line_comment", "block_comment", "string", "string_literal", "template_string",
    "interpreted_string_literal", "raw_string_literal", "char_literal", "character_literal", "string_fragment",
    "encapsed_string", "line_string_literal", "multi_line_string_literal", "verbatim_string_literal",
})

LANGUAGES: tuple[Language, ...] = (
    PYTHON,
    *(Language(name, extensions, line_comment=_LINE_COMMENTS.get(name, "//"), brace_blocks=name in _BRACE_BLOCKS,
               string_or_comment_types=_BRACE_STRING_OR_COMMENT_TYPES if name in _BRACE_BLOCKS else frozenset())
      for name, extensions in _GRAMMARS_BY_EXTENSION.items()),
)

_BY_NAME = {language.name: language for language in LANGUAGES}
_BY_EXTENSION = {extension: language.name for language in LANGUAGES for extension in language.extensions}


def language_of(path: str) -> str | None:
    """Grammar name for a repository-relative path, or None when no grammar covers it."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return None if dot <= 0 else _BY_EXTENSION.get(name[dot:].lower())


def language_named(name: str) -> Language:
    """The rules for a grammar name; a name repomem has no entry for gets the generic rules."""
    language = _BY_NAME.get(name)
    return language if language is not None else Language(name, ())
