"""Where a Rust file sits in its crate's module tree, read from paths alone (the resolver never sees
Cargo.toml, and `mod` declarations only confirm what the conventional layout already says).

- A crate's source directory is the nearest ancestor directory of a file that holds `lib.rs` or
  `main.rs` (normally `<crate>/src`); a workspace has one per member crate. `src/bin` is one of
  its own (each file directly in it is a binary's crate root). Failing those, the nearest `tests`,
  `examples` or `benches` directory (each file directly in it is a crate root), and failing that
  the repository root.
- The module path is the file's path below that directory: `a/b.rs` and `a/b/mod.rs` are `a::b`
  (the 2018 layout and the older mod.rs one), `lib.rs` / `main.rs` and the target files directly in
  a `tests`-like directory are the crate root. A library and a binary sharing one `src` directory
  share its module tree (their roots merge: an approximation).
- A crate is named by its directory (`crates/foo-bar/src` is `foo_bar`); a name also matches a
  directory that is its last `_`-separated part (`grep_searcher` finds `crates/searcher`), since
  workspaces often prefix member packages with the project's name. The crate at the repository
  root has no name the paths can tell: only its own package's tests, examples and binaries reach
  it (calls.py).
"""

from __future__ import annotations

CRATE_ROOT_FILES = ("lib.rs", "main.rs")
TARGET_DIRECTORIES = frozenset({"tests", "examples", "benches", "bin"})  # files directly inside are crate roots
# Crates of the toolchain: a repository directory of the same name never captures their paths.
STANDARD_CRATES = frozenset({"std", "core", "alloc", "proc_macro", "test"})

ModulePath = tuple[str, ...]


# Paths are repository-relative with '/' separators: split as strings (PurePosixPath costs ~30 us
# a call, and every file's place walks up its directories).
def parent_directory(path: str) -> str:
    return path.rpartition("/")[0]


def base_name(path: str) -> str:
    return path.rpartition("/")[2]


def is_crate_root_file(path: str) -> bool:
    return base_name(path) in CRATE_ROOT_FILES


def source_directory(path: str, root_directories: set[str] | dict[str, int]) -> str:
    """The source directory of a file's crate ("" for the repository root); `root_directories`:
    the directories holding a lib.rs or main.rs."""
    directory = parent_directory(path)
    fallback = None
    while True:
        if directory in root_directories:
            return directory
        name = base_name(directory)
        if name == "bin" and base_name(parent_directory(directory)) == "src":
            return directory
        if fallback is None and name in TARGET_DIRECTORIES:
            fallback = directory
        if not directory:
            return fallback if fallback is not None else ""
        directory = parent_directory(directory)


def module_path(path: str, source_dir: str) -> ModulePath:
    """The module a file holds, relative to its crate's source directory."""
    relative = path[len(source_dir) + 1:] if source_dir else path
    parts = relative.split("/")
    stem = parts[-1].rsplit(".", 1)[0]
    if len(parts) == 1 and (stem in ("lib", "main") or base_name(source_dir) in TARGET_DIRECTORIES):
        return ()
    if stem == "mod":
        return tuple(parts[:-1])
    return (*parts[:-1], stem)


def crate_name(source_dir: str) -> str:
    """The name other crates call a crate by: its package directory, `-` read as `_`; "" when the
    directory does not tell (the repository root) or holds no library (tests, examples, binaries)."""
    name = base_name(source_dir)
    if name in TARGET_DIRECTORIES:
        return ""
    package = parent_directory(source_dir) if name == "src" else source_dir
    return base_name(package).replace("-", "_")


def matches_crate(name: str, directory_name: str) -> bool:
    """Whether a crate name can denote a crate whose directory gives `directory_name`."""
    return bool(directory_name) and (name == directory_name or name.endswith("_" + directory_name))
