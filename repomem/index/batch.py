"""A parse worker's results on their way to the indexing process, as a few long arrays.

A worker analyses a run of files and sends the analyses back by pickle. Pickled one by one, each
file's dozen small arrays is an object to rebuild, and unpickling them took the indexing process
CPU while the two workers parsed (it shares their two cores; see
docs/measurements.md#parsing-and-analysis). Here every array field is joined across the run into
one array, and each file gets views into it back: a run's files cost one array per field.

Fields join by part and name ("tokens.ids"), so a part the index lets go of early (the BM25 tokens,
dropped before the relation phase) frees its own arrays, not its neighbours'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from repomem.index.fragments import FileFragments
from repomem.index.repo_index import FileAnalysis
from repomem.index.tokens import LineTokens
from repomem.languages.parsed import CallSites, FileSyntax

# FileAnalysis's parts, in its field order.
_PARTS: tuple[tuple[str, type], ...] = (("syntax", FileSyntax), ("fragments", FileFragments), ("tokens", LineTokens))


@dataclass(frozen=True)
class AnalysisBatch:
    """Analyses of a run of files: every 1-d array field joined across the files."""

    columns: dict[str, np.ndarray]  # "part.field" -> the files' arrays end to end
    bounds: dict[str, np.ndarray]  # "part.field" -> int64, shape (n_files + 1,): file f's slice
    # Per file, per part: the fields that are not joined (names, symbol tables, flags, and any
    # array whose shape or dtype does not fit its column).
    rest: list[tuple[dict[str, Any], ...]]


def _rebuilt(cls: type, state: dict[str, Any]) -> object:
    part = cls.__new__(cls)
    part.__dict__.update(state)  # frozen dataclasses: __setattr__ refuses, __dict__ does not
    return part


def pack_analyses(analyses: Sequence[FileAnalysis]) -> AnalysisBatch:
    """`analyses` as one array per field (see the module's docstring); each call site name one
    object in the batch, which pickles it once."""
    # A part's state is its __dict__ (plain frozen dataclasses, as pickle would take it).
    states = [tuple(dict(vars(getattr(analysis, name))) for name, _ in _PARTS) for analysis in analyses]
    _share_call_names(states, {})
    columns: dict[str, np.ndarray] = {}
    bounds: dict[str, np.ndarray] = {}
    for at, (part_name, _) in enumerate(_PARTS):
        names = list(states[0][at]) if states else []
        for name in names:
            values = [state[at].get(name) for state in states]
            first = values[0]
            if not isinstance(first, np.ndarray) or first.ndim != 1:
                continue
            if not all(isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype == first.dtype for v in values):
                continue  # left in each file's state, pickled as it is
            key = f"{part_name}.{name}"
            bounds[key] = np.zeros(len(values) + 1, dtype=np.int64)
            np.cumsum([v.shape[0] for v in values], out=bounds[key][1:])
            columns[key] = np.concatenate(values)
            for state in states:
                del state[at][name]
    return AnalysisBatch(columns, bounds, states)


def _share_call_names(states: Sequence[tuple[dict[str, Any], ...]], names: dict[str, str]) -> None:
    """The files' call sites (their syntax parts' `calls`) with the names `names` holds."""
    for state in states:
        calls = state[0].get("calls")
        if isinstance(calls, CallSites):
            state[0]["calls"] = calls.sharing_names(names)


def unpack_analyses(batch: AnalysisBatch, names: dict[str, str] | None = None) -> list[FileAnalysis]:
    """The analyses `pack_analyses` was given, their arrays views into the batch's columns;
    `names`: the call site names of the batches unpacked before (CallSites.sharing_names), which
    these share and extend."""
    if names is not None:
        _share_call_names(batch.rest, names)
    out: list[FileAnalysis] = []
    for file, states in enumerate(batch.rest):
        parts = []
        for at, (part_name, cls) in enumerate(_PARTS):
            state = dict(states[at])
            prefix = f"{part_name}."
            for key, column in batch.columns.items():
                if key.startswith(prefix):
                    bound = batch.bounds[key]
                    state[key[len(prefix):]] = column[bound[file] : bound[file + 1]]
            parts.append(_rebuilt(cls, state))
        out.append(FileAnalysis(*parts))
    return out
