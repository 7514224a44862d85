"""The languages repomem indexes, by file-name extension (grammar names are
tree-sitter-language-pack's). Adding a language is one entry here; giving it call edges is one
module beside `python/`."""

from __future__ import annotations

from repomem.languages.go import GO
from repomem.languages.java import JAVA
from repomem.languages.javascript import JAVASCRIPT, TSX, TYPESCRIPT
from repomem.languages.language import Language, brace_language
from repomem.languages.python import PYTHON
from repomem.languages.rust import RUST

_GRAMMARS_BY_EXTENSION: dict[str, tuple[str, ...]] = {
    "javascript": (".js", ".mjs", ".cjs", ".jsx"),
    "typescript": (".ts", ".mts", ".cts"),
    "tsx": (".tsx",),
    "go": (".go",), "rust": (".rs",), "java": (".java",), "kotlin": (".kt",), "scala": (".scala",),
    "c": (".c", ".h"), "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh"),
    "csharp": (".cs",), "ruby": (".rb",), "php": (".php",), "swift": (".swift",), "lua": (".lua",),
    "bash": (".sh", ".bash"),
}

# Languages that are not brace languages: their line comments.
_OTHER_LINE_COMMENTS = {"ruby": "#", "bash": "#", "lua": "--"}
# Languages with relations beyond their grammar (call edges, names in scope): one module each
# under repomem/languages/, which makes its Language (brace languages through `brace_language`).
_WITH_RELATIONS: tuple[Language, ...] = (PYTHON, GO, RUST, JAVASCRIPT, TYPESCRIPT, TSX, JAVA)


def _grammar_only(name: str, extensions: tuple[str, ...]) -> Language:
    if name in _OTHER_LINE_COMMENTS:
        return Language(name, extensions, line_comment=_OTHER_LINE_COMMENTS[name])
    return brace_language(name, extensions)


_RELATED = {language.name: language for language in _WITH_RELATIONS}
LANGUAGES: tuple[Language, ...] = (
    PYTHON,
    *(_RELATED.get(name) or _grammar_only(name, extensions) for name, extensions in _GRAMMARS_BY_EXTENSION.items()),
)

_BY_NAME = {language.name: language for language in LANGUAGES}
_BY_EXTENSION = {extension: language.name for language in LANGUAGES for extension in language.extensions}


def language_of(path: str) -> str | None:
    """Grammar name for a repository-relative path, or None when no grammar covers it."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return None if dot <= 0 else _BY_EXTENSION.get(name[dot:].lower())


# Files no grammar covers: their line comment by extension or name, which the prompt frames blocks
# in. "#" otherwise, as RepoCoder's prompts have it (a language's `//` is no comment in YAML or SQL).
# A language with no line comment gets its block comment, opener and closer with a space between
# (repomem.completion.prompt.commented).
_COMMENTS_WITHOUT_GRAMMAR = {
    **dict.fromkeys((".css", ".scss", ".less"), "/* */"),
    **dict.fromkeys((".html", ".htm", ".vue", ".svelte", ".xml", ".md", ".markdown"), "<!-- -->"),
    # XML under its own names (`#` is text there as in .xml): pages, images, style sheets and
    # schemas, .NET projects and resources, property lists.
    **dict.fromkeys((".xhtml", ".svg", ".xsl", ".xslt", ".xsd", ".wsdl", ".xaml", ".csproj", ".vbproj", ".fsproj",
                     ".props", ".targets", ".resx", ".plist"), "<!-- -->"),
    **dict.fromkeys((".sql", ".hs", ".lua", ".elm", ".ada", ".vhd"), "--"),
    # Languages whose comment is none of the above: `#` is code or text in each of them.
    **dict.fromkeys((".ml", ".mli"), "(* *)"),
    **dict.fromkeys((".f90", ".f95", ".f03", ".f08"), "!"),
    ".vim": '"', ".bat": "REM", ".cmd": "REM", ".rst": "..",
    **dict.fromkeys((".tex", ".erl"), "%"),
    **dict.fromkeys((".el", ".lisp", ".clj", ".scm", ".asm"), ";"),
    **dict.fromkeys((".dart", ".proto", ".groovy", ".gradle", ".kts", ".zig", ".v", ".sol", ".fs", ".glsl",
                     ".mm", ".inl", ".ipp", ".tpp", ".c++", ".h++", ".hxx"), "//"),
}


def line_comment_of(path: str) -> str:
    """The comment the file at `path` frames prompt lines in: its grammar's line comment, or
    `_COMMENTS_WITHOUT_GRAMMAR`'s (a block comment's opener and closer, space-separated, where
    the language has no line comment), else `#`."""
    name = language_of(path)
    if name is not None:
        return language_named(name).line_comment
    base = path.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return _COMMENTS_WITHOUT_GRAMMAR.get(base[dot:].lower(), "#") if dot > 0 else "#"


def language_named(name: str) -> Language:
    """The rules for a grammar name; a name repomem has no entry for gets the generic rules."""
    language = _BY_NAME.get(name)
    return language if language is not None else Language(name, ())
