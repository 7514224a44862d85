"""Expected failures travel as values: adapters turn them into one clear line and an exit code.

A failure's kind is one of FailureKind, a declared set: code that builds or branches on a kind names
the member (`Failure(FailureKind.NO_INDEX, ...)`, `failure.kind == FailureKind.NO_INDEX`), so a
misspelt kind is an AttributeError where it is written, not a branch that silently never matches. A
kind given as a string is a TypeError. A member compares equal to, and prints and serialises as,
its string: JSON output, LSP messages and evaluation records carry the slugs below.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureKind(StrEnum):
    """Stable machine-readable slugs (they appear in --json output and the evaluator's records)."""

    # A file and a position in it (repomem/positions.py)
    BAD_POSITION = "bad-position"
    BINARY_FILE = "binary-file"
    COLUMN_OUT_OF_RANGE = "column-out-of-range"
    FILE_TOO_LARGE = "file-too-large"
    LINE_OUT_OF_RANGE = "line-out-of-range"
    LINE_TOO_LONG = "line-too-long"
    MISSING_FILE = "missing-file"
    NOT_A_FILE = "not-a-file"
    NOT_UTF8_NAME = "not-utf8-name"
    OUTSIDE_REPO = "outside-repo"
    SYMLINK_LOOP = "symlink-loop"
    UNREADABLE_FILE = "unreadable-file"
    SECRET_FILE = "secret-file"
    SECRET_AT_CURSOR = "secret-at-cursor"

    # The repository and its index
    MISSING_REPO = "missing-repo"
    NOT_A_FOLDER = "not-a-folder"
    NOT_A_REPO = "not-a-repo"
    NO_INDEX = "no-index"
    NOT_INDEXED = "not-indexed"
    OLD_INDEX = "old-index"
    DAMAGED_INDEX = "damaged-index"
    UNTRUSTED_INDEX = "untrusted-index"
    NO_SEAL_KEY = "no-seal-key"
    CONFIG_CHANGED = "config-changed"
    INDEX = "index"
    INDEX_WRITE = "index-write"

    # Options a person gave
    BAD_OPTION = "bad-option"
    BAD_CONFIG = "bad-config"  # `config show`: a settings file that cannot be read
    BAD_STRATEGY = "bad-strategy"
    NEEDS_CONFIRMATION = "needs-confirmation"

    # Models: the file, its download, loading it
    MODEL_MISSING = "model-missing"
    MODEL_UNREADABLE = "model-unreadable"
    MODEL_FORMAT = "model-format"
    MODEL_HASH = "model-hash"
    MODEL_DOWNLOAD = "model-download"
    MODEL_LOAD = "model-load"

    # Backends: a call to the model
    BACKEND_MISSING = "backend-missing"
    BACKEND_CLOSED = "backend-closed"
    BACKEND_AUTH = "backend-auth"
    BACKEND_ERROR = "backend-error"
    BACKEND_INTERRUPTED = "backend-interrupted"
    BACKEND_TIMEOUT = "backend-timeout"
    BACKEND_UNREACHABLE = "backend-unreachable"
    BAD_ENDPOINT = "bad-endpoint"
    BAD_RESPONSE = "bad-response"
    GENERATION = "generation"
    DEFERRED = "deferred"  # eval run --defer: written out for another machine to generate
    MODEL_CRASHED = "model-crashed"
    PROMPT_TOO_LONG = "prompt-too-long"
    EMPTY_SUMMARY = "empty-summary"

    # The language server
    SERVE_FAILED = "serve-failed"
    DAEMON_FAILED = "daemon-failed"  # `repomem daemon start`: it could not start or did not answer
    BAD_TOKEN_FILE = "bad-token-file"
    FEEDBACK_WRITE = "feedback-write"

    # Packages fetched as evaluation sources (repomem/packages.py)
    UNPINNED = "unpinned"
    DOWNLOAD_FAILED = "download-failed"
    HASH_MISMATCH = "hash-mismatch"
    UNPACK_FAILED = "unpack-failed"

    # The evaluator
    BAD_DEVSET = "bad-devset"
    BAD_TASK = "bad-task"
    MISSING_TASKS = "missing-tasks"
    NO_TASKS = "no-tasks"
    UNREADABLE_TASKS = "unreadable-tasks"
    MISSING_TASK_FILE = "missing-task-file"
    TASK_OUTSIDE = "task-outside"
    TASK_PAST_END = "task-past-end"
    TASK_NOT_IN_FILE = "task-not-in-file"
    MISSING_SOURCE = "missing-source"
    NO_PYTHON_FILES = "no-python-files"
    WRITE_FAILED = "write-failed"
    MISSING_REPOS = "missing-repos"
    MIXED_MODELS = "mixed-models"
    NO_BACKEND = "no-backend"
    RUN_FAILING = "run-failing"
    MISSING_RESULTS = "missing-results"
    NO_RESULTS = "no-results"


@dataclass(frozen=True)
class Failure:
    kind: FailureKind  # a member only (TypeError otherwise)
    message: str  # one line for a person

    def __post_init__(self) -> None:
        if not isinstance(self.kind, FailureKind):
            raise TypeError(f"a failure's kind is a FailureKind member, not {self.kind!r}: {_member_hint(self.kind)}")

    def __str__(self) -> str:
        return self.message


def _member_hint(kind: object) -> str:
    """What to write instead of `kind` (the member its string names, or where to declare it)."""
    named = next((member for member in FailureKind if member.value == kind), None)
    return f"write FailureKind.{named.name}" if named is not None else "declare the kind in FailureKind"
