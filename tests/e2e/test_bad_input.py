"""The bad-input matrix: what a new user gets wrong, through the CLI as they run it, in
repomem.toml, and against model files and model servers. Each case: the exit code, exactly one line
on stderr (`repomem: error: ...`, or one warning for a bad setting that falls back to its default),
no traceback, and the repository's index still loads with every file in it afterwards. The language
server's share of the matrix is in test_lsp_bad_input.py."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from repomem.config import load_config
from repomem.failures import Failure
from repomem.index.snapshot_load import load_index
from tests.cli_process import assert_user_error, free_port, run
from tests.http_servers import GarbageHandler, serve_http
from tests.repos import copy_example, synthetic_files, write_repo


@pytest.fixture(scope="module")
def garbage_server():
    server, url = serve_http(GarbageHandler)
    yield url
    server.shutdown()


# Files a checkout can hold that are odd but text: each is a cursor's file that must simply work.
ODD_FILES = {
    "odd_empty.py": b"",
    "odd_blank.py": b"   \n\t\n  ",
    "odd_cr.py": b"def a():\r    return 1\rx = a(\r",
    "odd_crlf.py": b"def a():\r\n    return 1\r\nx = a(\r\n",
    "odd_bom.py": b"\xef\xbb\xbfdef a():\n    return 1\nx = a(\n",
    "odd_tabs.py": b"def a():\n\treturn 1\n        x = 2\n\t  y = a(\n",
    "odd_no_newline.py": b"def a():\n    return 1",
    "odd_astral.py": 's = "\U0001f600\U0001f600"\n'.encode(),
    "odd_line_separator.py": "a\u2028b = 1\nc = a\n".encode(),
    "odd\nnewline.py": b"def a():\n    return 1\nx = a(\n",  # a newline in the name (git allows one)
    "utf16.py": "x = 1\n".encode("utf-16"),
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> Path:
    """The example repository, indexed, with the odd files a real checkout can hold."""
    repo = copy_example(tmp_path_factory.mktemp("bad-input") / "shop")
    (repo / "blob.py").write_bytes(b"\x00\x01binary\x00" * 10)
    os.mkfifo(repo / "pipe.py")
    os.symlink("loop_b.py", repo / "loop_a.py")
    os.symlink("loop_a.py", repo / "loop_b.py")
    (repo / "folder.py").mkdir()
    (repo / "notes.gguf").write_text("not a model")
    (repo / "broken.gguf").write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + bytes(range(256)) * 16)
    (repo / "tasks.jsonl").write_text("{not json\n")
    (repo / "foreign.jsonl").write_text('{"version": 1, "task_id": "x", "em": "yes"}\n')
    (repo.parent / "outside.py").write_text("x = 1\n")
    os.symlink(repo.parent / "outside.py", repo / "away.py")
    (repo / os.fsdecode(b"caf\xe9.py")).write_text("def cafe_total(price):\n    return price\n")
    (repo / "late_nul.py").write_bytes(b"x = 1\n" * 2000 + b"y = '\x00'\n")  # the NUL past 8 KB
    (repo / "huge_line.py").write_text("x = [" + "1, " * 3_400_000 + "]\n")  # one 10 MB line
    (repo / "minified.py").write_text("x = [" + "1, " * 5_000 + "]\n")  # 15 KB, under max_file_bytes
    os.symlink(repo.parent / "outside.py", repo / "shop" / "away_link.py")
    for name, fpath, lineno in (("dotdot", ["shop", "..", "..", "outside.py"], 0),
                                ("absolute", ["shop", "/etc/hostname"], 0), ("repo_name", ["..", "outside.py"], 0),
                                ("link", ["shop", "away_link.py"], 0), ("past_end", ["shop", "report.py"], 9999)):
        (repo / f"tasks_{name}.jsonl").write_text(_task(fpath, lineno) + "\n")
    # Line 7 of report.py, as its ground truth: `eval run` checks the file holds it there.
    (repo / "tasks_ok.jsonl").write_text(_task(["shop", "report.py"], 6, REPORT_LINE_7) + "\n")
    (repo / "tasks_bool_line.jsonl").write_text(_task(["shop", "report.py"], 5).replace('"lineno": 5', '"lineno": true')
                                               + "\n")
    (repo / "empty.jsonl").write_text("")
    with socket.socket(socket.AF_UNIX) as bound:  # its file stays, with nobody listening
        bound.bind(str(repo / "socket.py"))
    for name, data in ODD_FILES.items():
        (repo / name).write_bytes(data)
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = https://user:token@example.com/shop.git\n')
    indexed = run("index", str(repo))
    assert indexed.returncode == 0, indexed.stderr
    results = run("eval", "run", "--tasks", str(repo / "tasks_ok.jsonl"), "--repos", str(repo), "--retrieval-only",
                  "--results", str(repo / "results_ok.jsonl"))
    assert results.returncode == 0, results.stderr
    failed = json.loads((repo / "results_ok.jsonl").read_text().splitlines()[0])
    (repo / "results_failed.jsonl").write_text(json.dumps({**failed, "error": "the file is binary"}) + "\n")
    (repo / "results_k_ten.jsonl").write_text(json.dumps({**failed, "k": "ten"}) + "\n")
    return repo


REPORT_LINE_7 = "def tax_for_order(amount_cents: int, tax_class: str) -> int:"  # examples/shop/shop/report.py


def _task(fpath: list[str], lineno: int, ground_truth: str = "x = 1") -> str:
    """One RepoEval task line (eval/tasks.py) naming `fpath`."""
    return json.dumps({"prompt": "", "metadata": {"task_id": "t/0", "ground_truth": ground_truth,
                                                  "fpath_tuple": fpath, "context_start_lineno": 0, "lineno": lineno}})


def _files_indexed(repo: Path) -> int:
    config, _ = load_config(repo)
    index = load_index(repo, config)
    assert not isinstance(index, Failure), index
    return index.n_live_files


REPORT = "{repo}/shop/report.py"
EVAL_RUN = ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos", "{repo}", "--retrieval-only"]
# (kind, arguments, expected exit code, a needle of the one stderr line)
CLI_CASES = [
    ("position without a line", ["retrieve", REPORT], 2, "FILE:LINE"),
    ("line 0", ["retrieve", REPORT + ":0"], 2, "start at 1"),
    ("line past the end", ["retrieve", REPORT + ":9999"], 2, "out of range"),
    ("column past the end", ["retrieve", REPORT + ":1:999"], 2, "out of range"),
    ("negative line", ["retrieve", REPORT + ":-3"], 2, ""),
    ("missing file", ["retrieve", "{repo}/shop/absent.py:1"], 2, "no such file"),
    ("a folder as the file", ["retrieve", "{repo}/folder.py:1"], 2, "folder"),
    ("a binary file", ["retrieve", "{repo}/blob.py:1"], 2, "binary"),
    ("a named pipe", ["retrieve", "{repo}/pipe.py:1"], 2, "not a regular file"),
    ("a symlink loop", ["retrieve", "{repo}/loop_a.py:1"], 2, "symbolic link loop"),
    ("a file outside the repository", ["retrieve", "/etc/hostname:1", "--repo", "{repo}"], 2, "outside"),
    # A warning that --repo lies inside the repository came first: two lines for one refused cursor.
    ("a file outside a --repo inside the repository", ["retrieve", REPORT + ":9", "--repo", "{repo}/tests"], 2,
     "outside the repository"),
    ("--alpha nan", ["retrieve", REPORT + ":9", "--alpha", "nan"], 2, "finite"),
    ("--alpha=-inf", ["retrieve", REPORT + ":9", "--alpha=-inf"], 2, "finite"),
    ("--alpha 1e999", ["retrieve", REPORT + ":9", "--alpha", "1e999"], 2, "finite"),
    # Finite, but every score overflowed to infinity: a random ranking and JSON no parser reads.
    ("--alpha 1e308", ["retrieve", REPORT + ":9", "--alpha", "1e308"], 2, "from 0 to"),
    ("--k 0", ["retrieve", REPORT + ":9", "--k", "0"], 2, "--k"),
    ("--k abc", ["retrieve", REPORT + ":9", "--k", "abc"], 2, "invalid int"),
    # An internal error: past 2**64 it overflowed the top-k kernel's int64.
    ("--k past 64 bits", ["retrieve", REPORT + ":9", "--k", "99999999999999999999"], 2, "--k must be at most"),
    ("an unknown strategy", ["complete", REPORT + ":9", "--strategy", "magic"], 2, "invalid choice"),
    ("--max-tokens 0", ["complete", REPORT + ":9", "--max-tokens", "0"], 2, "--max-tokens"),
    ("--gpu-layers -3", ["complete", REPORT + ":9", "--gpu-layers", "-3"], 2, "--gpu-layers"),
    ("a missing model file", ["complete", REPORT + ":9", "--model", "{repo}/absent.gguf"], 2, "does not exist"),
    ("a model that is not GGUF", ["complete", REPORT + ":9", "--model", "{repo}/notes.gguf"], 2, "not a GGUF"),
    ("a model that crashes while loading", ["complete", REPORT + ":9", "--model", "{repo}/broken.gguf"], 2,
     "exited while loading"),
    ("--hf with a missing path", ["complete", REPORT + ":9", "--hf", "{repo}/absent-model"], 2, "no such model"),
    ("--model and --endpoint together", ["complete", REPORT + ":9", "--model", "a.gguf", "--endpoint", "http://x"],
     2, "not allowed with"),
    ("an unreachable server", ["complete", REPORT + ":9", "--endpoint", "http://127.0.0.1:{port}"], 2,
     "cannot reach"),
    ("a server URL that is not http", ["complete", REPORT + ":9", "--endpoint", "ftp://host"], 2, "http"),
    ("a server URL that does not parse", ["complete", REPORT + ":9", "--endpoint", "http://[::1"], 2,
     "not a valid URL"),
    ("serve --tcp 70000", ["serve", "--tcp", "70000"], 2, "1 to 65535"),
    ("serve --tcp -1", ["serve", "--tcp", "-1"], 2, "1 to 65535"),
    ("a server answering garbage", ["complete", REPORT + ":9", "--endpoint", "{garbage}"], 2, ""),
    ("a cursor in a link leaving the repository", ["retrieve", "{repo}/away.py:1"], 2,
     "symbolic link to"),
    ("index of a missing folder", ["index", "{repo}/nowhere"], 2, "no such folder"),
    ("index of a file", ["index", REPORT], 2, "not a folder"),
    ("index of the filesystem's root", ["index", "/"], 2, "the filesystem's root"),
    ("--repo /", ["retrieve", REPORT + ":9", "--repo", "/"], 2, "the filesystem's root"),
    ("summarise of a missing folder", ["summarise", "{repo}/nowhere"], 2, "no such folder"),
    ("model path of a .gguf file", ["model", "path", "{repo}/notes.gguf"], 2, "--model"),
    ("an unknown command", ["frobnicate"], 2, "invalid choice"),
    ("eval run --workers 0", ["eval", "run", "--tasks", "{repo}/tasks.jsonl", "--repos", "{repo}", "--workers", "0",
                              "--retrieval-only"], 2, ""),
    ("eval run with a broken tasks file", ["eval", "run", "--tasks", "{repo}/tasks.jsonl", "--repos", "{repo}",
                                           "--retrieval-only"], 2, "tasks.jsonl"),
    ("eval run --alphas nan", ["eval", "run", "--tasks", "{repo}/tasks.jsonl", "--repos", "{repo}",
                               "--retrieval-only", "--alphas", "0,nan"], 2, ""),
    ("eval report of a missing file", ["eval", "report", "{repo}/absent.jsonl"], 2, "no such file"),
    ("eval report of records no run wrote", ["eval", "report", "{repo}/foreign.jsonl", "--out", "{repo}/report"], 2,
     "not a results file"),
    # Issue 34: names that are not UTF-8, late NUL bytes, huge lines, and task paths leaving --repos.
    ("a cursor in a file whose name is not UTF-8", ["retrieve", "{repo}/caf\udce9.py:1"], 2, "not valid UTF-8"),
    ("a NUL byte past the first 8 KB", ["retrieve", "{repo}/late_nul.py:1"], 2, "binary"),
    ("a cursor's file with a 10 MB line", ["retrieve", "{repo}/huge_line.py:1"], 2, "larger than"),
    ("a cursor's file with a 15,000 character line", ["retrieve", "{repo}/minified.py:1"], 2, "minified"),
    ("eval task with '..' in its path", ["eval", "run", "--tasks", "{repo}/tasks_dotdot.jsonl", "--repos", "{repo}",
                                         "--retrieval-only"], 2, "plain names"),
    ("eval task with an absolute path", ["eval", "run", "--tasks", "{repo}/tasks_absolute.jsonl", "--repos",
                                         "{repo}", "--retrieval-only"], 2, "plain names"),
    ("eval task whose repository is '..'", ["eval", "run", "--tasks", "{repo}/tasks_repo_name.jsonl", "--repos",
                                            "{repo}", "--retrieval-only"], 2, "plain names"),
    ("eval task through a link leaving its repository", ["eval", "run", "--tasks", "{repo}/tasks_link.jsonl",
                                                         "--repos", "{repo}", "--retrieval-only"], 2,
     "1 of 1 tasks name files outside their repository folder"),
    ("eval task past the end of its file", ["eval", "run", "--tasks", "{repo}/tasks_past_end.jsonl", "--repos",
                                            "{repo}", "--retrieval-only"], 2, "line past the end of their file"),
    # A new user's probes of 2026-11-28.
    ("a negative --alpha", ["retrieve", REPORT + ":9", "--alpha", "-1"], 2, "must be from 0 to"),
    ("eval run with a negative --alpha", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos", "{repo}",
                                          "--retrieval-only", "--alpha", "-1"], 2, "must be from 0 to"),
    ("eval run --alphas with empty values", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos", "{repo}",
                                             "--retrieval-only", "--alphas", ",,"], 2, "--alphas"),
    ("eval run --results naming a folder", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos", "{repo}",
                                            "--retrieval-only", "--results", "{repo}/shop"], 2, "is a folder"),
    ("eval run --results naming a named pipe", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos", "{repo}",
                                                "--retrieval-only", "--results", "{repo}/pipe.py"], 2,
     "must be a regular file or not exist"),
    ("eval run --results naming /proc/self/status", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos",
                                                     "{repo}", "--retrieval-only", "--results", "/proc/self/status"],
     2, "must be a regular file or not exist"),
    ("eval run --defer without --generations", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos",
                                                "{repo}", "--defer", "{repo}/deferred.jsonl"], 2, "--generations"),
    ("eval run --set with a bad value", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos", "{repo}",
                                         "--retrieval-only", "--set", "retrieval.top_k=abc"], 2, "expected an integer"),
    ("eval task with lineno true", ["eval", "run", "--tasks", "{repo}/tasks_bool_line.jsonl", "--repos", "{repo}",
                                    "--retrieval-only"], 2, "lineno must be integers"),
    ("eval report of a folder", ["eval", "report", "{repo}/shop"], 2, "a folder, not a results file"),
    ("eval report of a file that holds no results", ["eval", "report", "{repo}/tasks_ok.jsonl"], 2,
     "no results records"),
    ("eval report --out naming a file", ["eval", "report", "{repo}/results_ok.jsonl", "--out", REPORT], 2,
     "--out"),
    ("eval report of results that all failed", ["eval", "report", "{repo}/results_failed.jsonl"], 2,
     "all 1 records failed"),
    ("a cursor in .git", ["complete", "{repo}/.git/config:1"], 2, "inside .git/"),
    ("a cursor in the index's own folder", ["retrieve", "{repo}/.repomem/CURRENT:1"], 2, "inside .repomem/"),
    ("index of an empty string", ["index", ""], 2, "empty string"),
    ("--repo as an empty string", ["retrieve", REPORT + ":9", "--repo", ""], 2, "empty string"),
    ("a line number in Arabic-Indic digits", ["retrieve", REPORT + ":\u0669"], 2, "expected FILE:LINE"),
    # Further probes of 2026-11-28: positions, option values of the wrong type, --set, task and output files.
    ("column 0", ["retrieve", REPORT + ":9:0"], 2, "start at 1"),
    ("a negative column", ["retrieve", REPORT + ":9:-1"], 2, "expected FILE:LINE"),
    ("a position with an extra colon field", ["retrieve", REPORT + ":9:3:4"], 2, "no such file"),
    ("a position with an empty field", ["retrieve", REPORT + "::9"], 2, "no such file"),
    ("a position ending in a colon", ["retrieve", REPORT + ":9:"], 2, "expected FILE:LINE"),
    ("a space before the line", ["retrieve", REPORT + ": 9"], 2, "expected FILE:LINE"),
    ("a line with a plus sign", ["retrieve", REPORT + ":+9"], 2, "expected FILE:LINE"),
    ("a fractional line", ["retrieve", REPORT + ":9.5"], 2, "expected FILE:LINE"),
    ("a line past 64 bits", ["retrieve", REPORT + ":99999999999999999999999"], 2, "line out of range"),
    ("a column past 64 bits", ["retrieve", REPORT + ":9:99999999999999999999999"], 2, "column out of range"),
    ("a position without a file", ["retrieve", ":9"], 2, "expected FILE:LINE"),
    ("an empty position", ["retrieve", ""], 2, "expected FILE:LINE"),
    ("--k -1", ["retrieve", REPORT + ":9", "--k", "-1"], 2, "--k must be at least 1"),
    ("--k 1.5", ["retrieve", REPORT + ":9", "--k", "1.5"], 2, "invalid int"),
    ("--alpha abc", ["retrieve", REPORT + ":9", "--alpha", "abc"], 2, "not a number"),
    ("--repo naming a file", ["retrieve", REPORT + ":9", "--repo", REPORT], 2, "not a folder"),
    ("--repo naming a missing folder", ["retrieve", REPORT + ":9", "--repo", "{repo}/nowhere"], 2, "no such folder"),
    ("a UTF-16 file as the cursor's file", ["retrieve", "{repo}/utf16.py:1"], 2, "binary"),
    ("a socket as the cursor's file", ["retrieve", "{repo}/socket.py:1"], 2, "cannot read"),
    ("/dev/null as the cursor's file", ["retrieve", "/dev/null:1", "--repo", "{repo}"], 2, "outside"),
    ("--max-tokens -5", ["complete", REPORT + ":9", "--max-tokens", "-5"], 2, "--max-tokens must be at least 1"),
    ("--max-tokens x", ["complete", REPORT + ":9", "--max-tokens", "x"], 2, "invalid int"),
    ("--max-tokens past the model window", ["complete", REPORT + ":9", "--max-tokens", "99999999999999"], 2,
     "exceeds the model window"),
    ("--gpu-layers x", ["complete", REPORT + ":9", "--gpu-layers", "x"], 2, "invalid int"),
    ("an unknown --order", ["complete", REPORT + ":9", "--order", "random"], 2, "invalid choice"),
    ("an unknown model name", ["complete", REPORT + ":9", "--model", "no-such-model-name"], 2,
     "the embedded models are"),
    ("--model naming a folder", ["complete", REPORT + ":9", "--model", "{repo}/shop"], 2, "is not a file"),
    ("--model naming a named pipe", ["complete", REPORT + ":9", "--model", "{repo}/pipe.py"], 2, "is not a file"),
    ("--model as an empty string", ["complete", REPORT + ":9", "--model="], 2, "--model is an empty string"),
    ("--endpoint as an empty string", ["complete", REPORT + ":9", "--endpoint="], 2, "--endpoint is an empty string"),
    ("a server URL without a host", ["complete", REPORT + ":9", "--endpoint", "http://:80"], 2, "no host"),
    ("index with an extra argument", ["index", "{repo}", "extra"], 2, "unrecognized arguments"),
    ("eval run --limit x", [*EVAL_RUN, "--limit", "x"], 2, "invalid int"),
    ("eval run --seed x", [*EVAL_RUN, "--seed", "x"], 2, "invalid int"),
    ("eval run --k 0", [*EVAL_RUN, "--k", "0"], 2, "--k must be at least 1"),
    ("eval run --k past 64 bits", [*EVAL_RUN, "--k", "99999999999999999999"], 2, "--k must be at most"),
    ("eval run --max-new-tokens 0", [*EVAL_RUN, "--max-new-tokens", "0"], 2, "--max-new-tokens must be at least 1"),
    ("eval run --prompt-tokens 0", [*EVAL_RUN, "--prompt-tokens", "0"], 2, "--prompt-tokens must be at least 64"),
    ("eval run --threads 0", [*EVAL_RUN, "--threads", "0"], 2, "--threads must be at least 1"),
    ("eval run --workers x", [*EVAL_RUN, "--workers", "x"], 2, "invalid int"),
    ("eval run --strategies with empty values", [*EVAL_RUN, "--strategies", ",,"], 2, "--strategies"),
    ("eval run with an unknown --order", [*EVAL_RUN, "--order", "x"], 2, "invalid choice"),
    ("eval run --retrieval-only with --prompt-only", [*EVAL_RUN, "--prompt-only"], 2, "exclude each other"),
    ("--set without a section", [*EVAL_RUN, "--set", "top_k=3"], 2, "expected section.key=value"),
    ("--set with an empty name", [*EVAL_RUN, "--set", ".=1"], 2, "expected section.key=value"),
    ("--set of an unknown section", [*EVAL_RUN, "--set", "nosection.key=3"], 2, "unknown config section"),
    ("--set of an unknown key", [*EVAL_RUN, "--set", "retrieval.nokey=3"], 2, "unknown config key"),
    ("--set alpha=nan", [*EVAL_RUN, "--set", "retrieval.alpha=nan"], 2, "finite"),
    ("--set of a list where a number goes", [*EVAL_RUN, "--set", "retrieval.top_k=[1,2]"], 2, "got a list"),
    ("--set with an unterminated quote", [*EVAL_RUN, "--set", 'retrieval.top_k="'], 2, "expected an integer"),
    ("eval run --tasks naming a folder", ["eval", "run", "--tasks", "{repo}/shop", "--repos", "{repo}",
                                          "--retrieval-only"], 2, "cannot read"),
    ("eval run --tasks naming a named pipe", ["eval", "run", "--tasks", "{repo}/pipe.py", "--repos", "{repo}",
                                              "--retrieval-only"], 2, "not a regular file"),
    ("eval run --tasks naming an empty file", ["eval", "run", "--tasks", "{repo}/empty.jsonl", "--repos", "{repo}",
                                               "--retrieval-only"], 2, "no tasks"),
    ("eval run --repos naming a file", ["eval", "run", "--tasks", "{repo}/tasks_ok.jsonl", "--repos", REPORT,
                                        "--retrieval-only"], 2, "no such folder"),
    ("eval report of an empty file", ["eval", "report", "{repo}/empty.jsonl"], 2, "no results records"),
    ("eval report of a named pipe", ["eval", "report", "{repo}/pipe.py"], 2, "not a regular file"),
    ("eval build --out naming a file", ["eval", "build", "--out", REPORT], 2, "is a file"),
    # Refused before the packages are fetched, as a file named by --out is (minutes, then "Not a directory").
    ("eval build --out inside a file", ["eval", "build", "--out", REPORT + "/built"], 2, "is not a folder"),
    ("eval report --out inside a file", ["eval", "report", "{repo}/results_ok.jsonl", "--out", REPORT + "/report"],
     2, "cannot write the report there"),
    ("eval report of a record with a K of another type", ["eval", "report", "{repo}/results_k_ten.jsonl", "--out",
                                                         "{repo}/report"], 2, "no results records"),
    ("eval build of an unknown dev set", ["eval", "build", "--out", "{repo}/built", "--devset", "nope"], 2,
     "no such dev set"),
    ("eval build --tasks-per-repo 0", ["eval", "build", "--out", "{repo}/built", "--tasks-per-repo", "0"], 2,
     "--tasks-per-repo must be at least 1"),
    ("eval build --prompt-tokens 0", ["eval", "build", "--out", "{repo}/built", "--prompt-tokens", "0"], 2,
     "--prompt-tokens must be at least 64"),
    ("eval build --seed x", ["eval", "build", "--out", "{repo}/built", "--seed", "x"], 2, "invalid int"),
    ("summarise --limit 0", ["summarise", "{repo}", "--limit", "0"], 2, "--limit must be at least 1"),
    ("summarise --limit x", ["summarise", "{repo}", "--limit", "x"], 2, "invalid int"),
    ("summarise of a missing folder", ["summarise", "{repo}/nowhere", "--dry-run"], 2, "no such folder"),
    ("summarise of a file", ["summarise", REPORT, "--dry-run"], 2, "not a folder"),
    ("summarise --kind x", ["summarise", "{repo}", "--kind", "x"], 2, "invalid choice"),
    ("an unknown model action", ["model", "frob"], 2, "invalid choice"),
    # Listed every model, the name unread.
    ("model list with a name", ["model", "list", "nosuch"], 2, "takes no model name"),
    ("serve --tcp x", ["serve", "--tcp", "x"], 2, "invalid int"),
    ("serve --socket as an empty string", ["serve", "--socket", ""], 2, "not a socket"),
    ("serve --socket in a missing folder", ["serve", "--socket", "{repo}/nowhere/s.sock"], 2, "cannot listen"),
    ("serve --socket past the socket path limit", ["serve", "--socket", "{repo}/" + "s" * 120], 2,
     "cannot listen"),
    ("serve --tcp with --socket", ["serve", "--tcp", "1", "--socket", "s.sock"], 2, "not allowed with"),
    ("daemon --idle-minutes 0", ["daemon", "start", "--idle-minutes", "0"], 2, "--idle-minutes must be more than 0"),
    ("daemon --idle-minutes nan", ["daemon", "start", "--idle-minutes", "nan"], 2, "finite number"),
    # An internal error at the daemon's start (its socket's timeout overflowed time_t).
    ("daemon --idle-minutes 1e9", ["daemon", "start", "--idle-minutes", "1e9"], 2, "at most 10080 (a week)"),
    # An internal error (OSError from Path.exists) where a missing file is one line.
    ("a file name longer than NAME_MAX", ["retrieve", "{repo}/" + "a" * 300 + ".py:3"], 2, "path too long to open"),
    ("daemon --repositories 0", ["daemon", "start", "--repositories", "0"], 2, "--repositories must be at least 1"),
    ("an unknown daemon action", ["daemon", "frob"], 2, "invalid choice"),
]


@pytest.fixture(scope="module")
def cli_results(request, shop: Path, garbage_server: str) -> tuple[int, dict[str, subprocess.CompletedProcess]]:
    """The index's file count before any case, and the outcome of every selected CLI case, run
    four at a time: each is a process of its own, mostly Python starting, and the table one case
    after another took minutes. None of them writes the index (each is refused)."""
    before = _files_indexed(shop)
    values = {"repo": str(shop), "port": str(free_port()), "garbage": garbage_server}
    selected = {item.callspec.params["kind"] for item in request.session.items
                if item.originalname == "test_cli_bad_input"}
    with ThreadPoolExecutor(2) as pool:
        running = {kind: pool.submit(run, *[a.format(**values) for a in arguments])
                   for kind, arguments, _, _ in CLI_CASES if kind in selected}
        return before, {kind: future.result() for kind, future in running.items()}


@pytest.mark.parametrize("kind, arguments, code, needle", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input(shop: Path, cli_results, kind: str, arguments: list[str], code: int, needle: str):
    before, results = cli_results
    result = results[kind]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == code, (kind, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("repomem: error: "), (kind, result.stderr)
    assert "Traceback" not in result.stderr and needle in lines[0], (kind, lines)
    assert _files_indexed(shop) == before  # the index still loads, whole


ODD_CURSORS = [
    ("an empty file", "odd_empty.py:1"),
    ("a file of only whitespace", "odd_blank.py:2"),
    ("CR-only line ends", "odd_cr.py:3"),
    ("CRLF line ends", "odd_crlf.py:3"),
    ("a UTF-8 BOM", "odd_bom.py:1:1"),
    ("tabs and spaces mixed", "odd_tabs.py:4"),
    ("no final newline, the cursor at the very end", "odd_no_newline.py:2:13"),
    ("a column between the halves of an emoji (UTF-16)", "odd_astral.py:1:7"),
    ("a U+2028 line separator inside a line", "odd_line_separator.py:2"),
    ("a newline in the file's name", "odd\nnewline.py:3"),
]


@pytest.mark.parametrize("kind, position", ODD_CURSORS, ids=[c[0] for c in ODD_CURSORS])
def test_odd_but_text_files_are_answered(shop: Path, kind: str, position: str):
    """Text a careless editor leaves behind is no error: the cursor's file is answered, with no
    warning, and the index still loads."""
    result = run("retrieve", f"{shop}/{position}", "--json")
    assert result.returncode == 0 and "repomem:" not in result.stderr, (kind, result.stderr)
    assert "Traceback" not in result.stderr and isinstance(json.loads(result.stdout)["fragments"], list), kind
    assert _files_indexed(shop) > 0


# (kind, repomem.toml text, a needle of the one warning)
SETTINGS_CASES = [
    ("a TOML syntax error", "[retrieval\nalpha = 1", "defaults used"),
    ("alpha = nan", "[retrieval]\nalpha = nan", "finite"),
    ("alpha = inf", "[retrieval]\nalpha = inf", "finite"),
    ("a negative top_k", "[retrieval]\ntop_k = -4", ">"),
    ("a string where a number goes", "[retrieval]\ntop_k = 'ten'", "expected an integer, got a string"),
    ("an unknown key", "[retrieval]\ncolour = 'blue'", "unknown config key"),
    ("an unknown section", "[colours]\nred = 1", "unknown config section"),
    ("gpu_layers below -1", "[model]\ngpu_layers = -5", "-1"),
    ("an index folder outside the repository", "[index]\ndir_name = '../elsewhere'", "plain folder name"),
    ("an unknown strategy", "[completion]\nstrategy = 'magic'", "not one of"),
    ("an int key given 1e23", "[fragments]\nwindow_lines = 1e23", "expected an integer"),
    ("a list of numbers where names go", "[scan]\nexcluded_dirs = [1, 2]",
     "expected a list of strings, got an integer 1"),
    ("one name where a list goes", "[scan]\nexcluded_dirs = 'build'", "expected a list of strings, got a string"),
    ("TOML nested 5,000 deep", "a = " + "[" * 5000 + "]" * 5000, "defaults used"),
    ("an integer past every bound", "[fragments]\nwindow_lines = 99999999999999999999999", "must be at most"),
    ("a repository asking for 100,000 index workers", "[index]\nworkers = 100000",
     "more than a repository's own settings may ask for"),
    ("a repository asking for a million-token model window", "[model]\ncontext_tokens = 1000000",
     "more than a repository's own settings may ask for (32,768)"),
    ("a byte that is not UTF-8", "[retrieval]\nalpha = 0.5 # caf\udce9", "can't decode"),
    ("a byte order mark", "\ufeff[retrieval]\nalpha = 0.5", "defaults used"),
    ("a key given twice", "[retrieval]\nalpha = 0.5\nalpha = 0.6", "defaults used"),
    ("a boolean where a number goes", "[retrieval]\ntop_k = true", "expected an integer, got a boolean"),
    ("a section that is a number", "retrieval = 3", "must be a table"),
]


@pytest.mark.parametrize("kind, text, needle", SETTINGS_CASES, ids=[c[0] for c in SETTINGS_CASES])
def test_bad_settings_fall_back_with_one_warning(tmp_path: Path, kind: str, text: str, needle: str):
    repo = copy_example(tmp_path / "shop")
    (repo / "repomem.toml").write_bytes(text.encode("utf-8", "surrogateescape"))  # "\udce9": the byte 0xe9
    result = run("retrieve", f"{repo}/shop/report.py:9")
    lines = [line for line in result.stderr.splitlines() if line.strip() and "repomem:" in line]
    assert result.returncode == 0, (kind, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("repomem: warning: ") and needle in lines[0], (kind, lines)
    assert "Traceback" not in result.stderr
    assert _files_indexed(repo) > 0


def test_a_named_pipe_as_settings_file_is_one_warning(tmp_path: Path):
    repo = copy_example(tmp_path / "shop")
    (repo / "repomem.toml").unlink()
    os.mkfifo(repo / "repomem.toml")
    result = run("retrieve", f"{repo}/shop/report.py:9", "--repo", str(repo))
    assert result.returncode == 0, result.stderr
    assert "not a regular file" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", ["an empty file", "a folder", "a link to /etc/passwd"])
def test_a_settings_file_that_is_no_settings_is_at_most_one_warning(tmp_path: Path, kind: str):
    repo = copy_example(tmp_path / "shop")
    settings = repo / "repomem.toml"
    settings.unlink()
    {"an empty file": settings.touch, "a folder": settings.mkdir,
     "a link to /etc/passwd": lambda: settings.symlink_to("/etc/passwd")}[kind]()
    result = run("retrieve", f"{repo}/shop/report.py:9", "--repo", str(repo))
    said = [line for line in result.stderr.splitlines() if "repomem:" in line]
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert len(said) == (0 if kind == "an empty file" else 1), said
    assert all(line.startswith("repomem: warning: ") for line in said), said
    assert _files_indexed(repo) > 0


def test_an_index_folder_that_is_a_file_is_one_error_and_kept(tmp_path: Path):
    repo = copy_example(tmp_path / "shop")
    (repo / ".repomem").write_text("someone's notes")
    assert_user_error(run("retrieve", f"{repo}/shop/report.py:9"), "cannot write the index", "Not a directory")
    assert (repo / ".repomem").read_text() == "someone's notes"


def test_a_gitignore_that_ignores_everything_leaves_an_empty_index(tmp_path: Path):
    repo = copy_example(tmp_path / "shop")
    (repo / ".gitignore").write_text("*\n")
    result = run("retrieve", f"{repo}/shop/report.py:9", "--json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert json.loads(result.stdout)["fragments"] == []


def test_a_damaged_index_is_rebuilt_not_trusted(tmp_path: Path):
    repo = copy_example(tmp_path / "shop")
    assert run("index", str(repo)).returncode == 0
    for snapshot in (repo / ".repomem").glob("snap-*"):
        for part in snapshot.glob("*.npz"):
            part.write_bytes(b"garbage")
    result = run("retrieve", f"{repo}/shop/report.py:9")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert _files_indexed(repo) > 0


@pytest.fixture
def read_only_repo(tmp_path: Path):
    """The example on a read-only bind mount (root ignores permission bits, so chmod proves nothing)."""
    source = copy_example(tmp_path / "source")
    target = tmp_path / "mounted"
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield target
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)


def test_a_read_only_repository_indexes_into_the_user_cache(read_only_repo: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    env = {**os.environ, "REPOMEM_CACHE": str(cache)}
    for _ in range(2):  # built, then loaded from the same place
        result = run("retrieve", f"{read_only_repo}/shop/report.py:9", env=env)
        assert result.returncode == 0, result.stderr
        assert "is read-only: the index lives in" in result.stderr and "Traceback" not in result.stderr
        assert "compute_tax" in result.stdout or "pricing.py" in result.stdout
    assert not (read_only_repo / ".repomem").exists()
    assert list((cache / "indexes").glob("mounted-*/CURRENT"))


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().split(")")[-1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_killing_a_full_index_leaves_no_worker_behind(tmp_path: Path):
    repo = write_repo(tmp_path / "big", synthetic_files(400, n_functions=40))
    process = subprocess.Popen([sys.executable, "-m", "repomem", "index", str(repo), "--full"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2 and process.poll() is None:
        workers = _children(process.pid)
        time.sleep(0.05)
    if process.poll() is not None:
        pytest.skip("the build finished before its parse workers were seen")
    process.kill()
    process.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_running(w) for w in workers):
        time.sleep(0.1)
    assert not any(_running(w) for w in workers), workers


def test_pathological_files_index_in_bounded_time(tmp_path: Path):
    """Issue 15 item 9: a 9 KB `y = f(f(...))` 3,000 calls deep (minutes before: every call walked
    up its statement through tree-sitter parents) and 100k one-line statements (112 s before: a
    relation row per statement) index in seconds; the long file is searched as text and reported."""
    import json

    repo = tmp_path / "odd"
    repo.mkdir()
    (repo / "deep.py").write_text("def f(v):\n    return v\n\n\ny = " + "f(" * 3000 + "1" + ")" * 3000 + "\n")
    (repo / "long.py").write_text("x = f(1)\n" * 100_000)  # 900 KB: under scan.max_file_bytes
    (repo / "ok.py").write_text("from deep import f\n\n\ndef g():\n    return f(2)\n")
    result = run("index", str(repo), "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["outside_graph"] == ["long.py"] and report["files"] == 3
    verbose = run("index", str(repo), "-v", "--full")
    assert "text only long.py: more than 10,000 syntax nodes" in " ".join(verbose.stdout.split())
    found = run("retrieve", f"{repo}/ok.py:5", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["fragments"]


def test_a_folder_named_gitignore_in_the_index_is_moved_aside(tmp_path: Path):
    """`.repomem/.gitignore` as a folder failed every save for good, so every command, even a
    retrieve on an index that loaded (git no longer ignored the folder, whose files then counted as
    a change), naming the save's scratch file as the trouble. It is moved aside as CURRENT is."""
    repo = copy_example(tmp_path / "shop")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert run("index", str(repo)).returncode == 0
    (repo / ".repomem" / ".gitignore").unlink()
    (repo / ".repomem" / ".gitignore").mkdir()
    result = run("retrieve", f"{repo}/shop/report.py:9", "--json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (repo / ".repomem" / ".gitignore").is_file()
    assert len(list((repo / ".repomem").glob(".gitignore.not-a-file-*"))) == 1
    assert run("index", str(repo)).returncode == 0


def test_an_index_folder_that_is_a_loop_of_links_is_one_error(tmp_path: Path):
    """DESIGN §8's symlink loops: `.repomem -> .repomem` was an internal error (RuntimeError from
    Path.resolve on Python 3.11), where a link out of the repository is one line and exit 2."""
    repo = copy_example(tmp_path / "shop")
    shutil.rmtree(repo / ".repomem", ignore_errors=True)
    (repo / ".repomem").symlink_to(".repomem")
    for command in (["index", str(repo)], ["retrieve", f"{repo}/shop/report.py:9"]):
        result = run(*command)
        assert result.returncode == 2 and "internal error" not in result.stderr, result.stderr
        assert "a symbolic link that leads nowhere" in result.stderr and "Traceback" not in result.stderr


def test_a_manifest_nested_past_the_json_parser_is_a_damaged_index(tmp_path: Path):
    """An unsealed manifest of 200,000 nested brackets raised RecursionError past the checks: an
    internal error on every command until `index --full`. It is a damaged index, rebuilt."""
    repo = copy_example(tmp_path / "shop")
    assert run("index", str(repo)).returncode == 0
    manifest = repo / ".repomem" / (repo / ".repomem" / "CURRENT").read_text().strip() / "manifest.json"
    manifest.write_text("[" * 200_000 + "]" * 200_000)
    for _ in range(2):
        result = run("retrieve", f"{repo}/shop/report.py:9", "--json")
        assert result.returncode == 0 and "internal error" not in result.stderr, result.stderr
    assert json.loads(result.stdout)["fragments"]


def test_a_folder_named_current_in_the_index_is_repaired(tmp_path: Path):
    """Issue 15 item 13: `.repomem/CURRENT` as a folder broke every command (the pointer could not
    be replaced). It is moved aside, never deleted, and the index is rebuilt."""
    repo = copy_example(tmp_path / "shop")
    assert run("index", str(repo)).returncode == 0
    (repo / ".repomem" / "CURRENT").unlink()
    (repo / ".repomem" / "CURRENT").mkdir()
    (repo / ".repomem" / "CURRENT" / "keep.txt").write_text("someone's file")
    result = run("retrieve", f"{repo}/shop/report.py:9")
    assert result.returncode == 0, result.stderr
    assert "is a folder, not the index pointer" in result.stderr and "Traceback" not in result.stderr
    assert (repo / ".repomem" / "CURRENT").is_file()
    assert [p.read_text() for p in (repo / ".repomem").glob("CURRENT.not-a-file-*/keep.txt")] == ["someone's file"]
    assert _files_indexed(repo) > 0
    again = run("retrieve", f"{repo}/shop/report.py:9")
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr


def test_an_index_built_in_a_subfolder_does_not_shrink_the_repository(tmp_path: Path):
    """Issue 15 item 13: `cd pkg && repomem index` made pkg/.repomem, and every later command found
    pkg as the repository: the rest of it silently disappeared from retrieval."""
    import json

    repo = copy_example(tmp_path / "shop")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    inside = run("index", cwd=repo / "shop")  # no folder: the repository around the current one
    assert inside.returncode == 0, inside.stderr
    assert not (repo / "shop" / ".repomem").exists() and (repo / ".repomem").is_dir()
    explicit = run("index", ".", cwd=repo / "shop")  # asked for: built, with a warning
    assert explicit.returncode == 0 and "lies inside the repository" in explicit.stderr, explicit.stderr
    assert (repo / "shop" / ".repomem").is_dir()
    found = run("retrieve", "shop/report.py:9", "--json", cwd=repo)
    assert found.returncode == 0, found.stderr
    paths = [f["path"] for f in json.loads(found.stdout)["fragments"]]
    assert paths and all(p.startswith(("shop/", "tests/")) for p in paths), paths  # paths from the top


def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason(shop: Path, tmp_path: Path):
    """Issue 34 item 7: a file named b"caf\\xe9.py" was indexed, and every completion that retrieved
    it was an internal error (its name in the prompt header is not text). Such files are skipped
    at scan time, with the reason in `index -v` and --json (the name escaped as valid UTF-8)."""
    verbose = run("index", str(shop), "-v", "--full")
    assert verbose.returncode == 0, verbose.stderr
    shown = " ".join(verbose.stdout.split())
    assert "skipped caf\\xe9.py: file name is not valid UTF-8" in shown
    assert "skipped late_nul.py: binary file" in shown  # a NUL past the first 8 KB: binary too
    report = json.loads(run("index", str(shop), "--json").stdout)
    assert {"path": "caf\\xe9.py", "reason": "file name is not valid UTF-8"} in report["skipped"]
    # Dropped without a word before, though the README says every skipped file has its reason.
    assert {"path": "pipe.py", "reason": "not a regular file (a named pipe)"} in report["skipped"]

    repo = tmp_path / "cafe"
    repo.mkdir()
    (repo / "repomem.toml").write_text("")
    (repo / os.fsdecode(b"caf\xe9.py")).write_text("def compute_tax(price):\n    return price * 0.2\n")
    (repo / "main.py").write_text("def total(price):\n    return compute_tax(price) + compute_\n")
    found = run("retrieve", f"{repo}/main.py:2", "--json")
    assert found.returncode == 0, found.stderr
    assert all(f["path"] == "main.py" for f in json.loads(found.stdout)["fragments"])
    completed = run("complete", f"{repo}/main.py:2", "--max-tokens", "4")  # the embedded model
    assert completed.returncode == 0 and "Traceback" not in completed.stderr, completed.stderr


def test_a_backslash_in_a_file_name_is_indexed_once_not_at_every_command(tmp_path: Path):
    """`back\\slash.py` (a backslash is an ordinary character of a POSIX name) was scanned in, then
    refused by the index's integrity check: every later command found the index damaged and rebuilt
    it in full. The scan and the check agree now: the file is indexed, and a second index is a no-op."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "repomem.toml").write_text("")
    (repo / "back\\slash.py").write_text("def slashed_total(price):\n    return price * 2\n")
    (repo / "main.py").write_text("def total(price):\n    return slashed_total(price)\n")
    first = run("index", str(repo), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["files"] == 2
    again = run("index", str(repo), "--json")
    assert again.returncode == 0 and "damaged" not in again.stderr, again.stderr
    assert json.loads(again.stdout)["action"] == "unchanged"
    found = run("retrieve", f"{repo}/main.py:2", "--json")
    assert found.returncode == 0 and "damaged" not in found.stderr, found.stderr
    assert "back\\slash.py" in [f["path"] for f in json.loads(found.stdout)["fragments"]]


@pytest.mark.parametrize("git", [False, True], ids=["walked", "git work tree"])
def test_a_file_deeper_than_path_max_is_skipped_with_a_reason(tmp_path: Path, git: bool):
    """A folder whose path is longer than PATH_MAX (4096) cannot be listed: os.walk (and git, with a
    warning nobody saw) dropped it and every file in it with no word. It is reported like any other
    file left out (`index -v`, --json)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    if git:
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "repomem.toml").write_text("")
    (repo / "main.py").write_text("def total(price):\n    return price\n")
    _nested_file(repo, "d" * 200, 25)  # 25 x 201 characters: past PATH_MAX
    report = run("index", str(repo), "--json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert data["files"] == 1
    (skipped,) = [s for s in data["skipped"] if s["path"].startswith("d" * 200)]
    assert skipped["reason"].startswith("path too long to open"), skipped
    verbose = run("index", str(repo), "-v", "--full")
    assert verbose.returncode == 0 and "path too long to open" in " ".join(verbose.stdout.split()), verbose.stdout


def test_a_folder_nested_past_the_recursion_limit_is_walked(tmp_path: Path):
    """A folder nested 1,100 deep (a 2,200 character path, under PATH_MAX) outside git: Python
    3.11's os.walk recursed once per level and every command ended in an internal RecursionError.
    The walk takes the file at the bottom like any other."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "repomem.toml").write_text("")
    (repo / "main.py").write_text("def total(price):\n    return price\n")
    try:
        _nested_file(repo, "d", 1100)
        report = run("index", str(repo), "--json")
        assert report.returncode == 0, report.stderr
        assert json.loads(report.stdout)["files"] == 2
        found = run("retrieve", f"{repo}/{'d/' * 1100}deep.py:2", "--json")
        assert found.returncode == 0, found.stderr
    finally:
        _remove_nested(repo, "d", "deep.py")


def _nested_file(top: Path, name: str, depth: int) -> None:
    """top/name/.../name/deep.py, `depth` folders deep, made one level at a time (os.makedirs
    recurses, and a path past PATH_MAX cannot be named whole)."""
    folder = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=folder)
            deeper = os.open(name, os.O_RDONLY, dir_fd=folder)
            os.close(folder)
            folder = deeper
        deep_file = os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=folder)
        os.write(deep_file, b"def deep():\n    return 1\n")
        os.close(deep_file)
    finally:
        os.close(folder)


def _remove_nested(top: Path, name: str, leaf: str) -> None:
    """Remove the chain top/name/name/.../leaf level by level: pytest's clean-up of old temporary
    folders (shutil.rmtree, recursive in Python 3.11) ended the whole session in a RecursionError."""
    folders = [os.open(top, os.O_RDONLY)]
    while True:
        try:
            folders.append(os.open(name, os.O_RDONLY, dir_fd=folders[-1]))
        except FileNotFoundError:
            break
    with contextlib.suppress(FileNotFoundError):  # a test stopped before it wrote the leaf
        os.unlink(leaf, dir_fd=folders[-1])
    while len(folders) > 1:
        os.close(folders.pop())
        os.rmdir(name, dir_fd=folders[-1])
    os.close(folders[0])


def test_eval_tasks_leaving_their_repository_read_and_write_nothing(tmp_path: Path):
    """Issue 34 item 8: `..`, absolute paths and links in a task's fpath_tuple read files outside
    --repos (and sent them to the endpoint) and wrote .repomem folders outside it. Such a task
    file is refused whole before any work: one line, exit 2, no index, no results."""
    repos = tmp_path / "repos"
    copy_example(repos / "shop")
    (tmp_path / "secret.py").write_text("API_KEY = 'kept outside --repos'\n")
    os.symlink(tmp_path / "secret.py", repos / "shop" / "leak.py")
    os.symlink(tmp_path, repos / "elsewhere")  # a repository folder that is a link out
    report_py = ["shop", "shop", "report.py"]
    cases = {
        "dotdot": ([_task(["shop", "..", "..", "secret.py"], 0)], "plain names"),
        "absolute": ([_task(["shop", str(tmp_path / "secret.py")], 0)], "plain names"),
        "repository link": ([_task(["elsewhere", "secret.py"], 0)], "repository folders outside"),
        "file link": ([_task(["shop", "leak.py"], 0), _task(report_py, 3).replace("t/0", "t/1")],
                      "1 of 2 tasks name files outside their repository folder"),
        "past the end": ([_task(report_py, 9999)], "line past the end of their file"),
    }
    for name, (lines, needle) in cases.items():
        tasks = tmp_path / f"{name}.jsonl"
        tasks.write_text("\n".join(lines) + "\n")
        results = tmp_path / f"{name}-results.jsonl"
        result = run("eval", "run", "--tasks", str(tasks), "--repos", str(repos), "--retrieval-only",
                     "--results", str(results))
        lines_out = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines_out) == 1 and needle in lines_out[0], (name, result.stderr)
        assert not results.exists(), name
    assert not list(tmp_path.rglob(".repomem")) and not list(tmp_path.rglob("*.jsonl.lock"))


def test_a_pathological_gitignore_line_does_not_hang_indexing(tmp_path: Path):
    """Issue 34 item 9: without git, a `.gitignore` line `*a*a…*a*b` (30 stars) against a long
    file name hung `repomem index` (exponential backtracking); it now takes a moment."""
    repo = tmp_path / "stars"
    repo.mkdir()
    (repo / "repomem.toml").write_text("")
    (repo / ".gitignore").write_text("*a" * 30 + "*b\n" + "*a" * 30 + "*b.py\n")
    (repo / ("a" * 200 + ".py")).write_text("def kept():\n    return 1\n")
    (repo / ("a" * 40 + "b.py")).write_text("def ignored():\n    return 2\n")
    result = run("index", str(repo), "--json", timeout=180)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"] == 1


def test_a_repository_with_nothing_to_index_gets_an_empty_index(tmp_path: Path):
    """A new project (only .git, a README, an empty module) indexes to nothing and answers with
    no fragments; it crashed in W's product over zero rows."""
    repo = tmp_path / "new"
    (repo / ".git").mkdir(parents=True)
    (repo / "README.md").write_text("# new\n")
    (repo / "empty.py").write_text("")
    indexed = run("index", str(repo), "--json")
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["fragments"] == 0
    retrieved = run("retrieve", f"{repo}/empty.py:1", "--json")
    assert retrieved.returncode == 0, retrieved.stderr
    assert json.loads(retrieved.stdout)["fragments"] == []


def test_index_outside_any_repository_refuses_instead_of_indexing_the_folder(tmp_path: Path):
    """`repomem index` in a folder that is no repository (a home folder, /tmp) used to index all of
    it; it refuses, and `repomem index .` still indexes it when meant."""
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "a.py").write_text("x = 1\n")
    refused = run("index", cwd=loose)
    assert_user_error(refused, "not inside a repository", "repomem index .")
    assert not (loose / ".repomem").exists()
    meant = run("index", ".", cwd=loose)
    assert meant.returncode == 0, meant.stderr
    assert (loose / ".repomem").is_dir()


def _every_path(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*")}


def test_git_own_folder_is_no_repository_and_nothing_is_written_there(tmp_path: Path):
    """`repomem index` in a bare repository (`git init --bare`), or `index .` in a work tree's .git,
    wrote an index among git's own files. Each command there is one line naming what the folder
    is and where to run repomem instead, and writes nothing."""
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    work = copy_example(tmp_path / "shop")
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    dot_git = work / ".git"
    before = {folder: _every_path(folder) for folder in (bare, dot_git)}
    for folder, needle in ((bare, "a bare git repository"), (bare / "refs", "inside the bare git repository"),
                           (dot_git, f"git's own folder of the repository {work}"),
                           (dot_git / "objects", f"inside git's own folder of the repository {work}")):
        for args in (["index"], ["index", "."], ["index", "--json"], ["retrieve", "HEAD:1", "--repo", "."],
                     ["complete", "HEAD:1", "--repo", "."]):
            assert_user_error(run(*args, cwd=folder), needle)
        assert_user_error(run("index", str(folder)), needle)
    for args in (["retrieve", "HEAD:1"], ["complete", "HEAD:1"], ["retrieve", "refs/heads/x.py:1"]):
        assert_user_error(run(*args, cwd=bare), "inside the bare git repository", "run repomem in a clone")
    assert {folder: _every_path(folder) for folder in (bare, dot_git)} == before
    assert not (tmp_path / ".repomem").exists()


def test_output_that_cannot_be_written_is_one_error(shop: Path):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "repomem", "retrieve", f"{shop}/shop/report.py:9"],
                                stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert result.returncode == 1 and result.stderr.strip() == (
        "repomem: error: cannot write the output: No space left on device"), result.stderr
    closed = subprocess.run(f"{sys.executable} -m repomem retrieve {shop}/shop/report.py:9 >&-", shell=True,
                            stderr=subprocess.PIPE, text=True, timeout=300)
    assert closed.returncode == 1 and "standard output is closed" in closed.stderr, closed.stderr


def test_a_report_folder_named_like_markup_is_written_and_said(shop: Path, tmp_path: Path):
    """`eval report --out '[/x]rep'` wrote the report, then its closing line raised a MarkupError:
    exit 1, an internal error, for a report that was there."""
    (tmp_path / "[").mkdir()
    result = run("eval", "report", str(shop / "results_ok.jsonl"), "--out", str(tmp_path / "[/x]rep"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "[" / "x]rep" / "report.md").is_file()
    assert f"wrote {tmp_path}/[/x]rep/report.md" in result.stderr


def test_version_and_a_failed_eval_task_exit_status(tmp_path: Path):
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("repomem "), version.stderr
    # A task on a binary file fails; the run says so and exits 1 (scripts must notice).
    repo = copy_example(tmp_path / "repos" / "shop")
    (repo / "blob.py").write_bytes(b"\x00\x01binary\x00" * 10)
    (tmp_path / "tasks.jsonl").write_text(_task(["shop", "blob.py"], 0) + "\n")
    result = run("eval", "run", "--tasks", str(tmp_path / "tasks.jsonl"), "--repos", str(repo.parent),
                 "--retrieval-only", "--results", str(tmp_path / "results.jsonl"))
    assert result.returncode == 1, result.stderr
    assert "results failed" in result.stderr and "Traceback" not in result.stderr


def test_a_second_eval_run_on_one_results_file_is_refused(tmp_path: Path):
    """Two runs on one results file each did every record: while one holds it, another is refused
    with one line (and writes nothing); once it is done, the file is free again."""
    import fcntl

    repo = copy_example(tmp_path / "shop")
    (tmp_path / "tasks.jsonl").write_text(_task(["shop", "report.py"], 6, REPORT_LINE_7) + "\n")
    results = tmp_path / "results.jsonl"
    arguments = ("eval", "run", "--tasks", str(tmp_path / "tasks.jsonl"), "--repos", str(repo),
                 "--retrieval-only", "--results", str(results))
    with open(results, "a") as first:  # a run in progress holds its results file so
        fcntl.flock(first, fcntl.LOCK_EX)
        assert_user_error(run(*arguments), "being written by another `repomem eval run`")
        # A model run is refused before its model opens: here a server nobody answers at, which
        # was tried first ("cannot reach") where the results file is what stops the run.
        assert_user_error(run(*arguments[:-3], "--results", str(results), "--endpoint", "http://127.0.0.1:9"),
                          "being written by another `repomem eval run`")
    assert results.read_text() == ""
    done = run(*arguments)
    assert done.returncode == 0, done.stderr
    assert results.read_text().count("\n") >= 1


def test_a_bad_model_file_is_refused_before_the_index_is_touched(tmp_path: Path):
    """`complete --model` naming no GGUF file says so before any indexing: a changed file is not
    re-indexed first (which takes seconds on a large repository) only to fail afterwards."""
    repo = copy_example(tmp_path / "shop")
    assert run("index", str(repo)).returncode == 0
    current = (repo / ".repomem" / "CURRENT").read_text()
    (repo / "shop" / "report.py").write_text((repo / "shop" / "report.py").read_text() + "\nLATE = 1\n")
    result = run("complete", f"{repo}/shop/report.py:9", "--model", str(tmp_path / "absent.gguf"))
    assert_user_error(result, "does not exist")
    assert (repo / ".repomem" / "CURRENT").read_text() == current


def test_a_removed_working_folder_is_one_error(tmp_path: Path) -> None:
    """A shell still standing in a folder that was removed: one line, exit 2, no internal error."""
    gone = tmp_path / "gone"
    gone.mkdir()
    answer = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m repomem retrieve x.py:1',
                             sys.executable], capture_output=True, text=True, timeout=120,
                            env={k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"})
    assert answer.returncode == 2
    assert answer.stderr.strip() == ("repomem: error: the current folder no longer exists (removed after the shell "
                                     "entered it); cd to an existing folder")


def test_a_relative_cache_folder_is_one_error_not_a_cache_per_folder(tmp_path: Path) -> None:
    """REPOMEM_CACHE=relcache was read from each command's folder: the index seal's key written
    into the repository, and the index rebuilt whenever a command ran from another folder. It is
    refused in one line; a relative XDG_CACHE_HOME is ignored, as the XDG spec says."""
    repo = copy_example(tmp_path / "shop")
    env = {k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"}
    result = run("retrieve", "report.py:9", cwd=repo / "shop", env={**env, "REPOMEM_CACHE": "relcache"})
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.strip() == ("repomem: error: REPOMEM_CACHE='relcache' must be an absolute path "
                                     "(or start with ~)")
    assert not (repo / "shop" / "relcache").exists()
    env.pop("REPOMEM_CACHE", None)
    located = run("model", "path", cwd=repo / "shop", env={**env, "XDG_CACHE_HOME": "xdgrel"})
    assert located.returncode == 0 and Path(located.stdout.strip()).is_absolute(), (located.stdout, located.stderr)


def _with_file_size_limit(limit_bytes: int):
    """A child process that can write no file past `limit_bytes` (RLIMIT_FSIZE): its writes beyond
    fail as on a full disk (EFBIG; Python ignores the SIGXFSZ that comes with them)."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return limit


def test_a_full_disk_answers_from_memory_and_keeps_the_index_on_disk(tmp_path: Path):
    # `retrieve` and `complete` came for an answer: a save that cannot be written (a full disk)
    # failed the whole command before; `index` came to write the index and still fails.
    repo = copy_example(tmp_path / "shop")
    assert run("index", str(repo)).returncode == 0
    current = (repo / ".repomem" / "CURRENT").read_text()
    report = repo / "shop" / "report.py"
    report.write_text(report.read_text() + "\n\ndef refund_total(amount_cents):\n    return -amount_cents\n")

    def limited(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "repomem", *args], capture_output=True, text=True, cwd=repo,
                              timeout=300, preexec_fn=_with_file_size_limit(256))

    answered = limited("retrieve", f"{repo}/shop/report.py:9", "--json")
    assert answered.returncode == 0 and "Traceback" not in answered.stderr, answered.stderr
    warnings = [line for line in answered.stderr.splitlines() if line.startswith("repomem: ")]
    assert len(warnings) == 1 and warnings[0].startswith("repomem: warning: cannot write the index"), warnings
    assert "answered from the index in memory" in warnings[0]
    assert json.loads(answered.stdout)["fragments"]
    assert (repo / ".repomem" / "CURRENT").read_text() == current
    assert not [p for p in (repo / ".repomem").iterdir() if p.name.startswith("tmp-")]
    assert_user_error(limited("index", str(repo)), "cannot write the index")
    assert (repo / ".repomem" / "CURRENT").read_text() == current
    # Space again: the next command writes the update, from the index on disk it left intact.
    again = run("retrieve", f"{repo}/shop/report.py:9", "--json")
    assert again.returncode == 0 and not again.stderr.strip(), again.stderr
    assert (repo / ".repomem" / "CURRENT").read_text() != current
