"""How long the embedded model's child process takes to be ready (spawned -> `repomem-port` line),
against the floor of the same run: the model loaded in this process (llama_cpp.Llama, no server).

    python scripts/bench_model_start.py [--runs 10] [--model FILE] [--child FILE]

`--child` times another copy of the child's entry point instead of repomem's (for a before/after:
`git show REV:repomem/backends/llama_child.py > /tmp/old_child.py`). Rounds alternate child and
floor; medians printed, the runs written to eval/results/bench-model-start.json."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.models import pull_small_model  # noqa: E402

FLOOR = """
import sys, time
started = time.perf_counter()
from llama_cpp import Llama
Llama(model_path=sys.argv[1], n_ctx=4096, n_threads=2, logits_all=False, verbose=False)
print(time.perf_counter() - started)
"""


def child_ready_s(command: list[str]) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               cwd=tempfile.gettempdir())
    line = process.stdout.readline()
    ready = time.perf_counter() - started
    process.kill()
    process.wait()
    if not line.startswith("repomem-port"):
        sys.exit(f"the child printed {line!r}, not its port")
    return ready


def floor_s(model: str) -> tuple[float, float]:
    """(interpreter start + import + load, load alone) of the model in a plain process."""
    started = time.perf_counter()
    loaded = subprocess.run([sys.executable, "-c", FLOOR, model], capture_output=True, text=True, check=True)
    return time.perf_counter() - started, float(loaded.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--model", default="")
    parser.add_argument("--child", default="", help="another llama_child.py to time")
    args = parser.parse_args()
    model = args.model or str(pull_small_model())
    entry = [args.child] if args.child else ["-m", "repomem.backends.llama_child"]
    command = [sys.executable, *entry, "--model", model, "--threads", "2", "--context", "4096"]
    child_ready_s(command)  # warm the page cache
    runs = []
    for _ in range(args.runs):
        whole, load = floor_s(model)
        runs.append({"child_ready_s": child_ready_s(command), "floor_process_s": whole, "floor_load_s": load})
    medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(f"child ready (spawn -> port line): {medians['child_ready_s']:.3f} s median of {args.runs}")
    print(f"floor, a plain process loading the model: {medians['floor_process_s']:.3f} s "
          f"(the load alone {medians['floor_load_s']:.3f} s)")
    out = ROOT / "eval" / "results" / ("bench-model-start" + ("-other" if args.child else "") + ".json")
    out.write_text(json.dumps({"model": Path(model).name, "child": args.child or "repomem", "medians": medians,
                               "runs": runs}, indent=1) + "\n")
    print(f"written {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
