"""MemWalker adapted to code: the model navigates the summary tree from the root to windows.

The tree is the live summary tree (summary_tree.py) with one more level: a file's children are
its windows (the index's fragments), each summarised by its definition lines (or its first lines).
At every node the model reads its children's summaries, numbered, and answers with the child to
enter, or 0 to go back up (backtracking: the node is then not offered again). Choosing a window
collects it, and the walk resumes from that window's folder. The walk stops when
`memory.walk_leaves` windows are collected, the request's model calls (`memory.max_calls`) are
spent, or the root has nothing left to offer.

Adapted where the paper's setting does not fit a repository or a small model:

- a node lists at most `memory.walk_children` children, its best by BM25 of their summaries
  against the cursor's lines (a folder of 300 files does not fit a 0.5B model's prompt);
- an answer without a valid number takes the best-scoring child (recorded as a fallback);
- the windows collected come first, then the best BM25 windows below the node the walk ended
  at, so the prompt's block budget is filled from where the model went.

The navigation itself (`walk`) is pure: it takes a `choose` function, which the retriever backs
with the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from repomem.prompt_names import one_line


@dataclass(frozen=True)
class Option:
    """One child offered at a step."""

    key: str  # a tree path ("pkg/sub", "pkg/m.py") or "#<fragment id>" for a window
    label: str  # name shown to the model
    summary: str  # one or two lines
    score: float  # BM25 of its summary against the query
    window: int | None = None  # fragment id when the child is a window

    @property
    def is_window(self) -> bool:
        return self.window is not None


@dataclass(frozen=True)
class Step:
    at: str  # the node whose children were offered
    offered: tuple[str, ...]  # option keys, in the numbered order
    picked: int  # 1-based option number, 0 = back, -1 = none (budget spent)
    fallback: bool  # True: the answer held no valid number, the best-scoring option was taken


@dataclass(frozen=True)
class WalkOutcome:
    windows: tuple[int, ...]  # collected, in order
    steps: tuple[Step, ...]
    last_node: str  # the tree node the walk was at when it stopped (the fill comes from below it)


# (node path, options numbered from 1) -> the option number chosen (0 = back), or None when the
# model gave no usable answer (the walk then takes option 1, the best-scoring one)
Choose = Callable[[str, Sequence[Option]], int | None]
# node path -> its children as options, best first (windows for a file, nodes for a folder)
Children = Callable[[str], Sequence[Option]]


def walk(root: str, children: Children, choose: Choose, want_windows: int, max_steps: int,
         parent_of: Callable[[str], str], width: int) -> WalkOutcome:
    """Navigate from `root` (see the module doc); at most `max_steps` choices."""
    path = [root]
    spent: set[str] = set()  # nodes backed out of, and windows collected
    collected: list[int] = []
    steps: list[Step] = []
    while path and len(collected) < want_windows and len(steps) < max_steps:
        node = path[-1]
        options = [o for o in children(node) if o.key not in spent][:width]
        if not options:
            spent.add(node)
            path.pop()
            continue
        answer = choose(node, options)
        fallback = answer is None or not 0 <= answer <= len(options)
        picked = 1 if fallback else answer
        steps.append(Step(node, tuple(o.key for o in options), picked, fallback))
        if picked == 0:
            spent.add(node)
            path.pop()
            continue
        option = options[picked - 1]
        if option.is_window:
            collected.append(option.window)
            spent.add(option.key)
            # Back to the folder holding this file: the next leaf may lie in another file.
            folder = parent_of(node)
            while len(path) > 1 and path[-1] != folder:
                path.pop()
            continue
        path.append(option.key)
    return WalkOutcome(tuple(collected), tuple(steps), path[-1] if path else root)


def navigation_question(code_path: str, code: str, node_label: str, options: Sequence[Option],
                        can_go_back: bool) -> str:
    """The prompt of one navigation step: the code at the cursor, then the numbered children."""
    lines = [f"Code is being written in {one_line(code_path)}. Its last lines:", "```", code.rstrip("\n"), "```",
             f"To write the next line, which part of {one_line(node_label)} should be read? Its parts:"]
    for number, option in enumerate(options, start=1):
        label = one_line(option.label)
        lines.append(f"{number}. {label}: {option.summary}" if option.summary else f"{number}. {label}")
    if can_go_back:
        lines.append("0. none of these (go back)")
    lines.append("Answer with the number of one part only.")
    return "\n".join(lines)
