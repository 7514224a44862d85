"""Opening a repository's service for a command: which folder, its warnings, its index brought up to
date with a progress bar. Shared by the commands that index (`index`, `retrieve`, `complete`,
`summarise`), so none of them imports another command's module."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from repomem.cli.errors import UserError, ok
from repomem.cli.progress_bars import RichProgress
from repomem.failures import Failure, FailureKind
from repomem.positions import find_repo_root
from repomem.service import IndexReport, RepoService


def open_service(root: Path) -> RepoService:
    """The service of the repository at root; its configuration's warnings go to stderr."""
    service = ok(RepoService.open(root))
    for warning in service.warnings:
        print(f"repomem: warning: {warning}", file=sys.stderr)
    return service


def ensure_index(service: RepoService, err: Console, full: bool = False, load: bool = True,
                 structure: bool = True) -> IndexReport:
    """The index, loaded, updated or built, with its per-file structure read (what completion uses
    and an update writes), so a damaged index is rebuilt before the command, not during it.
    `load` False: only the report is needed (an unchanged index is not loaded); `structure` False:
    the command reads no structure (`retrieve`: fragments and scores only)."""
    with RichProgress(err) as progress:
        report = ok(service.ensure_index(progress, full=full, structure=load and structure, load=load))
    if report.warning:
        print(f"repomem: warning: {report.warning}", file=sys.stderr)
    return report


def embed_windows(service: RepoService, err: Console) -> int:
    """The windows embedded that had no vector yet (strategy "dense"), with a progress bar: the
    first time, minutes on a large repository."""
    with RichProgress(err) as progress:
        return ok(service.update_window_embeddings(progress))


def named_folder(text: str) -> Path:
    """A repository folder a person named (`index PATH`, `--repo`): an empty string is no folder
    (Path("") would be the current one)."""
    if not text.strip():
        raise UserError(Failure(FailureKind.MISSING_REPO, "the repository folder is an empty string"))
    return Path(text)


def index_root(path: str | None) -> Path:
    """`index` with no folder indexes the repository around the current one (not the subfolder);
    an explicit folder inside another repository is indexed as asked, with a warning."""
    if path is None:
        found = find_repo_root(Path.cwd())
        if found is None:
            # Indexing whatever folder one stands in (a home folder, /tmp) is never what was meant.
            raise UserError(Failure(
                FailureKind.NOT_A_REPO,
                f"{Path.cwd()} is not inside a repository (no .git or repomem.toml above it, nor an index); "
                "run `repomem index .` to index this folder as one",
            ))
        return found
    asked = named_folder(path)
    enclosing = find_repo_root(asked.resolve()) if asked.is_dir() else None
    if enclosing is not None and enclosing != asked.resolve():
        print(f"repomem: warning: {asked} lies inside the repository {enclosing}; completions there use "
              f"{enclosing}'s index (run `repomem index {enclosing}`), this one serves {asked} alone "
              "(--repo)", file=sys.stderr)
    return asked
