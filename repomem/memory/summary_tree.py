"""A live summary tree over the repository: HAT's hierarchical aggregate tree, with extractive
summaries (issue 14; MemWalker and ReadAgent build on the same tree).

Nodes: the root (""), one per folder ("pkg", "pkg/sub") and one per indexed file ("pkg/sub/m.py");
a file's leaves are its windows (the index's fragments). Summaries are extractive, so they cost
no model call and are exact functions of the text:

- a file: its path, its module docstring's first line and the signature line of every definition
  outside function bodies (up to `MAX_FILE_LINES`), in file order;
- a folder (and the root): its path and, for each child in path order, the child's name and the
  first `CHILD_LINES` lines of the child's summary, up to `MAX_FOLDER_LINES`.

Kept live: `update` re-summarises the changed files and then only the folders on their paths to
the root, each once, and a folder whose children's summaries did not change keeps its own (cached
by content hash). An edit of one file costs depth + 1 summaries, not the repository (tested
against a full rebuild). Retrieval is a best-first walk from the root by BM25 over the children's
summaries (`walk`).
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from repomem.config import BM25Config
from repomem.index.tokens import tokenize
from repomem.languages.parsed import FileSyntax
from repomem.memory.docstrings import docstring_line
from repomem.prompt_names import one_line

MAX_FILE_LINES = 40  # signature lines kept of one file (big modules have hundreds of methods)
CHILD_LINES = 3  # lines of each child's summary a folder repeats
MAX_FOLDER_LINES = 120


@dataclass(frozen=True)
class SummaryNode:
    path: str  # "" for the root
    kind: str  # "root" | "folder" | "file"
    children: tuple[str, ...]  # child node paths, sorted (files have none: their leaves are windows)
    text: str
    digest: str  # of `text`: a parent re-aggregates only when a child's digest changed
    child_digests: tuple[str, ...] = ()  # folders: the children's digests this aggregate was made from


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def file_summary(path: str, syntax: FileSyntax | None, lines: Sequence[str]) -> str:
    """The path, the module docstring's first line, then signature lines of definitions outside
    functions (classes, their methods, module-level functions), in file order."""
    out = [one_line(path)]
    docstring = docstring_line(lines, 0, len(lines))
    if docstring:
        out.append(docstring)
    if syntax is not None:
        starts = sorted({int(syntax.start_line[d.node]) for d in syntax.definitions if not d.in_function})
        for start in starts[:MAX_FILE_LINES]:
            if 0 <= start < len(lines):
                out.append(lines[start].strip())
    return "\n".join(out)


def folder_summary(path: str, children: Sequence[SummaryNode]) -> str:
    out = [one_line(path) or "."]
    for child in children:
        name = one_line(child.path.rsplit("/", 1)[-1]) + ("/" if child.kind == "folder" else "")
        body = child.text.split("\n")[1 : 1 + CHILD_LINES]
        out.append(f"{name}: " + " | ".join(body) if body else name)
        if len(out) >= MAX_FOLDER_LINES:
            break
    return "\n".join(out)


FileSource = Callable[[str], tuple[FileSyntax | None, Sequence[str]]]  # path -> (syntax, lines)
WrittenSummary = Callable[[str], str | None]  # digest of a file's extractive summary -> a model's, if any


def summary_key(extractive: str) -> str:
    """What a model-written file summary is stored under: the hash of the extractive summary it
    was written from (written_summaries.py)."""
    return _digest(extractive)


def with_written(extractive: str, written: str | None) -> str:
    """The extractive summary with a model's one-line summary after the path line."""
    if not written:
        return extractive
    path, _, rest = extractive.partition("\n")
    return "\n".join(part for part in (path, " ".join(written.split()), rest) if part)


@dataclass
class SummaryTree:
    nodes: dict[str, SummaryNode] = field(default_factory=dict)
    file_digests: dict[str, str] = field(default_factory=dict)  # path -> content digest summarised
    kids: dict[str, set[str]] = field(default_factory=dict)  # folder -> child paths
    summarised: int = 0  # summaries computed by the last build or update (the cost HAT bounds)
    _scorer: _SummaryScorer | None = None  # BM25 statistics over the summaries, rebuilt after a change
    _scorer_stale: bool = False  # the summaries changed since: the next use rebuilds it, reusing its counts

    @classmethod
    def build(cls, files: Mapping[str, str], source: FileSource, written: WrittenSummary | None = None) -> SummaryTree:
        """`files`: path -> content digest of every indexed file."""
        tree = cls()
        tree.update(files, source, written)
        return tree

    def update(self, files: Mapping[str, str], source: FileSource, written: WrittenSummary | None = None) -> int:
        """Bring the tree to `files` (path -> content digest): changed and new files are
        re-summarised, removed ones dropped, and each folder on their paths re-aggregated at most
        once (not at all when its children's summaries did not change). Returns the number of
        summaries computed."""
        changed = [p for p, d in files.items() if self.file_digests.get(p) != d]
        removed = [p for p in self.file_digests if p not in files]
        self.summarised = 0
        dirty: set[str] = set()
        for path in removed:
            self.nodes.pop(path, None)
            del self.file_digests[path]
            self._unlink(path)
            dirty.update(_ancestors(path))
        for path in changed:
            syntax, lines = source(path)
            text = file_summary(path, syntax, lines)
            if written is not None:
                text = with_written(text, written(summary_key(text)))
            self.nodes[path] = SummaryNode(path, "file", (), text, _digest(text))
            self.file_digests[path] = files[path]
            for parent, child in _ancestor_pairs(path):
                self.kids.setdefault(parent, set()).add(child)
            self.summarised += 1
            dirty.update(_ancestors(path))
        if "" not in self.nodes:
            dirty.add("")
        if changed or removed:
            self._scorer_stale = True
        # Deepest folders first, so each reads its children's new summaries.
        for folder in sorted(dirty, key=lambda p: (-(p.count("/") + (p != "")), p)):
            children = tuple(sorted(self.kids.get(folder, ())))
            if folder and not children:
                # Its last file went; a file of the folder's name (a folder replaced by a file) stays.
                if folder in self.nodes and self.nodes[folder].kind != "file":
                    del self.nodes[folder]
                continue
            digests = tuple(self.nodes[c].digest for c in children)
            previous = self.nodes.get(folder)
            if previous is not None and previous.children == children and previous.child_digests == digests:
                continue  # nothing below changed: the cached aggregate stands
            text = folder_summary(folder, [self.nodes[c] for c in children])
            self.nodes[folder] = SummaryNode(folder, "folder" if folder else "root", children, text, _digest(text),
                                             digests)
            self.summarised += 1
        return self.summarised

    def _unlink(self, path: str) -> None:
        """Remove `path` from its folder, and folders left empty from theirs."""
        for parent, child in _ancestor_pairs(path):
            siblings = self.kids.get(parent)
            if siblings is None:
                return
            siblings.discard(child)
            if siblings or parent == "":
                return
            del self.kids[parent]

    def _scorer_for(self, config: BM25Config) -> _SummaryScorer:
        if self._scorer is None or self._scorer_stale or self._scorer.config != config:
            self._scorer = _SummaryScorer(self.nodes.values(), config, self._scorer)
            self._scorer_stale = False
        return self._scorer

    def ranked_children(self, path: str, query: str, config: BM25Config) -> list[tuple[SummaryNode, float]]:
        """A folder's children, best first by BM25 of their summaries against `query` (ties in path order)."""
        scorer = self._scorer_for(config)
        terms = Counter(tokenize(query, config))
        scored = [(self.nodes[child], scorer.score(terms, child)) for child in self.nodes[path].children]
        return sorted(scored, key=lambda pair: -pair[1])

    def files_under(self, path: str) -> list[str]:
        """Every file at or below a node, in the children's order (iterative: folder trees a
        thousand levels deep index fine, and a recursion ran out of stack on them)."""
        found: list[str] = []
        stack = [path]
        while stack:
            node = self.nodes.get(stack.pop())
            if node is None:
                continue
            if node.kind == "file":
                found.append(node.path)
            else:
                stack.extend(reversed(node.children))
        return found

    def walk(self, query: str, config: BM25Config, want_files: int, max_steps: int,
             leave_out: frozenset[str] = frozenset()) -> WalkResult:
        """Best-first from the root: pop the best-scoring node, score its children's summaries by
        BM25 against the query, push them; a file popped is reached, unless `leave_out` names it
        (the cursor's own file, whose summary matches a query made of its lines best and which the
        caller ranks anyway). Stops at `want_files` files or `max_steps` folders expanded."""
        query_terms = Counter(tokenize(query, config))
        scorer = self._scorer_for(config)
        frontier: list[tuple[float, str]] = [(-0.0, "")]
        reached: list[tuple[str, float]] = []
        steps = scored = 0
        while frontier and len(reached) < want_files and steps < max_steps:
            negative, path = heapq.heappop(frontier)
            node = self.nodes[path]
            if node.kind == "file":
                if path not in leave_out:
                    reached.append((path, -negative))
                continue
            steps += 1
            for child in node.children:
                heapq.heappush(frontier, (-scorer.score(query_terms, child), child))
                scored += 1
        return WalkResult(tuple(reached), steps, scored)


@dataclass(frozen=True)
class WalkResult:
    files: tuple[tuple[str, float], ...]  # (path, summary score) in the order reached
    steps: int  # folders expanded
    scored: int  # summaries scored


def _ancestors(path: str) -> list[str]:
    """Folders above a file, nearest first, ending with the root ""."""
    out = []
    while path:
        path = parent_of(path)
        out.append(path)
    return out


def _ancestor_pairs(path: str) -> list[tuple[str, str]]:
    """(folder, its child on the way to `path`) for every folder above `path`."""
    out = []
    child = path
    while child:
        parent = parent_of(child)
        out.append((parent, child))
        child = parent
    return out


class _SummaryScorer:
    """BM25 (Okapi) over summary texts as documents, idf over every node of the tree."""

    def __init__(self, nodes: Iterable[SummaryNode], config: BM25Config, previous: _SummaryScorer | None = None):
        """Term counts of unchanged summaries are taken from `previous` (by digest)."""
        self.config = config
        self.terms: dict[str, Counter] = {}
        self.digests: dict[str, str] = {}
        reuse = previous is not None and previous.config == config
        df: Counter = Counter()
        for node in nodes:
            if reuse and previous.digests.get(node.path) == node.digest:
                terms = previous.terms[node.path]
            else:
                terms = Counter(tokenize(node.text, config))
            self.terms[node.path] = terms
            self.digests[node.path] = node.digest
            df.update(terms.keys())
        n = max(1, len(self.terms))
        self.average = sum(sum(t.values()) for t in self.terms.values()) / n or 1.0
        self.idf = {term: math.log((n - count + 0.5) / (count + 0.5) + 1.0) for term, count in df.items()}

    def score(self, query: Counter, path: str) -> float:
        terms = self.terms.get(path)
        if not terms:
            return 0.0
        length = sum(terms.values())
        k1, b = self.config.k1, self.config.b
        total = 0.0
        for term, count in query.items():
            tf = terms.get(term, 0)
            if tf:
                total += count * self.idf[term] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / self.average))
        return total
