"""Blocks that show what followed the match (prompt.continuation_lines)."""

from __future__ import annotations

import shutil
from pathlib import Path

from repomem.completion.continuation import (
    blocks_at,
    continued_blocks,
    continued_span,
    match_line,
    spans_of,
    strongest_clone,
    with_clone_at,
)
from repomem.completion.engine import CompletionEngine
from repomem.completion.prompt import ContextBlock
from repomem.config import Config, with_overrides
from repomem.positions import locate
from repomem.service import RepoService
from tests.unit.test_scope_imports import Words

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"

CLONE = ["    record = open_record(source)", "    record.validate(strict=True)", "    record.normalise(units='metric')"]
NEXT = "    record.publish(channel='nightly')"


def clone_file() -> list[str]:
    """40 lines: 17 lines like the query's, the 3-line clone ending on line 19 (the last line of
    the window [0, 20)), then what followed it there, then filler."""
    lines = [f"    value_{i} = compute_alpha(source, {i})" for i in range(17)]
    lines += CLONE + [NEXT, "", "    record.close()", "    return record"]
    lines += [f"unrelated_{i} = zeta({i})" for i in range(40 - len(lines))]
    return lines


def test_match_line_finds_the_clone_and_scores_it():
    lines = clone_file()
    row, similarity = match_line(lines, 0, 30, CLONE)
    assert row == 19 and similarity == 1.0
    row, similarity = match_line(lines, 0, 30, ["completely different words here", "and here", "x"])
    assert similarity < 0.2
    assert match_line(lines, 0, 2, CLONE) is None  # fewer non-blank lines than the tail


def test_the_window_slides_to_show_lines_after_the_match():
    lines = clone_file()
    # 4 non-blank lines after row 19: 20, 22, 23, 24 (line 21 is blank), so the window ends at 25.
    assert continued_span(lines, 0, 20, CLONE, 4, 0.5) == (5, 25)
    assert continued_span(lines, 0, 20, CLONE, 1, 0.5) == (1, 21)
    assert continued_span(lines, 10, 30, CLONE, 4, 0.5) == (10, 30)  # already shows them
    assert continued_span(lines, 0, 20, ["nothing", "alike", "here"], 4, 0.5) == (0, 20)  # weak match
    assert continued_span(lines, 0, 20, CLONE, 4, 1.01) == (0, 20)
    # A slide is capped at half the window, and never runs past the end of the file.
    short = clone_file()[:22]
    assert continued_span(short, 0, 20, CLONE, 4, 0.5) == (2, 22)
    assert continued_span(lines, 0, 20, CLONE, 40, 0.5) == (10, 30)


def test_continued_blocks_keep_gists_and_the_cursor_file_and_drop_repeated_spans():
    files = {"other.py": clone_file(), "here.py": clone_file()}
    text = "\n".join

    def block(fragment: int, path: str, start: int, end: int, summary: bool = False) -> ContextBlock:
        return ContextBlock(fragment, path, start, end, text(files[path][start:end]), 1.0, summary=summary)

    candidates = [block(0, "other.py", 0, 20), block(1, "other.py", 5, 25), block(2, "here.py", 0, 20),
                  block(3, "other.py", 0, 20, summary=True)]
    continued = continued_blocks(candidates, files.__getitem__, "here.py", CLONE, 4, 0.5)
    assert [(b.fragment, b.start_line, b.end_line) for b in continued] == [(0, 5, 25), (2, 0, 20), (3, 0, 20)]
    assert NEXT in continued[0].text and continued[0].text == text(files["other.py"][5:25])
    assert continued_blocks(candidates, files.__getitem__, "here.py", [], 4, 0.5) == candidates


def clone_repository(tmp_path: Path) -> tuple[RepoService, str, int]:
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root)
    (root / "shop" / "records.py").write_text("\n".join(["def publish_all(source):", *clone_file()[:-1]]) + "\n")
    lines = ["def publish_one(source):", *[f"    value_{i} = compute_alpha(source, {i})" for i in range(5)],
             *CLONE, ""]
    text = "\n".join(lines)
    (root / "shop" / "main.py").write_text(text)
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    return service, text, len(lines) - 1


def test_the_prompt_shows_the_line_after_the_clone_for_graph_aware_strategies_only(tmp_path):
    service, text, line = clone_repository(tmp_path)
    cursor = locate(service.root, "shop/main.py", text, line, None)
    shown = {}
    for strategy, lines in (("fragrel", 0), ("fragrel", 4), ("vanilla", 4)):
        config = with_overrides(service.config, completion={"max_prompt_tokens": 400, "fill_in_middle": False},
                                prompt={"continuation_lines": lines})
        engine = CompletionEngine(service, Words(), config)
        prompt = engine.prepare(engine.request(cursor, strategy)).prompt
        blocks = [b for b in prompt.blocks if b.path == "shop/records.py"]
        assert blocks, "the clone's file is retrieved"
        shown[strategy, lines] = (NEXT.strip() in prompt.text, blocks[-1].start_line)
    assert shown["fragrel", 0][0] is False  # the window [0, 20) of records.py ends on the clone's last line
    assert shown["fragrel", 4] == (True, shown["fragrel", 0][1] + 5)
    assert shown["vanilla", 4] == shown["fragrel", 0]  # RepoCoder's prompt stays exact


def test_stable_order_keeps_the_first_completions_lines_while_the_cursor_stays_in_the_function(tmp_path):
    service, text, line = clone_repository(tmp_path)
    config = with_overrides(service.config, completion={"max_prompt_tokens": 400, "fill_in_middle": False},
                            prompt={"continuation_lines": 4})

    def spans(engine: CompletionEngine, at: int) -> list[tuple[str, int, int]]:
        cursor = locate(service.root, "shop/main.py", text, at, None)
        prompt = engine.prepare(engine.request(cursor, "fragrel", order="stable")).prompt
        return [(b.path, b.start_line, b.end_line) for b in prompt.blocks if b.path == "shop/records.py"]

    earlier = line - 2  # the clone's first line only: a weaker match, shown where the window was
    alone = spans(CompletionEngine(service, Words(), config), earlier)
    engine = CompletionEngine(service, Words(), config)
    first = spans(engine, line)
    assert first != alone
    assert spans(engine, earlier) == first  # same function: the first completion's lines


def test_the_strongest_clone_with_a_line_after_it_moves_up_never_down():
    files = {"other.py": clone_file(), "here.py": clone_file(), "far.py": [f"zeta_{i} = omega({i})" for i in range(40)]}
    text = "\n".join

    def block(fragment: int, path: str, start: int, end: int, summary: bool = False) -> ContextBlock:
        return ContextBlock(fragment, path, start, end, text(files[path][start:end]), 1.0, summary=summary)

    ending_on_the_clone = block(1, "other.py", 0, 20)  # the match is its last line: nothing after it
    showing_what_followed = block(2, "other.py", 5, 25)
    blocks = [block(0, "far.py", 0, 20), ending_on_the_clone, block(4, "here.py", 0, 25),
              block(5, "other.py", 0, 25, summary=True), showing_what_followed]
    assert strongest_clone(blocks, files.__getitem__, "here.py", CLONE, 0.5) == 4
    assert strongest_clone(blocks, files.__getitem__, "here.py", CLONE, 1.01) is None
    assert strongest_clone(blocks, files.__getitem__, "here.py", [], 0.5) is None
    assert [b.fragment for b in with_clone_at(blocks, 4, 1)] == [0, 2, 1, 4, 5]
    assert [b.fragment for b in with_clone_at(blocks, 4, 0)] == [2, 0, 1, 4, 5]
    assert with_clone_at(blocks, 0, 1) == blocks and with_clone_at(blocks, None, 0) == blocks
    # The order shown is what a stable completion shows again (windows only: gists keep their place).
    windows = [b for b in blocks if not b.summary]
    promoted = with_clone_at(windows, 3, 1)
    assert [b.fragment for b in promoted] == [0, 2, 1, 4]
    assert blocks_at(windows, spans_of(windows, promoted), files.__getitem__) == promoted


def test_a_clone_ranked_below_the_budget_reaches_the_prompt_when_promoted(tmp_path):
    service, text, line = clone_repository(tmp_path)
    (service.root / "shop" / "records.py").write_text(
        "\n".join(["def publish_all(source):", *clone_file()[:-1]]).replace("compute_alpha", "compute_beta") + "\n")
    # Windows that match the query's first lines better than the clone's file does.
    for n in range(3):
        (service.root / "shop" / f"alpha_{n}.py").write_text("\n".join(
            ["def other(source):", *[f"    value_{i} = compute_alpha(source, {i})" for i in range(5)]] * 2) + "\n")
    assert not hasattr(service.ensure_index(), "kind")
    cursor = locate(service.root, "shop/main.py", text, line, None)
    shown = {}
    for position in (-1, 0):
        config = with_overrides(service.config, completion={"max_prompt_tokens": 300, "fill_in_middle": False},
                                prompt={"continuation_lines": 4, "clone_position": position})
        engine = CompletionEngine(service, Words(), config)
        request = engine.request(cursor, "fragrel")
        prepared = engine.prepare(request)
        shown[position] = NEXT.strip() in prepared.prompt.text
        assert any(f.path == "shop/records.py" for f in prepared.fragments), "the clone is among the candidates"
    assert shown == {-1: False, 0: True}


def test_the_clone_search_finds_a_clone_the_query_window_ranks_below_top_k(tmp_path):
    service, text, line = clone_repository(tmp_path)
    (service.root / "shop" / "records.py").write_text(
        "\n".join(["def publish_all(source):", *clone_file()[:-1]]).replace("compute_alpha", "compute_beta") + "\n")
    for n in range(3):  # windows that match the query window's first lines better than the clone's file
        (service.root / "shop" / f"alpha_{n}.py").write_text("\n".join(
            ["def other(source):", *[f"    value_{i} = compute_alpha(source, {i})" for i in range(5)]] * 2) + "\n")
    service = RepoService.open(service.root, with_overrides(Config(), retrieval={"top_k": 1}))
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    cursor = locate(service.root, "shop/main.py", text, line, None)
    found = {}
    for search in (0, 3):
        config = with_overrides(service.config, completion={"max_prompt_tokens": 400, "fill_in_middle": False},
                                prompt={"continuation_lines": 4, "clone_position": 0, "clone_search": search})
        engine = CompletionEngine(service, Words(), config)
        prepared = engine.prepare(engine.request(cursor, "fragrel"))
        found[search] = ([f.path for f in prepared.fragments], NEXT.strip() in prepared.prompt.text)
    assert len(found[0][0]) == 1 and found[0][0][0].startswith("shop/alpha_") and found[0][1] is False
    assert found[3][0][0] == found[0][0][0]  # the query window's own top-k comes first, unchanged
    assert "shop/records.py" in found[3][0][1:] and found[3][1] is True
