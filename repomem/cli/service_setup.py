"""Opening a repository's service for a command: which folder, its warnings, its index brought up to
date with a progress bar. Shared by the commands that index (`index`, `retrieve`, `complete`,
`summarise`), so none of them imports another command's module."""

from __future__ import annotations

import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from rich.console import Console

from repomem.cli.errors import UserError, ok
from repomem.cli.progress_bars import RichProgress
from repomem.failures import Failure, FailureKind
from repomem.index.scan_memo import git_environment
from repomem.repository_root import find_repo_root, in_git_folder, too_wide_to_index
from repomem.service import IndexReport, RepoService


class KeptServices:
    """The services a resident process (`repomem daemon`) keeps between commands, by repository
    root, the most recently used last: a command finds its repository's index, structure and edit
    state in memory. A service is reused only for the same resolved settings (a changed config
    file or environment opens a new one); past `limit` repositories the oldest is dropped."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.services: OrderedDict[Path, RepoService] = OrderedDict()
        self.unsaved: set[Path] = set()  # updated in memory, written after the command answered
        self._keys: dict[Path, object] = {}

    @staticmethod
    def _key(service: RepoService) -> object:
        """What a kept service must share with a command's: its settings, and the environment git
        reads its rules from (which files a scan lists; index/scan_memo.py's key)."""
        return service.config, git_environment()

    def reuse(self, opened: RepoService) -> RepoService:
        kept = self.services.get(opened.root)
        key = self._key(opened)
        # Not one whose index folder was deleted under it (`.repomem` removed): it answered
        # "unchanged" and wrote nothing, where a command of its own rebuilt the index.
        if kept is not None and self._keys.get(opened.root) == key and kept.snapshot_on_disk:
            kept.warnings = opened.warnings
            self.services.move_to_end(opened.root)
            return kept
        if kept is not None:
            self.drop(opened.root)
        self.services[opened.root] = opened
        self._keys[opened.root] = key
        while len(self.services) > self.limit:
            self.drop(next(iter(self.services)))
        return opened

    def drop(self, root: Path) -> Failure | None:
        """Stop keeping a repository (its unsaved update written first)."""
        failure = self.save(root)
        service = self.services.pop(root)
        self._keys.pop(root, None)
        service.stop_watching()
        return failure

    def discard_cut_off(self) -> list[RepoService]:
        """Let go of the services whose index update a command stopped midway (`RepoService.
        update_cut_off`: a client's hang-up interrupts a command between any two steps, a bug
        anywhere), unsaved: their index in memory may be half updated and their watch's news read.
        The next command opens the repository afresh from the index on disk. Returns them."""
        dropped = [service for service in self.services.values() if service.update_cut_off]
        for service in dropped:
            del self.services[service.root]
            self._keys.pop(service.root, None)
            self.unsaved.discard(service.root)
            service.stop_watching()
        return dropped

    def save(self, root: Path) -> Failure | None:
        """Write one repository's index if a command left it updated in memory only."""
        if root not in self.unsaved:
            return None
        self.unsaved.discard(root)
        return self.services[root].save()

    def save_all(self) -> list[Failure]:
        return [f for f in (self.save(root) for root in list(self.unsaved)) if f is not None]


# Set by a resident process only (repomem/cli/daemon_server.py); a one-command process keeps nothing.
KEPT: KeptServices | None = None
# The repository a one-command process opened last: the one a daemon it starts for the next
# commands loads first (repomem/cli/daemon_command.py's start_for_next_commands).
LAST_OPENED: RepoService | None = None


def open_service(root: Path, overrides: dict[str, Any] | None = None) -> RepoService:
    """The service of the repository at root; its configuration's warnings go to stderr.
    `overrides`: the command line's settings (RepoService.open)."""
    global LAST_OPENED
    service = ok(RepoService.open(root, overrides=overrides))
    if KEPT is not None:
        service = KEPT.reuse(service)
    else:
        LAST_OPENED = service
    for warning in service.warnings:
        print(f"repomem: warning: {warning}", file=sys.stderr)
    return service


def ensure_index(service: RepoService, err: Console, full: bool = False, load: bool = True,
                 structure: bool = True, save_later: bool = False) -> IndexReport:
    """The index, loaded, updated or built, with its per-file structure read (what completion uses
    and an update writes), so a damaged index is rebuilt before the command, not during it.
    `load` False: only the report is needed (an unchanged index is not loaded); `structure` False:
    the command reads no structure (`retrieve`: fragments and scores only). `save_later`: in a
    resident process, an update is written after the command has answered (a one-command process
    writes it now), and a command that came for an answer gets it from memory when the index cannot
    be written (a full disk: a warning); window embeddings are written with the index, so they are
    never deferred."""
    embeds = service.config.index.window_embeddings or service.config.relations.semantic_neighbours > 0
    deferred = save_later and KEPT is not None and not embeds
    with RichProgress(err) as progress:
        report = ok(service.ensure_index(progress, full=full, structure=load and structure, load=load,
                                         save=not deferred, unsaved_ok=save_later))
    if KEPT is not None:
        if report.unsaved:
            KEPT.unsaved.add(service.root)  # tried again after a later command
        elif report.action == "unchanged":
            if not deferred:  # what an earlier command left unwritten, written now as this one asks
                ok(KEPT.save(service.root))
        elif deferred:
            KEPT.unsaved.add(service.root)
        else:
            KEPT.unsaved.discard(service.root)  # written just now
    if report.warning:
        print(f"repomem: warning: {report.warning}", file=sys.stderr)
    return report


def embed_windows(service: RepoService, err: Console) -> int:
    """The windows embedded that had no vector yet (strategy "dense"), with a progress bar: the
    first time, minutes on a large repository."""
    with RichProgress(err) as progress:
        return ok(service.update_window_embeddings(progress))


def named_folder(text: str, warn_inside: bool = True) -> Path:
    """A repository folder a person named (`index PATH`, `--repo`): an empty string is no folder
    (Path("") would be the current one). `warn_inside` False: the caller says warn_if_inside once
    its other checks passed."""
    if not text.strip():
        raise UserError(Failure(FailureKind.MISSING_REPO, "the repository folder is an empty string"))
    asked = Path(text)
    if not asked.exists():
        raise UserError(Failure(FailureKind.MISSING_REPO, f"{text}: no such folder"))
    git_folder = in_git_folder(asked)
    if git_folder:  # an index there was written among git's own files
        raise UserError(Failure(FailureKind.NOT_A_REPO, f"{text} is {git_folder}"))
    too_wide = too_wide_to_index(asked)
    if too_wide:
        raise UserError(Failure(FailureKind.NOT_A_REPO, f"{text} is {too_wide}: indexing all of it is never "
                                                        "what is meant; name a project's folder"))
    if warn_inside:
        warn_if_inside(asked)
    return asked


def warn_if_inside(asked: Path) -> None:
    """A folder inside a repository gets an index of its own (`index pkg`, `--repo pkg`): said, as
    the repository's commands will not read it."""
    enclosing = find_repo_root(asked.resolve()) if asked.is_dir() else None
    if enclosing is not None and enclosing != asked.resolve():
        print(f"repomem: warning: {asked} lies inside the repository {enclosing}; completions there use "
              f"{enclosing}'s index (run `repomem index {enclosing}`), this one serves {asked} alone "
              "(--repo)", file=sys.stderr)


def index_root(path: str | None) -> Path:
    """`index` with no folder indexes the repository around the current one (not the subfolder);
    an explicit folder inside another repository is indexed as asked, with a warning."""
    if path is None:
        git_folder = in_git_folder(Path.cwd())
        if git_folder:  # as git refuses to run there (`git status`: "must be run in a work tree")
            raise UserError(Failure(FailureKind.NOT_A_REPO, f"{Path.cwd()} is {git_folder}"))
        found = find_repo_root(Path.cwd())
        if found is None:
            # Indexing whatever folder one stands in (a home folder, /tmp) is never what was meant.
            raise UserError(Failure(
                FailureKind.NOT_A_REPO,
                f"{Path.cwd()} is not inside a repository (no .git or repomem.toml above it, nor an index); "
                + ("change to a project's folder first" if too_wide_to_index(Path.cwd())
                   else "run `repomem index .` to index this folder as one"),
            ))
        return found
    return named_folder(path)
