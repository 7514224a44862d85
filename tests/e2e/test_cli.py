"""End to end: the `repomem` command as a user runs it, bad input included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repomem.service import RepoService
from tests.cli_process import assert_user_error, run
from tests.repos import copy_example


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return copy_example(tmp_path / "shop")


def _console_script(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The `repomem` the install put beside this Python, started from nothing (the other tests fork
    the command from a process that imported it once: tests/cli_zygote.py)."""
    return subprocess.run([str(Path(sys.executable).parent / "repomem"), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_index_then_retrieve_json(shop):
    result = _console_script("index", str(shop), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["action"] == "built" and report["files"] == 8 and report["fragments"] > 10
    assert report["nodes"] > 100 and report["edges"] > 100 and report["index_bytes"] > 0

    result = _console_script("retrieve", "shop/checkout.py:17", "--json", "--k", "3", cwd=shop)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["version"] == 1 and data["file"] == "shop/checkout.py" and data["line"] == 17
    assert data["query"] == {"first_line": 1, "last_line": 17}
    assert len(data["fragments"]) == 3
    first = data["fragments"][0]
    assert set(first) == {"rank", "path", "start_line", "end_line", "s_ind", "s_env", "s_rel", "text"}
    assert first["s_rel"] == pytest.approx(first["s_ind"] + 0.5 * first["s_env"])
    # the current file's visible lines are not offered back
    assert all(f["path"] != "shop/checkout.py" or f["start_line"] > 17 for f in data["fragments"])
    scores = [f["s_rel"] for f in data["fragments"]]
    assert scores == sorted(scores, reverse=True)

    again = run("index", str(shop), "--json")
    assert json.loads(again.stdout)["action"] == "unchanged"
    usage = _console_script("retrieve", "--k", "0", "shop/checkout.py:17", cwd=shop)
    assert usage.returncode == 2 and usage.stderr.startswith("repomem: error: ") and usage.stdout == ""


def test_retrieve_finds_the_called_definition(shop):
    # Cursor in Cart.total_cents(): the next line calls PriceCalculator.line_total (pricing.py)
    # and Catalog.find_product (catalog.py).
    data = json.loads(run("retrieve", f"{shop}/shop/cart.py:24", "--json", "--k", "3").stdout)
    texts = " ".join(f["text"] for f in data["fragments"])
    assert "def line_total" in texts and "def find_product" in texts
    assert all(f["s_env"] > 0 for f in data["fragments"])


def test_alpha_zero_is_bm25_order(shop):
    plain = json.loads(run("retrieve", f"{shop}/shop/cart.py:25", "--json", "--alpha", "0", "--k", "30").stdout)
    fragments = plain["fragments"]
    assert all(f["s_rel"] == f["s_ind"] for f in fragments)
    ranked = [f["s_ind"] for f in fragments]
    assert ranked == sorted(ranked, reverse=True)  # ranked by BM25 alone
    related = json.loads(run("retrieve", f"{shop}/shop/cart.py:25", "--json", "--k", "30").stdout)["fragments"]
    assert len(related) == len(fragments) < 30  # every fragment of the example, so the sets are equal
    by_relevance = [(f["path"], f["start_line"]) for f in sorted(related, key=lambda f: -f["s_ind"])]
    assert [(f["path"], f["start_line"]) for f in fragments] == by_relevance  # same fragments, BM25 order
    assert [(f["path"], f["start_line"]) for f in related] != by_relevance  # which alpha 0.5 changes


def test_human_output_is_a_table(shop):
    result = run("retrieve", f"{shop}/shop/cart.py:25:10", "--code")
    assert result.returncode == 0
    assert "s_rel" in result.stdout and "shop/" in result.stdout


def test_file_names_print_literally_never_as_markup_or_escapes(shop: Path, tmp_path: Path):
    """A file name is data: `[red]` vanished from the table, `[/red]` (a folder `[` holding `red]x.py`)
    was a MarkupError (exit 1), and an escape sequence reached the terminal as it was."""
    pricing = (shop / "shop" / "pricing.py").read_text()
    (shop / "shop" / "[red]price.py").write_text(pricing)
    (shop / "shop" / "[").mkdir()
    (shop / "shop" / "[" / "red]x.py").write_text(pricing)
    (shop / "shop" / "\x1b[31mred.py").write_text(pricing)
    (shop / "shop" / "tab\there.py").write_text(pricing)
    table = run("retrieve", f"{shop}/shop/cart.py:24", "--k", "30", "--code")
    assert table.returncode == 0, table.stderr
    for shown in ("shop/[red]price.py:", "shop/[/red]x.py:", "shop/\\x1b[31mred.py:", "shop/tab\\there.py:"):
        assert shown in table.stdout, shown
    assert "\x1b" not in table.stdout and "\t" not in table.stdout.split("─ #1")[0]
    titled = run("retrieve", f"{shop}/shop/[/red]x.py:5", "--k", "2")  # the cursor's file in the title
    assert titled.returncode == 0 and "shop/[/red]x.py:5:1" in titled.stdout, titled.stderr
    assert json.loads(run("retrieve", f"{shop}/shop/[/red]x.py:5", "--json").stdout)["file"] == "shop/[/red]x.py"
    (shop / "shop" / "\x1b[1mblob.py").write_bytes(b"\x00" * 8)
    folder = tmp_path / "[" / "b]repo"
    folder.parent.mkdir()
    shop.rename(folder)
    indexed = run("index", str(folder), "-v")
    assert indexed.returncode == 0, indexed.stderr
    assert "[/b]repo" in indexed.stdout and "skipped shop/\\x1b[1mblob.py: binary file" in indexed.stdout
    missing = run("retrieve", f"{folder}/shop/\x1b[2Jgone.py:1")  # the error line quotes it literally too
    assert_user_error(missing, "\\x1b[2Jgone.py")
    assert "\x1b" not in missing.stderr


def test_a_narrow_terminal_keeps_whole_paths(shop: Path):
    """At 60 columns a long path was cut to `shop/very_long_package_na…`, its file name and lines
    lost; at 20 every column was `…`."""
    deep = shop / "shop" / "very_long_package_name" / "another_subpackage_name"
    deep.mkdir(parents=True)
    (deep / "pricing_calculations_module.py").write_text((shop / "shop" / "pricing.py").read_text())
    name = "shop/very_long_package_name/another_subpackage_name/pricing_calculations_module.py:"
    for columns in ("60", "20"):
        env = {**os.environ, "COLUMNS": columns}
        env.pop("REPOMEM_DEBUG", None)
        result = run("retrieve", f"{shop}/shop/cart.py:24", "--k", "30", env=env)
        assert result.returncode == 0, result.stderr
        assert "…" not in result.stdout
        lines = result.stdout.splitlines()
        if columns == "60":  # the table, the path folded in its cell
            assert max(map(len, lines)) <= 60
            cells = [line.split("│")[2].strip() for line in lines if line.count("│") == 6]
            assert name in "".join(cells), result.stdout
        else:  # a line a fragment
            assert any(line.startswith("#") and name in line for line in lines), result.stdout


def test_a_reader_that_closes_early_ends_the_command_as_a_closed_pipe_does(shop: Path):
    """`repomem retrieve ... | head -1`: rich's console answered the closed pipe with SystemExit(1),
    an internal error's status, where a plain `print` ends with 141 and nothing on stderr."""
    assert run("index", str(shop)).returncode == 0
    for arguments in (["retrieve", "shop/cart.py:24", "--code"], ["index", "-v"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first line
        try:
            result = subprocess.run([sys.executable, "-m", "repomem", *arguments], cwd=shop, stdout=write,
                                    stderr=subprocess.PIPE, text=True, timeout=300)
        finally:
            os.close(write)
        assert result.returncode == 141 and "Traceback" not in result.stderr, (arguments, result.stderr)
        assert "internal error" not in result.stderr

def test_a_retrieval_with_nothing_to_offer_says_so(tmp_path):
    """A repository of one file: the cursor's own file is left out, so nothing is left. An empty
    table (its header alone) was printed."""
    from tests.repos import write_repo

    repo = write_repo(tmp_path / "one", {"main.py": "def total(a, b):\n    return a + b\n"})
    told = run("retrieve", f"{repo}/main.py:2")
    assert told.returncode == 0 and "no fragment of the repository matches the code here" in told.stdout
    assert "┏" not in told.stdout
    assert json.loads(run("retrieve", f"{repo}/main.py:2", "--json").stdout)["fragments"] == []


def test_a_tracked_file_deleted_from_the_disk_is_said_deleted_not_unreadable(tmp_path):
    from tests.repos import write_repo

    repo = write_repo(tmp_path / "r", {"a.py": "def a():\n    return 1\n", "b.py": "def b():\n    return 2\n"})
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "two"], check=True)
    (repo / "b.py").unlink()
    report = json.loads(run("index", str(repo), "-v", "--json").stdout)
    assert report["skipped"] == [{"path": "b.py", "reason": "deleted (listed by git or the walk, not on the disk)"}]
    assert report["files"] == 1


def test_edit_is_picked_up_incrementally(shop):
    assert run("index", str(shop)).returncode == 0
    (shop / "shop" / "shipping.py").write_text(
        "def shipping_cost_cents(weight_grams):\n    return 500 + weight_grams // 10\n", encoding="utf-8")
    (shop / "shop" / "payments.py").unlink()
    report = json.loads(run("index", str(shop), "--json").stdout)
    assert report["action"] == "updated" and report["changed"] == 1 and report["removed"] == 1
    data = json.loads(run("retrieve", f"{shop}/shop/cart.py:25", "--json", "--k", "30").stdout)
    paths = {f["path"] for f in data["fragments"]}
    assert "shop/payments.py" not in paths


def test_bad_inputs(shop, tmp_path):
    assert_user_error(run("retrieve", f"{shop}/shop/missing.py:3"), "no such file")
    assert_user_error(run("retrieve", f"{shop}/shop/cart.py:999"), "line out of range")
    assert_user_error(run("retrieve", f"{shop}/shop/cart.py:3:500"), "column out of range")
    assert_user_error(run("retrieve", f"{shop}/shop/cart.py"), "FILE:LINE")
    assert_user_error(run("retrieve", f"{shop}/shop/cart.py:0"), "start at 1")
    assert_user_error(run("retrieve", f"{shop}/shop/cart.py:3", "--k", "0"), "--k")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    assert_user_error(run("retrieve", f"{outside}:1", "--repo", str(shop)), "outside the repository")
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "a.py").write_text("x = 1\n")
    assert_user_error(run("retrieve", f"{lonely}/a.py:1"), "not inside a repository")
    assert_user_error(run("index", str(tmp_path / "nope")), "no such folder")
    assert_user_error(run("index", str(outside)), "not a folder")
    (shop / "blob.py").write_bytes(b"\x00\x01\x02binary")
    assert_user_error(run("retrieve", f"{shop}/blob.py:1"), "binary")
    (shop / "folder.py").mkdir()
    assert_user_error(run("retrieve", f"{shop}/folder.py:1"), "folder")


def test_damaged_index_is_rebuilt_not_fatal(shop):
    assert run("index", str(shop)).returncode == 0
    current = (shop / ".repomem" / "CURRENT").read_text().strip()
    (shop / ".repomem" / current / "base.npz").write_bytes(b"garbage")
    result = run("index", str(shop), "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["action"] == "built" and "damaged" in report["reason"]


def test_secrets_never_indexed(shop):
    (shop / ".env").write_text("API_KEY=sk-live-123\n")
    (shop / "server.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    report = json.loads(run("index", str(shop), "--json", "--verbose").stdout)
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    assert skipped[".env"].startswith("secret") and skipped["server.key"].startswith("secret")


def test_unsaved_buffer_overlay(shop):
    service = RepoService.open(shop)
    service.ensure_index()
    assert service.view().retrieve("estimate_delivery_days", k=5) == []  # no fragment holds the name
    text = (shop / "shop" / "cart.py").read_text() + "\n\ndef estimate_delivery_days(zone):\n    return 2\n"
    assert service.set_buffer("shop/cart.py", text) is None
    after = service.view().retrieve("estimate_delivery_days", k=1)
    assert after[0].path == "shop/cart.py" and after[0].s_ind > 0
    assert "estimate_delivery_days" in service.view().fragment_text(after[0])
    # the disk copy did not change, and dropping the buffer restores it
    assert "estimate_delivery_days" not in (shop / "shop" / "cart.py").read_text()
    service.drop_buffer("shop/cart.py")
    assert service.view().retrieve("estimate_delivery_days", k=1) == []


ENGINE_MODULES = ("numpy", "numba", "scipy", "repomem.service", "repomem.lsp.server", "repomem.evaluation.run")


@pytest.mark.parametrize("arguments", [
    ["--help"], ["complete", "--help"], ["frobnicate"], ["model", "path"], ["serve", "--tcp", "70000"],
    ["complete", "a.py:3", "--max-tokens", "0"], ["eval", "report", "absent.jsonl"],
    ["eval", "run", "--tasks", "t.jsonl", "--repos", ".", "--workers", "0"], ["config", "show", "--surface", "gui"],
], ids=" ".join)
def test_help_and_usage_errors_answer_without_importing_the_engine(arguments: list[str], tmp_path: Path):
    """The engine (index, numpy, numba, scipy: ~1 s of imports here) is imported by the commands
    that use it, so `--help` and a mistyped option answer at once."""
    probe = ("import sys\nfrom repomem.cli.main import main\ntry:\n    code = main(sys.argv[1:])\n"
             "except SystemExit as end:\n    code = end.code\n"
             f"print('LOADED', [m for m in {ENGINE_MODULES!r} if m in sys.modules])\nsys.exit(code)\n")
    result = subprocess.run([sys.executable, "-c", probe, *arguments], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120)
    assert "Traceback" not in result.stderr
    assert result.returncode in (0, 2), result.stderr
    assert "LOADED []" in result.stdout, result.stdout[-300:]


def test_config_show_tells_each_value_on_a_surface_and_where_it_came_from(tmp_path: Path, monkeypatch):
    user = tmp_path / "user.toml"
    user.write_text("[retrieval]\nalpha = 0.25\n")
    monkeypatch.setenv("REPOMEM_CONFIG", str(user))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "repomem.toml").write_text("[retrieval]\ntop_k = 7\n[server]\nretrieval_budget_ms = 30\n")
    shown = run("config", "show", str(repo), "--surface", "lsp", "--json", "--set", "completion.max_new_tokens=12")
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    assert (answer["surface"], answer["surface_key"]) == ("lsp", "lsp_embedded")
    settings = {s["name"]: (s["value"], s["source"]) for s in answer["settings"]}
    assert settings["retrieval.alpha"] == (0.25, str(user))
    assert settings["retrieval.top_k"] == (7, str(repo / "repomem.toml"))
    assert settings["retrieval.time_budget_ms"] == (30, f"{repo / 'repomem.toml'} [retrieval.lsp]")
    assert settings["completion.max_prompt_tokens"] == (1024, "surface default (lsp_embedded)")
    assert settings["completion.max_new_tokens"] == (12, "command line")
    assert settings["bm25.k1"] == (1.5, "default")
    assert [p["kind"] for p in answer["problems"]] == ["moved"]
    assert "server.retrieval_budget_ms has moved to retrieval.lsp.time_budget_ms" in shown.stderr
    text = run("config", "show", str(repo))  # the CLI's: its own budget, as TOML with sources
    assert text.returncode == 0, text.stderr
    assert "time_budget_ms = 0.0  # default" in text.stdout and "top_k = 7  # " in text.stdout
    assert "[model]" in text.stdout


def test_config_show_of_a_folder_inside_a_repository_shows_that_repositorys_settings(tmp_path: Path, monkeypatch):
    """`config show repo/pkg` took the subfolder for the repository: none of the repository's
    repomem.toml, which every command on the subfolder's files runs with, was shown."""
    (tmp_path / "none.toml").write_text("")
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "none.toml"))
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "repomem.toml").write_text("[retrieval]\ntop_k = 7\n")
    shown = run("config", "show", str(repo / "pkg"), "--json")
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    settings = {s["name"]: (s["value"], s["source"]) for s in answer["settings"]}
    assert answer["repository"] == str(repo) and settings["retrieval.top_k"] == (7, str(repo / "repomem.toml"))
    plain = tmp_path / "plain"  # a folder in no repository is still taken as one (as --repo takes it)
    plain.mkdir()
    assert json.loads(run("config", "show", str(plain), "--json").stdout)["repository"] == str(plain)


def test_config_show_refuses_bad_input_in_one_line(tmp_path: Path, monkeypatch):
    (tmp_path / "none.toml").write_text("")
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "none.toml"))
    repo = tmp_path / "repo"
    repo.mkdir()
    assert_user_error(run("config", "show", str(repo), "--surface", "gui"), "invalid choice: 'gui'")
    (repo / "repomem.toml").write_text("[retrieval\ntop_k = ")
    assert_user_error(run("config", "show", str(repo)), "repomem.toml")
    (repo / "repomem.toml").write_text("")
    assert_user_error(run("config", "show", str(repo), "--set", "retrieval.top_k=ten"), "expected an integer")
    assert_user_error(run("config", "show", str(tmp_path / "missing")), "no such folder")
