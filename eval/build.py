"""Build RepoEval-protocol tasks from pinned package sources (docs/design.md section 6).

Follows RepoCoder's `random_benchmark.py` (line holes) and `api_benchmark.py` (API holes):

    OUT/line.jsonl, OUT/api.jsonl            one task per line, one file per split
    OUT/repositories/<repo>/...              the unpacked package source tree, files only

Each task is `{"prompt": ..., "metadata": {"task_id", "ground_truth", "fpath_tuple",
"context_start_lineno", "lineno", "split", ...}}` with 0-based lines: the hole starts at file line
`lineno` and `prompt` is lines[context_start_lineno:lineno], each ending with "\\n". API tasks add
`end_lineno` (inclusive) and `definition` (where the called function or class is defined).

Repository code is only read: never imported, built or run. The same dev set and seed give
byte-identical files; every file is written to a temporary name first and then renamed, so an
interrupted build leaves the previous files (or none), never half a file.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from repomem.completion.prompt import Tokenizer
from repomem.config import GraphConfig, ScanConfig, deepest_key
from repomem.evaluation.holes import CalledDefinition, Hole, PythonFile
from repomem.evaluation.language_holes import language_api_holes, language_line_holes
from repomem.failures import Failure, FailureKind
from repomem.index.scan import SourceFile, excluded_reason, source_from_bytes
from repomem.languages.language import Language
from repomem.languages.parsed import Definition, FileSyntax, split_lines
from repomem.languages.python.calls import PythonCallResolver
from repomem.languages.python.syntax import CALL_QUERY, MAX_DOTTED_PARTS
from repomem.languages.python.syntax import LANGUAGE_NAME as PYTHON
from repomem.languages.registry import LANGUAGES, language_named, language_of
from repomem.languages.syntax import extract_syntax
from repomem.languages.treesitter import Node, capture_nodes, parse
from repomem.packages import (
    DEB_SPEC,
    NPM_SPEC,
    deb_package_source,
    debian_source_package_source,
    npm_package_source,
    package_source,
)
from repomem.progress import NoProgress, Progress

SPLITS = ("line", "api")
_STRING_QUERY = "(string) @string"
_DOTTED_IDENTIFIERS = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
# Repository names become folder names under OUT/repositories and the first part of task ids.
_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Where a repository's archive comes from (`source` in the dev set), with an example of its pin.
SOURCE_KINDS = {"pypi": "requirement = \"name==1.0\"", "npm": "package = \"name@1.2.3\"",
                "deb": "package = \"name=1.2-1\"", "debsrc": "package = \"name=1.2-1\""}
# The dev sets shipped with repomem (eval/devsets/): "quick" (three repositories) and "ten".
DEVSETS = Path(__file__).resolve().parent / "devsets"


# -- the dev set ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class DevSetRepo:
    name: str  # folder name under OUT/repositories, e.g. "accelerate"
    # The pinned package: "accelerate==0.16.0" (pypi, the `requirement` field), "zod@3.22.4" (npm)
    # or "golang-github-spf13-cobra-dev=1.6.1-1" (deb: a binary package; debsrc: a source package's
    # upstream tarball), the last three from the `package` field.
    requirement: str
    sha256: str | None = None  # of the downloaded archive; a different one is refused
    source: str = "pypi"  # among SOURCE_KINDS
    root: str = ""  # the folder inside the unpacked package that is the repository ("" its top)
    language: str = PYTHON  # registry name of the language whose files make the holes


@dataclass(frozen=True)
class DevSet:
    seed: int
    tasks_per_repo: int  # per split
    splits: tuple[str, ...]  # among SPLITS
    repos: tuple[DevSetRepo, ...]


def load_devset(path: Path) -> DevSet | Failure:
    """Parse a dev set file such as bench/devset.toml; any problem is one Failure naming it."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except RecursionError:
        return Failure(FailureKind.BAD_DEVSET, f"{path}: {deepest_key(text) or 'a value'} is nested too deeply")
    except FileNotFoundError:
        return Failure(FailureKind.MISSING_FILE, f"{path}: no such dev set file")
    except (OSError, UnicodeDecodeError) as error:
        return Failure(FailureKind.BAD_DEVSET, f"{path}: cannot read the dev set: {error}")
    except tomllib.TOMLDecodeError as error:
        return Failure(FailureKind.BAD_DEVSET, f"{path}: not valid TOML: {error}")

    def bad(message: str) -> Failure:
        return Failure(FailureKind.BAD_DEVSET, f"{path}: {message}")

    seed = data.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        return bad("`seed` must be an integer")
    tasks_per_repo = data.get("tasks_per_repo")
    if not isinstance(tasks_per_repo, int) or isinstance(tasks_per_repo, bool) or tasks_per_repo < 1:
        return bad("`tasks_per_repo` must be a positive integer")
    splits = data.get("splits")
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
        return bad(f"`splits` must be a non-empty list of split names ({', '.join(SPLITS)})")
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        return bad(f"unknown split {unknown[0]!r} (known: {', '.join(SPLITS)})")
    if len(set(splits)) != len(splits):
        return bad("`splits` names a split twice")
    entries = data.get("repo")
    if not isinstance(entries, list) or not entries:
        return bad("no [[repo]] entries")
    repos: list[DevSetRepo] = []
    for number, entry in enumerate(entries, start=1):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not _REPO_NAME.fullmatch(name):
            return bad(f"[[repo]] number {number} needs a `name` made of letters, digits, '.', '_', '-'")
        if any(repo.name == name for repo in repos):
            return bad(f"[[repo]] {name!r} appears twice")
        repo = _devset_repo(name, entry)
        if isinstance(repo, str):  # "needs a ..." reads on from the name, any other problem after a colon
            return bad(f"[[repo]] {name!r} {repo}" if repo.startswith("needs") else f"[[repo]] {name!r}: {repo}")
        repos.append(repo)
    return DevSet(seed, tasks_per_repo, tuple(splits), tuple(repos))


def _devset_repo(name: str, entry: dict) -> DevSetRepo | str:
    """One [[repo]] entry, or what is wrong with it."""
    source = entry.get("source", "pypi")
    if source not in SOURCE_KINDS:
        return f"unknown `source` {source!r} (known: {', '.join(SOURCE_KINDS)})"
    sha256 = entry.get("sha256")
    if sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
        return "`sha256` must be 64 lowercase hex digits (the archive's SHA-256)"
    if source == "pypi":
        requirement = entry.get("requirement")
        if not isinstance(requirement, str) or not requirement.strip():
            return f"needs a `requirement` such as \"{name}==1.0\""
        pinned = requirement.strip()
    else:
        package = entry.get("package")
        if not isinstance(package, str) or not package.strip():
            return f"needs a `package` such as {SOURCE_KINDS[source].split(' = ')[1]} (source {source!r})"
        pinned = package.strip()
        if not (NPM_SPEC if source == "npm" else DEB_SPEC).fullmatch(pinned):
            return f"`package` {pinned!r} is not an exact pin such as {SOURCE_KINDS[source].split(' = ')[1]}"
        # pip's own check covers PyPI; a tarball or .deb is only trusted by its hash.
        if sha256 is None:
            return f"a {source} package needs its archive's `sha256`"
    root = entry.get("root", "")
    if not isinstance(root, str) or not _inside_relative_path(root):
        return "`root` must be a relative folder inside the package, without '..' (e.g. \"usr/share/gocode/src/x\")"
    language = entry.get("language", PYTHON)
    known = sorted(known_language.name for known_language in LANGUAGES)
    if language not in known:
        return f"unknown `language` {language!r} (known: {', '.join(known)})"
    return DevSetRepo(name, pinned, sha256, source, root.strip("/"), language)


def _inside_relative_path(path: str) -> bool:
    """'' or a/b/c: relative, POSIX, no '..', '.' or empty part that could leave the package."""
    if path == "":
        return True
    parts = path.strip("/").split("/") if not path.startswith("/") else ["/"]
    return "\\" not in path and all(part not in ("", ".", "..", "/") for part in parts)


def shipped_devset(name: str) -> Path | None:
    """The file of a dev set shipped in eval/devsets/ by its name ("quick", "ten"); None otherwise."""
    path = DEVSETS / f"{name}.toml"
    return path if _REPO_NAME.fullmatch(name) and path.is_file() else None


# -- reading a repository ------------------------------------------------------------------------

def read_python_files(root: Path, scan: ScanConfig = ScanConfig()) -> list[PythonFile]:
    """Every `.py` file under `root`, sorted by path; test files are kept (RepoCoder kept them).

    Skipped, as the index skips them (so every hole file is one the evaluation can index): files
    under excluded folders, symlinks, binary, huge or minified files; also files that are not valid
    UTF-8, whose lines the evaluation could not reproduce.
    """
    return _read_files(root, PYTHON, lambda path: path.endswith(".py"), scan)


def read_language_files(root: Path, language: Language, scan: ScanConfig = ScanConfig()) -> list[PythonFile]:
    """Every file under `root` with one of the language's extensions (the registry's), sorted by
    path, skipped as `read_python_files` skips them."""
    return _read_files(root, language.name, lambda path: language_of(path) == language.name, scan)


def _read_files(root: Path, language_name: str, wanted: Callable[[str], bool], scan: ScanConfig) -> list[PythonFile]:
    found: list[PythonFile] = []
    for path in _regular_files(root):
        if not wanted(path) or excluded_reason(path, scan) is not None:
            continue
        try:
            data = (root / path).read_bytes()
            data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        source = source_from_bytes(path, language_name, data, 0, scan)
        if isinstance(source, SourceFile):
            found.append(PythonFile(path, source.text, tuple(split_lines(source.text))))
    return found


def _regular_files(root: Path) -> list[str]:
    """Repository-relative paths of the regular files under `root` (no symlinks), sorted."""
    found: list[str] = []
    top = str(root)
    for directory, dir_names, file_names in os.walk(top, followlinks=False):
        dir_names.sort()
        relative = os.path.relpath(directory, top).replace(os.sep, "/")
        prefix = "" if relative == "." else relative + "/"
        for name in file_names:
            full = os.path.join(directory, name)
            if not os.path.islink(full) and os.path.isfile(full):
                found.append(prefix + name)
    return sorted(found)


# -- holes ---------------------------------------------------------------------------------------

def multiline_string_lines(file: PythonFile) -> set[int]:
    """0-based lines that are string text of a string spanning several lines (docstrings).

    The lines after a multi-line string's first line start inside it; its first line counts too
    when nothing precedes the string there (`\"\"\"Docstring`), but not `x = \"\"\"...`.
    """
    source = file.text.encode("utf-8")
    root = parse(PYTHON, source).root_node
    inside: set[int] = set()
    for node in capture_nodes(PYTHON, _STRING_QUERY, root, "string"):
        first, last = node.start_point[0], node.end_point[0]
        if first == last:
            continue
        inside.update(range(first + 1, last + 1))
        before = file.lines[first].encode("utf-8")[: node.start_point[1]]
        if not before.strip():
            inside.add(first)
    return inside


def line_holes(file: PythonFile) -> list[Hole]:
    """Eligible line holes of one file, by line: code lines (not blank, not a `#` comment, not
    inside a multi-line string), not the first line, not right after a blank line."""
    in_strings = multiline_string_lines(file)
    lines = file.lines
    holes: list[Hole] = []
    for lineno in range(1, len(lines)):
        code = lines[lineno].strip()
        if not code or code.startswith("#") or not lines[lineno - 1].strip() or lineno in in_strings:
            continue
        holes.append(Hole(file, lineno, lineno))
    return holes


def _dotted_callee(node: Node) -> str | None:
    """'a.b.f' when the callee is a chain of identifiers, else None (`x().f`, `x[0].f`)."""
    text = node.text.decode("utf-8") if node.text is not None else ""
    if not _DOTTED_IDENTIFIERS.fullmatch(text) or text.count(".") >= MAX_DOTTED_PARTS:
        return None
    return text


def _owning_class(syntax: FileSyntax, method: Definition) -> Definition | None:
    """The class statement a method is defined in (so that `X.__init__(...)` maps to X)."""
    for definition in syntax.definitions:
        qualified = f"{definition.scope}.{definition.name}" if definition.scope else definition.name
        if definition.kind == "class" and not definition.in_function and qualified == method.scope:
            return definition
    return None


def api_holes(files: Sequence[PythonFile], graph: GraphConfig = GraphConfig()) -> list[Hole]:
    """API holes of a repository, by path and line: calls whose callee's first name is bound by
    an import of the file and which resolve, through repomem's resolver, to a function, method
    or class defined in another file of the repository. One hole per start line: the call there
    spanning most lines (the first in document order on ties)."""
    syntaxes = {number: extract_syntax(f.path, PYTHON, f.text, "statement") for number, f in enumerate(files)}
    resolver = PythonCallResolver(syntaxes, graph.max_reexport_hops, graph.max_base_class_depth)
    holes: list[Hole] = []
    for number, file in enumerate(files):
        imported = {binding.local.split(".")[0] for binding in syntaxes[number].imports}
        resolved: dict[str, CalledDefinition | None] = {}
        by_start: dict[int, Hole] = {}
        root = parse(PYTHON, file.text.encode("utf-8")).root_node
        # Document order decides ties; tree-sitter's capture order alone is not stable across runs.
        callees = sorted(capture_nodes(PYTHON, CALL_QUERY, root, "callee"), key=lambda n: n.start_byte)
        for callee in callees:
            dotted = _dotted_callee(callee)
            if dotted is None or dotted.split(".")[0] not in imported:
                continue
            if dotted not in resolved:
                # No enclosing class: it only matters for self./cls. callees, never imported names.
                resolved[dotted] = _called_definition(resolver, syntaxes, files, number, dotted)
            definition = resolved[dotted]
            call = callee.parent
            if definition is None or call is None:
                continue
            start, end = call.start_point[0], call.end_point[0]
            kept = by_start.get(start)
            if kept is None or end > kept.end_lineno:
                by_start[start] = Hole(file, start, end, definition)
        holes.extend(by_start[start] for start in sorted(by_start))
    return holes


def _called_definition(
    resolver: PythonCallResolver, syntaxes: dict[int, FileSyntax], files: Sequence[PythonFile], file_id: int,
    dotted: str,
) -> CalledDefinition | None:
    target = resolver.resolve_callee(file_id, dotted, "")
    if target is None or target[0] == file_id:
        return None
    target_file, definition = target
    syntax = syntaxes[target_file]
    if definition.in_function:  # nested functions are not APIs of the repository
        return None
    if definition.kind == "function" and definition.name == "__init__" and definition.scope:
        owner = _owning_class(syntax, definition)
        if owner is None:
            return None
        definition = owner
    line = int(syntax.start_line[definition.node])
    return CalledDefinition(files[target_file].path, line, definition.name, definition.kind)


def draw_holes(pool: Sequence[Hole], rng_key: str, n: int) -> list[Hole]:
    """Shuffle the pool with a RNG seeded by `rng_key`, skip holes whose stripped ground truth
    was already drawn, stop at `n` (RepoCoder's construction)."""
    order = list(pool)
    random.Random(rng_key).shuffle(order)
    drawn: list[Hole] = []
    seen: set[tuple[str, ...]] = set()
    for hole in order:
        if len(drawn) == n:
            break
        if hole.stripped in seen:
            continue
        seen.add(hole.stripped)
        drawn.append(hole)
    return drawn


# -- prompts and tasks ---------------------------------------------------------------------------

def left_context(lines: Sequence[str], lineno: int, tokenizer: Tokenizer, max_prompt_tokens: int) -> tuple[str, int]:
    """(prompt, context_start_lineno): the most whole lines right before `lineno` whose text
    (each line + "\\n") counts at most `max_prompt_tokens` tokens; ("", lineno) if none fit.

    Token counting is the cost: gallop up from the hole (1, 2, 4, ... lines), then binary-search
    between the last window that fitted and the first that did not, so the texts counted add up
    to a few times the kept prompt rather than the whole file.
    """
    def text_from(start: int) -> str:
        return "".join(line + "\n" for line in lines[start:lineno])

    def fits(start: int) -> bool:
        return tokenizer.count(text_from(start)) <= max_prompt_tokens

    fitting, too_long = lineno, None
    step = 1
    while fitting > 0:
        start = max(lineno - step, 0)
        if not fits(start):
            too_long = start
            break
        fitting = start
        step *= 2
    if too_long is not None:
        while fitting - too_long > 1:
            middle = (fitting + too_long) // 2
            if fits(middle):
                fitting = middle
            else:
                too_long = middle
    return text_from(fitting), fitting


def hole_task(
    repo_name: str, split: str, k: int, hole: Hole, tokenizer: Tokenizer, max_prompt_tokens: int
) -> dict:
    """One task in the RepoEval JSONL format."""
    prompt, context_start = left_context(hole.file.lines, hole.lineno, tokenizer, max_prompt_tokens)
    metadata: dict = {
        "task_id": f"{repo_name}/{split}/{k}",
        "ground_truth": hole.ground_truth,
        "fpath_tuple": [repo_name, *PurePosixPath(hole.file.path).parts],
        "context_start_lineno": context_start,
        "lineno": hole.lineno,
        "split": split,
    }
    if hole.definition is not None:
        metadata["end_lineno"] = hole.end_lineno
        metadata["definition"] = {
            "path": hole.definition.path,
            "line": hole.definition.line,
            "name": hole.definition.name,
            "kind": hole.definition.kind,
        }
    return {"prompt": prompt, "metadata": metadata}


def _tasks(
    repo_name: str, split: str, pool: Sequence[Hole], seed: int, n: int, tokenizer: Tokenizer,
    max_prompt_tokens: int, progress: Progress | None,
) -> list[dict]:
    progress = progress or NoProgress()
    drawn = draw_holes(pool, f"{seed}:{repo_name}:{split}", n)
    progress.start(f"{repo_name}: {split} tasks", len(drawn))
    tasks = []
    for k, hole in enumerate(drawn):
        tasks.append(hole_task(repo_name, split, k, hole, tokenizer, max_prompt_tokens))
        progress.advance()
    return tasks


def line_tasks(
    repo_name: str, files: Sequence[PythonFile], seed: int, n: int, tokenizer: Tokenizer,
    max_prompt_tokens: int, progress: Progress | None = None,
) -> list[dict]:
    """Up to `n` line-completion tasks of one repository, k = 0.. in the order drawn."""
    pool = [hole for file in files for hole in line_holes(file)]
    return _tasks(repo_name, "line", pool, seed, n, tokenizer, max_prompt_tokens, progress)


def api_tasks(
    repo_name: str, files: Sequence[PythonFile], seed: int, n: int, tokenizer: Tokenizer,
    max_prompt_tokens: int, progress: Progress | None = None, graph: GraphConfig = GraphConfig(),
) -> list[dict]:
    """Up to `n` API-call completion tasks of one repository, k = 0.. in the order drawn."""
    pool = api_holes(files, graph)
    return _tasks(repo_name, "api", pool, seed, n, tokenizer, max_prompt_tokens, progress)


def hole_pool(split: str, files: Sequence[PythonFile], language: Language) -> list[Hole]:
    """Every eligible hole of a repository for one split: Python's own rules (`line_holes`,
    `api_holes`, as `line_tasks` / `api_tasks` draw from), any other language's from
    language_holes.py; no API holes for a language without call resolution."""
    if language.name == PYTHON:
        return [hole for file in files for hole in line_holes(file)] if split == "line" else api_holes(files)
    if split == "line":
        return [hole for file in files for hole in language_line_holes(file, language)]
    return language_api_holes(files, language) if language.resolves_calls else []


# -- the whole benchmark -------------------------------------------------------------------------

@dataclass(frozen=True)
class BuildReport:
    out: Path
    tasks: dict[str, int]  # split -> tasks written
    repo_tasks: dict[tuple[str, str], int]  # (repo name, split) -> tasks
    seconds: float  # wall time of the build
    # One line per thing the reader should know, e.g. a language without call resolution yet.
    notes: tuple[str, ...] = ()


def build_benchmark(
    devset: DevSet, out: Path, tokenizer: Tokenizer, progress: Progress | None = None,
    max_prompt_tokens: int = 2000, sources: dict[str, Path] | None = None,
) -> BuildReport | Failure:
    """Build every split of `devset` into `out` (see the module docstring for the layout).

    `sources` maps repo names to already unpacked source trees; without it each repository is
    the unpacked archive of its pinned package (a PyPI sdist or wheel, an npm tarball, a .deb),
    `root` inside it. Nothing is written until every repository has its tasks, so a failed
    download leaves `out` as it was. A Python repository's holes are Python's own (`line_holes`,
    `api_holes`); any other language's are `eval/language_holes.py`'s.
    """
    began = time.perf_counter()
    progress = progress or NoProgress()
    roots: dict[str, Path] = {}
    tasks: dict[str, list[dict]] = {split: [] for split in devset.splits}
    repo_tasks: dict[tuple[str, str], int] = {}
    notes: list[str] = []
    for repo in devset.repos:
        if sources is not None:
            if repo.name not in sources:
                return Failure(FailureKind.MISSING_SOURCE, f"no source folder given for repository {repo.name!r}")
            root = sources[repo.name]
        else:
            progress.start(f"{repo.name}: fetching {repo.requirement}", 1)
            fetched = fetch_package(repo)
            if isinstance(fetched, Failure):
                return replace(fetched, message=f"{repo.name}: {fetched.message}")
            root = fetched
            progress.advance()
        if not root.is_dir():
            return Failure(FailureKind.MISSING_SOURCE, f"{repo.name}: source folder {root} does not exist")
        language = language_named(repo.language)
        files = read_python_files(root) if repo.language == PYTHON else read_language_files(root, language)
        if not files:
            if repo.language == PYTHON:
                return Failure(FailureKind.NO_PYTHON_FILES, f"{repo.name}: no readable .py files under {root}")
            return Failure(FailureKind.MISSING_SOURCE, f"{repo.name}: no readable {language.name} files under {root}")
        roots[repo.name] = root
        if "api" in devset.splits and not language.resolves_calls:
            notes.append(f"{repo.name}: {language.name} has no call resolution yet, so no API tasks (line tasks only)")
        for split in devset.splits:
            pool = hole_pool(split, files, language)
            made = _tasks(repo.name, split, pool, devset.seed, devset.tasks_per_repo, tokenizer,
                          max_prompt_tokens, progress)
            tasks[split].extend(made)
            repo_tasks[(repo.name, split)] = len(made)

    try:
        out.mkdir(parents=True, exist_ok=True)
        progress.start("copying repositories", len(roots))
        for name, root in roots.items():
            replace_tree(root, out / "repositories" / name)
            progress.advance()
        for split, split_tasks in tasks.items():
            text = "".join(json.dumps(task, ensure_ascii=False) + "\n" for task in split_tasks)
            write_atomically(out / f"{split}.jsonl", text)
    except OSError as error:
        return Failure(FailureKind.WRITE_FAILED, f"cannot write the benchmark to {out}: {error}")
    return BuildReport(
        out=out,
        tasks={split: len(split_tasks) for split, split_tasks in tasks.items()},
        repo_tasks=repo_tasks,
        seconds=time.perf_counter() - began,
        notes=tuple(notes),
    )


def fetch_package(repo: DevSetRepo) -> Path | Failure:
    """The repository's source tree: its pinned archive, fetched by its kind and unpacked into the
    cache, then the `root` folder inside it (which must stay inside the package)."""
    if repo.source == "pypi":
        fetched = package_source(repo.requirement, repo.sha256)
    elif repo.sha256 is None:  # load_devset refuses it; a DevSetRepo made in code may not
        return Failure(FailureKind.UNPINNED, f"{repo.requirement}: a {repo.source} package needs its sha256")
    elif repo.source == "npm":
        fetched = npm_package_source(repo.requirement, repo.sha256)
    elif repo.source == "deb":
        fetched = deb_package_source(repo.requirement, repo.sha256)
    elif repo.source == "debsrc":
        fetched = debian_source_package_source(repo.requirement, repo.sha256)
    else:
        return Failure(FailureKind.BAD_DEVSET, f"unknown package source {repo.source!r}")
    if isinstance(fetched, Failure) or not repo.root:
        return fetched
    root = fetched / repo.root
    if not _inside_relative_path(repo.root) or not root.resolve().is_relative_to(fetched.resolve()):
        return Failure(FailureKind.BAD_DEVSET, f"root {repo.root!r} leaves the package {repo.requirement}")
    if not root.is_dir():
        return Failure(FailureKind.MISSING_SOURCE, f"{repo.requirement} has no folder {repo.root!r}")
    return root


def write_atomically(path: Path, text: str) -> None:
    """Write to a temporary sibling, flush it to disk, then rename over `path`."""
    temporary = path.with_name(f".{path.name}.partial")
    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def replace_tree(source: Path, destination: Path) -> None:
    """Make `destination` a copy of the regular files under `source` (symlinks are left out).

    The copy goes to a temporary sibling first; the old tree is then renamed away and removed,
    so `destination` is never a partial copy.
    """
    partial = destination.with_name(f".partial-{destination.name}")
    stale = destination.with_name(f".stale-{destination.name}")
    shutil.rmtree(partial, ignore_errors=True)
    for relative in _regular_files(source):
        if relative == ".complete":  # package_source's marker of a finished unpack, not source
            continue
        target = partial / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, target)
    partial.mkdir(parents=True, exist_ok=True)  # a tree without files is still a folder
    if destination.exists():
        shutil.rmtree(stale, ignore_errors=True)
        os.replace(destination, stale)
    os.replace(partial, destination)
    shutil.rmtree(stale, ignore_errors=True)
