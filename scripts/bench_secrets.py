"""Secret masking measured: recall on the corpus of planted secrets, and how many ordinary lines of
real repositories masking changes (not a test: the figures are for the README's Security section).

    python scripts/bench_secrets.py                      # the dev-set repositories and Django 5.1.4
    python scripts/bench_secrets.py --no-django --repo DIR

The corpus (tests/data/secrets, read by tests/secret_corpus.py) holds secrets in many shapes across
Python, shell, YAML, JSON notebooks, TOML, INI, JavaScript, TypeScript and Go, and look-alikes that
must stay (lock-file hashes, UUIDs, commit ids, test fixtures). On real repositories every line
masking changes counts as a false positive (an upper bound: a package may ship a real test key),
over the non-blank lines of the files repomem indexes and of their configuration files; the changed
lines are listed for a reader to judge. Files that `secret_file_reason` would hold back are listed too.
Results go to eval/results/secrets-masking.md and .json, and a table on the terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eval.build import load_devset  # noqa: E402
from repomem.config import ScanConfig  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.index.scan import list_candidates, normalize_newlines  # noqa: E402
from repomem.index.secrets import mask_secrets, secret_file_reason  # noqa: E402
from repomem.packages import package_source  # noqa: E402
from scripts.bench_sources import DJANGO, django_or  # noqa: E402
from tests.secret_corpus import corpus_files, score  # noqa: E402

DEFAULT_DEVSET = ROOT.parent / "shared" / "bench" / "devset.toml"
# Files a cursor may sit in (their text is masked in its prompt) though repomem does not index them.
CONFIG_SUFFIXES = (".yaml", ".yml", ".toml", ".ini", ".cfg", ".json", ".ipynb", ".env", ".properties")
SHOWN_CHANGES = 40  # changed lines listed per repository in the report


@dataclass
class RepoFigures:
    name: str
    files: int = 0
    megabytes: float = 0.0
    lines: int = 0  # non-blank
    changed: list[str] = field(default_factory=list)  # "path:line: masked line"
    held_back: list[str] = field(default_factory=list)  # "path: reason" (secret files by content)
    mask_cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.changed) / self.lines if self.lines else 0.0


def repo_texts(root: Path) -> list[tuple[str, str]]:
    """(path, text) of the files repomem indexes under `root`, then of its configuration files."""
    scan = ScanConfig()
    candidates, _ = list_candidates(root, scan)
    paths = [candidate.path for candidate in candidates]
    indexed = set(paths)
    paths += sorted(path.relative_to(root).as_posix() for path in root.rglob("*")
                    if path.suffix in CONFIG_SUFFIXES and path.is_file()
                    and path.relative_to(root).as_posix() not in indexed
                    and path.stat().st_size <= scan.max_file_bytes)
    texts = []
    for path in paths:
        try:
            data = (root / path).read_bytes()
        except OSError:
            continue
        if b"\0" not in data:  # as the scan: a NUL anywhere makes a file binary
            texts.append((path, normalize_newlines(data.decode("utf-8", errors="replace"))))
    return texts


def measure_repo(name: str, root: Path) -> RepoFigures:
    figures = RepoFigures(name)
    for path, text in repo_texts(root):
        figures.files += 1
        figures.megabytes += len(text.encode("utf-8")) / 1e6
        started = time.process_time()
        masked, _ = mask_secrets(text)
        figures.mask_cpu_s += time.process_time() - started
        reason = secret_file_reason(text)
        if reason is not None:
            figures.held_back.append(f"{path}: {reason}")
        for number, (line, after) in enumerate(zip(text.split("\n"), masked.split("\n")), start=1):
            if line.strip():
                figures.lines += 1
                if line != after:
                    figures.changed.append(f"{path}:{number}: {after.strip()[:160]}")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devset", type=Path, default=DEFAULT_DEVSET, help="dev set file (%(default)s)")
    parser.add_argument("--no-django", action="store_true", help=f"leave out {DJANGO}")
    parser.add_argument("--repo", type=Path, action="append", default=[], help="another source tree (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "secrets-masking.md")
    args = parser.parse_args()
    console = Console()

    corpus = corpus_files()
    corpus_score = score(corpus, lambda text: mask_secrets(text)[0])

    repos: list[tuple[str, Path]] = []
    devset = load_devset(args.devset)
    if isinstance(devset, Failure):
        console.print(f"[yellow]{devset.message}: the dev-set repositories are left out[/]")
    else:
        for repo in devset.repos:
            source = package_source(repo.requirement)
            if isinstance(source, Failure):
                console.print(f"[yellow]{repo.requirement}: {source.message}[/]")
            else:
                repos.append((repo.requirement, source))
    if not args.no_django:
        repos.append((DJANGO, django_or(None)))
    repos += [(str(path), path) for path in args.repo]
    measured = [measure_repo(name, root) for name, root in repos]

    secret_shapes = corpus_score.shapes(True)
    languages = sorted({file.path.rsplit(".", 1)[-1] for file in corpus})
    table = Table(title="Secret masking: the corpus (tests/data/secrets)")
    for column in ("measure", "value"):
        table.add_column(column)
    rows = [
        ("corpus files (languages)", f"{len(corpus)} ({', '.join(languages)})"),
        ("secrets planted (distinct shapes)", f"{corpus_score.secrets} ({len(secret_shapes)})"),
        ("recall", f"{corpus_score.recall:.1%} ({corpus_score.caught}/{corpus_score.secrets})"),
        ("look-alikes altered", f"{corpus_score.lookalike_false_positive_rate:.1%} "
                                f"({corpus_score.lookalikes_altered}/{corpus_score.lookalikes})"),
        ("ordinary corpus lines altered", f"{corpus_score.ordinary_false_positive_rate:.1%} "
                                          f"({corpus_score.ordinary_altered}/{corpus_score.ordinary_lines})"),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    repo_table = Table(title="Secret masking on real repositories: every changed line counted as a false positive")
    for column in ("repository", "files", "MB", "non-blank lines", "lines changed", "rate", "files held back",
                   "masking CPU s"):
        repo_table.add_column(column, justify="left" if column == "repository" else "right")
    total_lines = sum(figures.lines for figures in measured)
    total_changed = sum(len(figures.changed) for figures in measured)
    for figures in measured:
        repo_table.add_row(figures.name, str(figures.files), f"{figures.megabytes:.1f}", f"{figures.lines:,}",
                           str(len(figures.changed)), f"{figures.rate:.3%}", str(len(figures.held_back)),
                           f"{figures.mask_cpu_s:.2f}")
    if measured:
        repo_table.add_row("all", str(sum(f.files for f in measured)), f"{sum(f.megabytes for f in measured):.1f}",
                           f"{total_lines:,}", str(total_changed),
                           f"{total_changed / total_lines if total_lines else 0:.3%}",
                           str(sum(len(f.held_back) for f in measured)),
                           f"{sum(f.mask_cpu_s for f in measured):.2f}")
    console.print(repo_table)
    for line in corpus_score.missed:
        console.print(f"[red]missed[/] {line}", markup=True, highlight=False)

    report = {
        "corpus": {
            "files": len(corpus), "languages": languages, "secrets": corpus_score.secrets,
            "secret_shapes": len(secret_shapes), "caught": corpus_score.caught, "recall": corpus_score.recall,
            "lookalikes": corpus_score.lookalikes, "lookalikes_altered": corpus_score.lookalikes_altered,
            "ordinary_lines": corpus_score.ordinary_lines, "ordinary_altered": corpus_score.ordinary_altered,
            "missed": corpus_score.missed, "altered": corpus_score.altered,
        },
        "repositories": [
            {"name": f.name, "files": f.files, "megabytes": round(f.megabytes, 2), "lines": f.lines,
             "changed": len(f.changed), "rate": f.rate, "mask_cpu_s": round(f.mask_cpu_s, 3),
             "changed_lines": f.changed, "held_back": f.held_back}
            for f in measured
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.write_text(markdown(report))
    console.print(f"written {args.out} and {args.out.with_suffix('.json').name}")
    return 0


def quoted(line: str) -> str:
    """`line` fit for a Markdown code span (no backtick in it)."""
    return line.replace("`", "'")


def markdown(report: dict) -> str:
    corpus = report["corpus"]
    out = [
        "# Secret masking, measured (scripts/bench_secrets.py)", "",
        f"Corpus (tests/data/secrets): {corpus['files']} files ({', '.join(corpus['languages'])}), "
        f"{corpus['secrets']} planted secrets in {corpus['secret_shapes']} shapes, {corpus['lookalikes']} look-alikes.",
        "",
        "| measure | value |", "|---|---|",
        f"| recall | {corpus['recall']:.1%} ({corpus['caught']}/{corpus['secrets']}) |",
        f"| look-alikes altered | {corpus['lookalikes_altered']}/{corpus['lookalikes']} |",
        f"| ordinary corpus lines altered | {corpus['ordinary_altered']}/{corpus['ordinary_lines']} |",
        "", "Secrets the corpus plants that masking misses:", "",
        *(f"- `{quoted(line)}`" for line in corpus["missed"]), "",
        "## Real repositories", "",
        "Every line masking changes counts as a false positive (an upper bound: a package may ship a test key).", "",
        "| repository | files | MB | non-blank lines | lines changed | rate | files held back | masking CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for repo in report["repositories"]:
        out.append(f"| {repo['name']} | {repo['files']} | {repo['megabytes']} | {repo['lines']:,} | {repo['changed']} "
                   f"| {repo['rate']:.3%} | {len(repo['held_back'])} | {repo['mask_cpu_s']} |")
    for repo in report["repositories"]:
        if repo["changed_lines"] or repo["held_back"]:
            out += ["", f"### {repo['name']}", ""]
            out += [f"- held back: `{quoted(line)}`" for line in repo["held_back"]]
            out += [f"- `{quoted(line)}`" for line in repo["changed_lines"][:SHOWN_CHANGES]]
            if len(repo["changed_lines"]) > SHOWN_CHANGES:
                out.append(f"- ... {len(repo['changed_lines']) - SHOWN_CHANGES} more in the .json")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
