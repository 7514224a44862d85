"""What kept prompt states (model.prompt_cache_mb) save a CLI user (not a test).

    python scripts/bench_prompt_states.py                      # the bundled example, 0.5B, 3 rounds
    python scripts/bench_prompt_states.py --model qwen2.5-coder-1.5b --rounds 2
    python scripts/bench_prompt_states.py --position django/db/models/query.py:120 --repo TREE

Each round, in a copy of the repository and a fresh cache folder (the models linked in), a fresh
`repomem complete POSITION --json` process each time, in turns:
- states off (the reference: every prompt evaluated cold, as before the states existed);
- states on, the first completion (it writes the states);
- states on, the same completion again (a new process);
- states on, after a comment line inserted just above the cursor (the prompt's end changed).
Reported per case: the whole command's wall, the `generate` timing (both rounds' prompts and the
answer), the prompt and cached tokens, the completion, and the states' bytes on disk.
Results: eval/results/bench-prompt-states.json and a table of medians (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from repomem.cache import cache_root  # noqa: E402

CASES = ("off", "first", "again", "edited above")


def _complete(repo: Path, position: str, model: str, env: dict[str, str]) -> dict:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "repomem", "complete", position, "--json", "--model", model],
                            cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"repomem complete failed: {result.stderr.strip()}")
    answer = json.loads(result.stdout)
    return {"wall_s": round(wall, 3), "generate_ms": round(answer["timings_ms"]["generate"], 1),
            "prompt": answer["tokens"]["prompt"], "cached": answer["tokens"]["cached"],
            "completion": answer["completion"]}


def _round(source: Path, position: str, model: str) -> dict[str, dict]:
    file, line = position.rsplit(":", 1)
    with tempfile.TemporaryDirectory(prefix="bench-prompt-states-") as folder:
        repo, cache = Path(folder) / "repo", Path(folder) / "cache"
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns(".repomem", ".git"))
        cache.mkdir()
        (cache / "models").symlink_to(cache_root() / "models")
        off_settings = Path(folder) / "off.toml"
        off_settings.write_text("[model]\nprompt_cache_mb = 0\n")
        env = {k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"} | {"REPOMEM_CACHE": str(cache)}
        subprocess.run([sys.executable, "-m", "repomem", "index", "--json"], cwd=repo, env=env,
                       capture_output=True, check=True)  # indexed once, untimed
        rows = {"off": _complete(repo, position, model, env | {"REPOMEM_CONFIG": str(off_settings)}),
                "first": _complete(repo, position, model, env)}
        rows["again"] = _complete(repo, position, model, env)
        path = repo / file
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        at = int(line) - 1
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        path.write_text("".join(lines[:at] + [f"{indent}# a comment typed above the cursor\n"] + lines[at:]),
                        encoding="utf-8")
        rows["edited above"] = _complete(repo, f"{file}:{at + 2}", model, env)
        rows["first"]["state_bytes"] = sum(p.stat().st_size for p in (cache / "prompt-states").rglob("*.state"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=ROOT / "examples" / "shop")
    parser.add_argument("--position", default="shop/report.py:9", help="FILE:LINE inside --repo")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-prompt-states.json")
    args = parser.parse_args()
    rounds = []
    console = Console()
    for number in range(args.rounds):
        with console.status(f"round {number + 1} of {args.rounds}"):
            rounds.append(_round(args.repo.resolve(), args.position, args.model))
    table = Table(title=f"repomem complete {args.position} ({args.model}), {args.rounds} rounds: median (min-max)")
    for column in ("case", "wall s", "generate ms", "prompt / cached tokens", "completion"):
        table.add_column(column)
    summary = {}
    for case in CASES:
        values = [entry[case] for entry in rounds]
        walls, generates = [v["wall_s"] for v in values], [v["generate_ms"] for v in values]
        summary[case] = {"wall_s": statistics.median(walls), "generate_ms": statistics.median(generates),
                         "prompt": values[-1]["prompt"], "cached": values[-1]["cached"],
                         "completions": sorted({v["completion"] for v in values})}
        table.add_row(case, f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})",
                      f"{statistics.median(generates):.0f} ({min(generates):.0f}-{max(generates):.0f})",
                      f"{values[-1]['prompt']} / {values[-1]['cached']}", " | ".join(summary[case]["completions"]))
    console.print(table)
    state_bytes = rounds[-1]["first"]["state_bytes"]
    console.print(f"states written by the first completion: {state_bytes / 1e6:.1f} MB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"position": args.position, "model": args.model, "rounds": rounds,
                                    "summary": summary, "state_bytes": state_bytes}, indent=1) + "\n")


if __name__ == "__main__":
    main()
