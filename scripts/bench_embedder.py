"""The window embedder in numpy against transformers' BertModel on torch (the reference), in one
run on the same texts: load time (imports included, each in a fresh process), embedding time and
the largest difference between the two.

    python scripts/bench_embedder.py [--texts 96]

Texts: the first 1,500 characters of repomem's own modules (near the 256-token cut), sorted by
length into batches of 32 as the index embeds them. Written to eval/results/bench-embedder.json."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.embeddings.embedder import MAX_TOKENS, TextEmbedder, embedder_dir  # noqa: E402

LOAD_OURS = "import time; t = time.perf_counter(); from repomem.embeddings.embedder import TextEmbedder; " \
            "TextEmbedder.load(2); print(time.perf_counter() - t)"
LOAD_THEIRS = "import sys, time; t = time.perf_counter(); from transformers import AutoModel, AutoTokenizer; " \
              "AutoTokenizer.from_pretrained(sys.argv[1]); AutoModel.from_pretrained(sys.argv[1]); " \
              "print(time.perf_counter() - t)"


def load_s(code: str, *args: str) -> float:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=96)
    args = parser.parse_args()
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(2)
    directory = str(embedder_dir())
    texts = [path.read_text()[:1500] for path in sorted(ROOT.glob("repomem/*/*.py"))][: args.texts]
    ours = TextEmbedder.load(2)
    started = time.perf_counter()
    mine = ours.embed(texts)  # under BULK_TEXTS: the numpy pass
    ours_s = time.perf_counter() - started
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModel.from_pretrained(directory).eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    theirs = np.zeros_like(mine)
    started = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(order), 32):
            chosen = order[first : first + 32]
            encoded = tokenizer([texts[i] for i in chosen], padding=True, truncation=True, max_length=MAX_TOKENS,
                                return_tensors="pt")
            hidden = model(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            theirs[chosen] = torch.nn.functional.normalize(pooled, dim=1).numpy()
    theirs_s = time.perf_counter() - started
    result = {"texts": len(texts), "load_numpy_s": load_s(LOAD_OURS),
              "load_transformers_s": load_s(LOAD_THEIRS, directory),
              "embed_numpy_s": ours_s, "embed_transformers_s": theirs_s,
              "max_abs_difference": float(np.abs(mine - theirs).max())}
    for key, value in result.items():
        print(f"{key}: {value:.3g}" if isinstance(value, float) else f"{key}: {value}")
    (ROOT / "eval" / "results" / "bench-embedder.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
