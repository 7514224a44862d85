"""Which tree-sitter grammar parses which file, by file-name extension."""

from __future__ import annotations

# Names are tree-sitter-language-pack's. Python gets call edges; every other language gets
# fragments, syntax and directory edges.
LANGUAGE_BY_EXTENSION: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".scala": "scala",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".php": "php", ".swift": "swift", ".lua": "lua",
    ".sh": "bash", ".bash": "bash",
}


def language_of(path: str) -> str | None:
    """Grammar name for a repository-relative path, or None when no grammar covers it."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return None if dot <= 0 else LANGUAGE_BY_EXTENSION.get(name[dot:].lower())
