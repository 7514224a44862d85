"""The retrievers of the memory strategies that ask the model while they retrieve (issue 14):
MemWalker (navigate the summary tree), ReadAgent (gists, then look pages up) and QRMeM (walk the
entity graph, reflect). The memories themselves live in repomem/memory/ (the service holds them,
`view.memories`); this module joins them to BM25 over the index and to the request's
`MemoryModel` (budgeted, recorded calls).

Each returns its own findings first, best first, then fills the block budget with BM25 windows
from where it looked (below the node MemWalker reached; the global ranking for QRMeM), so the
prompt never holds less context than its findings can fill. Without a model (or once the budget
is spent) every decision falls back to the BM25-best choice, recorded in the call log.
"""

from __future__ import annotations

from repomem.completion.levers.signature_lines import signature_span
from repomem.completion.model_calls import MemoryModel, chosen_numbers, says_yes
from repomem.completion.retrieval_round import RoundQuery, bm25_within
from repomem.languages.registry import line_comment_of
from repomem.memory.entities import Entity, Usage, asked_name, names_at_cursor, reflection_question
from repomem.memory.gists import Page, lookup_question
from repomem.memory.memwalker import Option, navigation_question, walk
from repomem.memory.summary_tree import SummaryNode, SummaryTree, parent_of
from repomem.prompt_names import one_line
from repomem.repo_view import RepoView
from repomem.retrieval.scoring import ScoredFragment

QUESTION_CODE_LINES = 12  # lines before the cursor a memory question shows (the model is small)
USAGE_CONTEXT_LINES = 3  # lines shown around a usage site, each side
NAMES_CONSIDERED = 64  # names read at the cursor, nearest first, before those the memory knows are taken


QUESTION_LINE_CHARS = 200  # characters a memory question shows of one line (minified lines run to thousands)
SUMMARY_LINE_CHARS = 300  # characters of one summary a navigation option shows


def question_code(query_text: str) -> str:
    """The code a memory question shows: the last lines before the cursor, each cut to
    QUESTION_LINE_CHARS (the cursor's line from its end, the others from their start), so twelve
    long lines cannot make a question longer than the model's window (the questions have no token
    budget of their own)."""
    lines = query_text.rstrip("\n").split("\n")[-QUESTION_CODE_LINES:]
    cut = [_cut(line) for line in lines[:-1]]
    last = lines[-1]
    if len(last) > QUESTION_LINE_CHARS:
        last = "..." + last[-(QUESTION_LINE_CHARS - 3):]
    return "\n".join([*cut, last])


def _cut(line: str, limit: int = QUESTION_LINE_CHARS) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _ask_number(model: MemoryModel | None, purpose: str, question: str, allowed: range, limit: int,
                answer_tokens: int, labels: dict[int, str] | None = None) -> tuple[list[int], bool]:
    """(numbers the model chose, whether a call was made): nothing when it was not asked (no
    model, budget spent, cancelled) or named no allowed number (nor, `labels`, an option's name)."""
    if model is None:
        return [], False
    before = len(model.calls)
    answer = model.ask(purpose, question, answer_tokens)
    return chosen_numbers(answer, allowed, limit, labels), len(model.calls) > before


# -- MemWalker -----------------------------------------------------------------------------------

def _summary_line(node: SummaryNode, lines: int) -> str:
    return _cut(" | ".join(node.text.split("\n")[1 : 1 + lines]), SUMMARY_LINE_CHARS)


def _window_summary(text: str) -> str:
    """A window's definition lines, else its first two non-blank lines."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    heads = [line for line in lines if line.startswith(("def ", "async def ", "class ", "@"))]
    return " | ".join((heads or lines)[:2])[:160]


def _only_the_cursors(tree: SummaryTree, node: SummaryNode, cursor_path: str) -> bool:
    """Whether `node` is the cursor's file or a folder whose only file that is."""
    if node.kind == "file":
        return node.path == cursor_path
    return cursor_path.startswith(node.path + "/") and tree.files_under(node.path) == [cursor_path]


def memory_walk(view: RepoView, query: RoundQuery) -> list[ScoredFragment]:
    if not view.index_loaded:
        return []
    settings = view.config.memory
    tree = view.memories.summary_tree()
    windows: dict[int, ScoredFragment] = {}

    def children(node: str) -> list[Option]:
        kind = tree.nodes[node].kind
        if kind == "file":
            found = bm25_within(view, query, {node}, settings.walk_children * 2)
            windows.update((f.fragment, f) for f in found)
            return [Option(f"#{f.fragment}", f"lines {f.start_line + 1}-{f.end_line}",
                           _window_summary(view.fragment_text(f)), f.s_ind, f.fragment) for f in found]
        # The prompt shows the cursor's file already: neither it nor a folder holding only it is
        # offered (a folder's summary repeats its files', so that one ranked first and cost a call).
        return [Option(child.path, child.path.rsplit("/", 1)[-1] + ("/" if child.kind == "folder" else ""),
                       _summary_line(child, settings.summary_lines), score)
                for child, score in tree.ranked_children(node, query.text, view.config.bm25)
                if not _only_the_cursors(tree, child, query.cursor.path)]

    def choose(node: str, options) -> int | None:
        label = f"the file {node}" if tree.nodes[node].kind == "file" else (
            f"the folder {node}/" if node else "the repository")
        question = navigation_question(query.cursor.path, question_code(query.text), label, options, True)
        picks, asked = _ask_number(query.model, "navigate", question, range(0, len(options) + 1), 1,
                                   settings.answer_tokens, {n: option.label for n, option in enumerate(options, 1)})
        number = picks[0] if picks else None
        if asked:
            query.model.decided("back" if number == 0 else f"{number}: {options[number - 1].label}" if number
                                else f"fallback: {options[0].label} (best BM25)")
        return number

    steps = settings.max_calls if query.model is not None else settings.walk_leaves * 8
    outcome = walk("", children, choose, settings.walk_leaves, steps, parent_of, settings.walk_children)
    collected = [windows[w] for w in outcome.windows]
    taken = {f.fragment for f in collected}
    fill = bm25_within(view, query, set(tree.files_under(outcome.last_node)) | {query.cursor.path},
                       view.config.retrieval.top_k)
    return [*collected, *(f for f in fill if f.fragment not in taken)]


# -- ReadAgent -----------------------------------------------------------------------------------

def gist_lookup(view: RepoView, query: RoundQuery) -> list[ScoredFragment]:
    if not view.index_loaded:
        return []
    settings = view.config.memory
    memory = view.memories.gist_memory()
    # Pages scored by their best window's BM25 (the index's windows, no second index), other files
    # only: left out of the search itself, since a large cursor file's own windows took every place.
    found = bm25_within(view, query, None, settings.gist_pages * 3, leave_out=frozenset({query.cursor.path}))
    scores: dict[Page, tuple[float, int]] = {}
    for f in found:
        for line in (f.start_line, max(f.start_line, f.end_line - 1)):
            page = memory.page_at(f.path, line)
            if page is not None and (page not in scores or scores[page][0] < f.s_ind):
                scores[page] = (f.s_ind, f.fragment)
    ranked = sorted(scores, key=lambda p: -scores[p][0])[: settings.gist_pages]
    if not ranked:  # no page to look up: the memory degrades to retrieval
        return bm25_within(view, query, None, view.config.retrieval.top_k)
    question = lookup_question(query.cursor.path, question_code(query.text), ranked, settings.lookup_pages)
    picks, asked = _ask_number(query.model, "look-up", question, range(1, len(ranked) + 1), settings.lookup_pages,
                               settings.answer_tokens)
    if asked:
        query.model.decided(f"read pages {', '.join(map(str, picks))}" if picks else "fallback: the best page")
    looked_up = [ranked[n - 1] for n in (picks or [1])]

    def as_fragment(page: Page, gist: bool) -> ScoredFragment:
        score, fragment = scores[page]
        return ScoredFragment(fragment, page.path, page.start_line, page.end_line, score, 0.0, score,
                              text=page.gist if gist else None)

    return [*(as_fragment(p, False) for p in looked_up),
            *(as_fragment(p, True) for p in ranked if p not in looked_up)]


# -- QRMeM ---------------------------------------------------------------------------------------

def entity_walk(view: RepoView, query: RoundQuery) -> list[ScoredFragment]:
    if not view.index_loaded:
        return []
    settings = view.config.memory
    memory = view.memories.entity_memory()
    here = query.cursor.path
    lines_of: dict[str, list[str]] = {}

    def lines(path: str) -> list[str]:
        if path not in lines_of:
            lines_of[path] = view.span_text(path, 0, 1 << 30).split("\n")
        return lines_of[path]

    evidence: list[Entity | Usage] = []
    seen: set[tuple[str, int]] = set()

    def key_of(item: Entity | Usage) -> tuple[str, int]:
        return item.path, item.start_line if isinstance(item, Entity) else item.line

    def add(items) -> None:
        for item in items:
            key = key_of(item)
            if key not in seen and len(evidence) < settings.entity_evidence * (settings.reflect_rounds + 1):
                seen.add(key)
                evidence.append(item)

    named = 0  # names at the cursor the memory knows, nearest first, up to memory.entity_names
    for name in names_at_cursor(question_code(query.text), NAMES_CONSIDERED, line_comment_of(query.cursor.path)):
        found = memory.look_up(name, here)
        if found:
            add(found)
            named += 1
            if named == settings.entity_names:
                break
    evidence = evidence[: settings.entity_evidence]
    # What the cut left out may be looked up again (the model may ask for a name it cut).
    seen.clear()
    seen.update(key_of(item) for item in evidence)
    for _ in range(settings.reflect_rounds):
        if query.model is None or not evidence:
            break
        shown = [_evidence_line(item, lines(item.path)) for item in evidence]
        answer = query.model.ask("reflect", reflection_question(here, question_code(query.text), shown),
                                 settings.answer_tokens)
        if answer is None:
            break
        if says_yes(answer):
            query.model.decided("enough")
            break
        before = len(evidence)
        name = asked_name(answer, memory.by_name)
        if name is not None:
            add(memory.look_up(name, here, 2))
        expanded = len(evidence) == before
        if expanded:  # nothing named, or nothing new under that name: one hop out
            frontier = [item for item in evidence if isinstance(item, Entity)]
            for entity in frontier:
                add(memory.callees(entity, 2))
                add(memory.usages(entity, 1, outside=here))
        query.model.decided(f"look up {name}" if name and not expanded else
                            f"look up {name}: nothing new, expand one hop" if name else "expand one hop")
    out: list[ScoredFragment] = []
    for item in evidence:
        fragment = _window_of(view, query, item)
        if fragment is None:
            continue
        if isinstance(item, Entity):
            start, stop = signature_span(lines(item.path), item.start_line, item.end_line,
                                         view.config.prompt.definition_lines)
        else:
            start = max(0, item.line - USAGE_CONTEXT_LINES)
            stop = min(len(lines(item.path)), item.line + USAGE_CONTEXT_LINES + 1)
        out.append(ScoredFragment(fragment, item.path, start, stop, 0.0, 0.0, 1.0))
    taken = {f.fragment for f in out}
    fill = bm25_within(view, query, None, view.config.retrieval.top_k)
    return [*out, *(f for f in fill if f.fragment not in taken)]


def _evidence_line(item: Entity | Usage, lines: list[str]) -> str:
    if isinstance(item, Entity):
        head = lines[item.start_line].strip()[:120] if item.start_line < len(lines) else item.name
        return f"{head}  (in {one_line(item.path)})"
    text = lines[item.line].strip()[:120] if item.line < len(lines) else ""
    return f"{item.entity.name} is used in {one_line(item.path)}: {text}"


def _window_of(view: RepoView, query: RoundQuery, item: Entity | Usage) -> int | None:
    """A live window holding the item's line (its id names the block), None when the caller's
    masks hide it."""
    line = item.start_line if isinstance(item, Entity) else item.line
    fragment = view.live_window_holding(item.file_id, line)
    return fragment if fragment is not None and query.offers(fragment) else None
