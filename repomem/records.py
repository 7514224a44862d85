"""The one JSON shape of a retrieved fragment, shared by `repomem retrieve --json`,
`repomem complete --json`, the language server's `repomem.explain` and its feedback log.

Lines are 1-based and inclusive, as editors and compilers print them (ScoredFragment holds
0-based start and exclusive end). Evaluation records keep their own compact 0-based rows
(repomem.evaluation.run), read by the report and the ablation script.
"""

from __future__ import annotations

from typing import Any

from repomem.retrieval.scoring import Lift, ScoredFragment

JSON_VERSION = 1  # of every --json output; bumped only when a key changes meaning or goes away


def fragment_record(fragment: ScoredFragment, rank: int | None = None, *, text: str | None = None,
                    in_prompt: bool | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {} if rank is None else {"rank": rank}
    record.update({
        "path": fragment.path, "start_line": fragment.start_line + 1, "end_line": fragment.end_line,
        "s_ind": fragment.s_ind, "s_env": fragment.s_env, "s_rel": fragment.s_rel,
    })
    if text is not None:
        record["text"] = text
    if fragment.text is not None:
        record["summarised"] = True  # shown as a summary (gist) of these lines, not the lines
    if in_prompt is not None:
        record["in_prompt"] = in_prompt
    return record


def lift_record(lift: Lift) -> dict[str, Any]:
    """The neighbour that lifted a fragment most through W (eq. 9)."""
    return {
        "path": lift.path, "start_line": lift.start_line + 1, "end_line": lift.end_line,
        "weight": lift.weight, "s_ind": lift.s_ind, "share": lift.share,
    }
