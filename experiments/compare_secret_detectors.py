"""repomem's secret masking against detect-secrets (Yelp's scanner, its default plugins and filters),
and both together, on the same texts: the secret corpus (tests/data/secrets) and Django 5.1.4.

    pip install detect-secrets
    python experiments/compare_secret_detectors.py [--out eval/results/secret-detectors.json]

detect-secrets reports (line, secret value) pairs; each value is masked in its line, as repomem
masks. Figures: recall on the corpus (a value caught when no 8-character stretch of it is left),
look-alikes altered, ordinary corpus lines altered, and on Django the lines changed and the CPU
time of each detector over all files. Not a test: prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.index.secrets import MASK, mask_secrets  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402
from tests.secret_corpus import corpus_files, score  # noqa: E402

DJANGO_SUFFIXES = (".py", ".js", ".html", ".txt", ".cfg", ".toml", ".json", ".yml", ".yaml")


def detect_secrets_masker(scratch: Path) -> Callable[[str, str], str]:
    """mask(path, text): the text with every value detect-secrets reports masked in its line. The
    text is written under its own name (detect-secrets chooses filters by file type)."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    def mask(path: str, text: str) -> str:
        target = scratch / Path(path).name
        target.write_text(text, encoding="utf-8")
        found = SecretsCollection()
        with default_settings():
            found.scan_file(str(target))
        lines = text.split("\n")
        for _, secret in found:
            if secret.secret_value and secret.line_number:
                number = secret.line_number - 1
                lines[number] = lines[number].replace(secret.secret_value, MASK)
        target.unlink()
        return "\n".join(lines)

    return mask


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "secret-detectors.json")
    parser.add_argument("--django", type=Path, default=None, help="a Django source tree (default: fetched, pinned)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="detectors-"))
    detect = detect_secrets_masker(scratch)
    detectors: dict[str, Callable[[str, str], str]] = {
        "repomem": lambda path, text: mask_secrets(text)[0],
        "detect-secrets": detect,
        "repomem + detect-secrets": lambda path, text: detect(path, mask_secrets(text)[0]),
    }
    files = corpus_files()
    tree = django_or(args.django)
    django = [(str(p.relative_to(tree)), p.read_text(encoding="utf-8", errors="replace"))
              for p in sorted(tree.rglob("*")) if p.is_file() and p.suffix in DJANGO_SUFFIXES]
    django_lines = sum(1 for _, text in django for line in text.split("\n") if line.strip())
    rows = {}
    for name, mask in detectors.items():
        by_path = {file.text: file.path for file in files}
        result = score(files, lambda text, mask=mask, by_path=by_path: mask(by_path[text], text))
        started = time.process_time()
        changed = 0
        for path, text in django:
            masked = mask(path, text)
            if masked != text:
                changed += sum(a != b for a, b in zip(text.split("\n"), masked.split("\n")))
        rows[name] = {"secrets": result.secrets, "caught": result.caught, "recall": result.recall,
                      "lookalikes": result.lookalikes, "lookalikes_altered": result.lookalikes_altered,
                      "ordinary_lines": result.ordinary_lines, "ordinary_altered": result.ordinary_altered,
                      "django_lines": django_lines, "django_changed": changed,
                      "django_cpu_s": time.process_time() - started, "missed": result.missed[:40]}
    table = Table(title=f"Secret detectors: corpus ({files and rows['repomem']['secrets']} secrets, "
                        f"{rows['repomem']['lookalikes']} look-alikes) and Django 5.1.4 ({django_lines:,} lines)")
    for column in ("detector", "recall", "look-alikes altered", "corpus lines altered", "Django lines changed",
                   "Django CPU s"):
        table.add_column(column, justify="left" if column == "detector" else "right")
    for name, row in rows.items():
        table.add_row(name, f"{100 * row['recall']:.1f} %", f"{row['lookalikes_altered']} / {row['lookalikes']}",
                      f"{row['ordinary_altered']} / {row['ordinary_lines']}",
                      f"{row['django_changed']} ({100 * row['django_changed'] / django_lines:.3f} %)",
                      f"{row['django_cpu_s']:.2f}")
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
