"""Rust call edges and names in scope on small hand-checked repositories: crates are source
directories, modules follow the file layout (and inline `mod` blocks), `use` binds names, `pub use`
re-exports them, impl blocks give types their functions."""

from __future__ import annotations

import pytest

from repomem.completion.levers.names_in_scope import repository_imports
from repomem.languages.registry import language_named
from repomem.languages.rust.layout import crate_name, module_path, source_directory
from repomem.languages.syntax import extract_syntax
from repomem.service import RepoService
from tests.repos import call_edges, open_repository

LIB = "crates/shop/src/lib.rs"
STORE = "crates/shop/src/store.rs"
UTIL = "crates/shop/src/util/mod.rs"
MAIN = "crates/app/src/main.rs"
CLI = "crates/app/src/cli.rs"
CORE = "crates/core/src/lib.rs"

FILES = {
    "Cargo.toml": "[workspace]\nmembers = [\"crates/*\"]\n",
    LIB: (
        "pub mod store;\n"                                   # 0
        "mod util;\n"
        "\n"
        "pub use crate::store::Store;\n"                     # 3: re-export of a type
        "pub use util::normalize as clean;\n"                # 4: re-export under another name
        "\n"
        "pub fn open() -> Store {\n"                         # 6
        "    Store::new()\n"                                 # 7 -> store.rs new, through the re-export
        "}\n"
        "\n"
        "pub mod nested {\n"                                 # 10: an inline module
        "    pub fn reopen() -> super::Store {\n"            # 11
        "        super::open()\n"                            # 12 -> 6
        "    }\n"
        "\n"
        "    pub fn twice() {\n"                             # 15
        "        self::reopen();\n"                          # 16 -> 11
        "        crate::nested::reopen();\n"                 # 17 -> 11
        "        inner_helper();\n"                          # 18 -> 21, the inline module's own
        "    }\n"
        "\n"
        "    fn inner_helper() {}\n"                         # 21
        "}\n"
    ),
    STORE: (
        "use crate::util::normalize;\n"                      # 0
        "use std::collections::HashMap;\n"
        "\n"
        "pub struct Store {\n"                               # 3
        "    items: HashMap<String, u32>,\n"
        "}\n"
        "\n"
        "impl Store {\n"                                     # 7
        "    pub fn new() -> Self {\n"                       # 8
        "        Store { items: HashMap::new() }\n"          # 9: the standard library's
        "    }\n"
        "\n"
        "    pub fn get(&self, key: &str) -> u32 {\n"        # 12
        "        self.lookup(&normalize(key))\n"             # 13 -> 16 (receiver), util normalize
        "    }\n"
        "\n"
        "    fn lookup(&self, key: &str) -> u32 {\n"         # 16
        "        *self.items.get(key).unwrap_or(&0)\n"       # 17: a field's method, not ours
        "    }\n"
        "}\n"
        "\n"
        "pub trait Named {\n"                                # 21
        "    fn name(&self) -> String;\n"                    # 22
        "    fn shout(&self) -> String {\n"                  # 23
        "        self.name().to_uppercase()\n"               # 24 -> 22, the trait's own
        "    }\n"
        "}\n"
        "\n"
        "impl Named for Store {\n"                           # 28: a trait impl
        "    fn name(&self) -> String {\n"                   # 29
        "        Self::label()\n"                            # 30 -> 35, another impl block
        "    }\n"
        "}\n"
        "\n"
        "impl Store {\n"                                     # 34
        "    fn label() -> String {\n"                       # 35
        "        String::from(\"store\")\n"                  # 36: the standard library's
        "    }\n"
        "}\n"
    ),
    UTIL: (
        "pub fn normalize(key: &str) -> String {\n"          # 0
        "    key.trim().to_string()\n"
        "}\n"
        "\n"
        "pub fn check(key: &str) -> bool {\n"                # 4
        "    !normalize(key).is_empty()\n"                   # 5 -> 0
        "}\n"
        "\n"
        "#[cfg(test)]\n"
        "mod tests {\n"                                      # 9
        "    use super::*;\n"                                # 10: a glob
        "\n"
        "    #[test]\n"
        "    fn normalizes() {\n"                            # 13
        "        assert_eq!(normalize(\" a \"), \"a\");\n"   # 14 -> 0, inside a macro, through the glob
        "        assert!(check(\"a\"));\n"                   # 15 -> 4
        "    }\n"
        "}\n"
    ),
    MAIN: (
        "mod cli;\n"                                         # 0
        "\n"
        "use shop::{open, clean as tidy};\n"                 # 2: another crate of the workspace
        "use serde::Serialize;\n"                            # 3: a crate from crates.io
        "use std::fmt;\n"                                    # 4
        "\n"
        "fn main() {\n"                                      # 6
        "    let store = open();\n"                          # 7 -> lib.rs 6
        "    let name = tidy(\"x\");\n"                      # 8 -> util normalize, two re-export hops
        "    cli::run(&store);\n"                            # 9 -> cli.rs 2
        "    shop::store::Store::new();\n"                   # 10 -> store.rs 8
        "    shop::Store::new();\n"                          # 11 -> store.rs 8, through lib.rs's pub use
        "    serde::json::to_string(&name);\n"               # 12: not in the repository
        "    core::mem::swap(&mut a, &mut b);\n"             # 13: the toolchain's core, not crates/core
        "    undefined_thing();\n"                           # 14: unknown name
        "}\n"
        "\n"
        "fn shadowed(open: fn() -> u32) {\n"                 # 17: a parameter named like the import
        "    open();\n"                                      # 18: the parameter
        "    let tidy = |s: &str| s.len();\n"                # 19
        "    tidy(\"y\");\n"                                 # 20: the closure
        "}\n"
        "\n"
        "fn helper() {}\n"                                   # 23
    ),
    CLI: (
        "use shop::store::{Named, Store};\n"                 # 0
        "\n"
        "pub fn run(store: &Store) {\n"                      # 2
        "    store.get(\"k\");\n"                            # 3: a method of a value: no type inference
        "    Named::shout(store);\n"                         # 4 -> store.rs 23
        "    super::helper();\n"                             # 5 -> main.rs 23
        "}\n"
    ),
    CORE: "pub mod mem {\n    pub fn swap() {}\n}\n",
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> RepoService:
    return open_repository(tmp_path_factory.mktemp("rustshop"), FILES)


def test_rust_resolves_calls_through_its_language_module():
    rust = language_named("rust")
    assert rust.resolves_calls and rust.import_prefixes[:2] == ("use ", "pub use ") and rust.extensions == (".rs",)


def test_modules_follow_the_file_layout_and_crates_their_source_directories():
    roots = {"crates/shop/src", "crates/app/src", "src", "src/bin/tool"}
    assert [source_directory(p, roots) for p in (
        "crates/shop/src/util/mod.rs", "src/a/b.rs", "src/bin/x.rs", "src/bin/tool/main.rs",
        "crates/shop/tests/common/mod.rs", "scripts/loose.rs")] == [
        "crates/shop/src", "src", "src/bin", "src/bin/tool", "crates/shop/tests", ""]
    assert [module_path(p, d) for p, d in (
        ("crates/shop/src/lib.rs", "crates/shop/src"), ("src/a/b.rs", "src"), ("src/a/mod.rs", "src"),
        ("src/bin/x.rs", "src/bin"), ("tests/common/mod.rs", "tests"), ("tests/it.rs", "tests"))] == [
        (), ("a", "b"), ("a",), (), ("common",), ()]
    assert [crate_name(d) for d in ("crates/foo-bar/src", "src", "crates/x/tests")] == ["foo_bar", "", ""]


def test_paths_resolve_through_crate_self_super_and_inline_modules(shop):
    assert call_edges(shop, LIB) == [(7, STORE, 8), (12, LIB, 6), (16, LIB, 11), (17, LIB, 11), (18, LIB, 21)]


def test_methods_resolve_through_self_and_the_types_impl_blocks_but_not_the_standard_library(shop):
    assert call_edges(shop, STORE) == [
        (13, STORE, 16),  # self.lookup
        (13, UTIL, 0),  # normalize, imported with `use crate::util::normalize`
        (24, STORE, 22),  # self.name() in the trait's default method: the trait's own
        (30, STORE, 35),  # Self::label, from an impl block of its own
    ]


def test_a_glob_import_in_an_inline_test_module_reaches_calls_inside_macros(shop):
    assert call_edges(shop, UTIL) == [(5, UTIL, 0), (14, UTIL, 0), (15, UTIL, 4)]


def test_other_crates_of_the_workspace_resolve_by_name_and_external_ones_never(shop):
    assert call_edges(shop, MAIN) == [
        (7, LIB, 6),  # open
        (8, UTIL, 0),  # tidy = shop::clean = util::normalize (re-exported under another name)
        (9, CLI, 2),  # cli::run, the module `mod cli;` declares
        (10, STORE, 8),  # shop::store::Store::new
        (11, STORE, 8),  # shop::Store::new, through lib.rs's `pub use`
        # 12 serde, 13 the toolchain's core, 14 an unknown name; 18 and 20 call a parameter and a closure
    ]


def test_associated_functions_resolve_and_methods_of_values_do_not(shop):
    assert call_edges(shop, CLI) == [(4, STORE, 23), (5, MAIN, 23)]


def test_an_edit_reaches_the_crates_that_name_its_crate(tmp_path):
    lib, module, main = "crates/base/src/lib.rs", "crates/base/src/m.rs", "crates/app/src/main.rs"
    files = {
        lib: "pub mod m;\n",
        module: "pub fn a() {}\n",
        # The package is `myproj-base` in its Cargo.toml; its directory says `base`.
        main: "fn main() {\n    myproj_base::m::b();\n}\n",
    }
    service = open_repository(tmp_path, files)
    assert call_edges(service, main) == []
    service.set_buffer(module, "pub fn a() {}\n\npub fn b() {}\n")
    assert call_edges(service, main) == [(1, module, 2)]


def test_tests_and_binaries_reach_the_root_packages_library_by_its_unwritten_name(tmp_path):
    lib, api, tests, tool = "src/lib.rs", "src/api.rs", "tests/it.rs", "src/bin/tool.rs"
    files = {
        lib: "pub mod api;\n\npub fn top() {}\n",
        api: "pub fn call() {}\n",
        tests: ("use mylib::api;\n"                # 0: the package's name, which no path shows
                "use rand::Rng;\n"                 # 1
                "\n"
                "#[test]\n"
                "fn works() {\n"                   # 4
                "    mylib::top();\n"              # 5 -> lib.rs 2
                "    rand::thread_rng();\n"        # 6: the library has no thread_rng
                "    api::extra();\n"              # 7: not yet
                "}\n"),
        tool: "fn main() {\n    mylib::api::call();\n}\n",
        "src/main.rs": "fn main() {\n    mylib::top();\n}\n",  # beside lib.rs: another crate, same directory
    }
    service = open_repository(tmp_path, files)
    assert call_edges(service, tests) == [(5, lib, 2)]
    assert call_edges(service, tool) == [(1, api, 0)]
    assert call_edges(service, "src/main.rs") == [(1, lib, 2)]
    assert call_edges(service, lib) == []
    # No edge from the test crate into api.rs yet: only dependents() can tell it must change.
    service.set_buffer(api, "pub fn call() {}\n\npub fn extra() {}\n")
    assert call_edges(service, tests) == [(5, lib, 2), (7, api, 2)]


def test_a_library_coming_and_going_moves_crate_boundaries(tmp_path):
    main, util, lib = "src/main.rs", "src/util.rs", "src/lib.rs"
    files = {main: "mod util;\n\nfn main() {\n    app::util::run();\n}\n", util: "pub fn run() {}\n"}
    service = open_repository(tmp_path, files)
    assert call_edges(service, main) == []  # a binary alone: `app` is no crate of the repository
    service.set_buffer(lib, "pub mod util;\n")  # now the package's library holds util.rs
    assert call_edges(service, main) == [(3, util, 0)]
    service.drop_buffer(lib)
    assert call_edges(service, main) == []


def test_names_in_scope_are_the_uses_of_repository_code(shop):
    lines = FILES[MAIN].split("\n")
    assert repository_imports(shop.view().symbols, MAIN, lines, ("use ",), 10, 12) == [(2, 3)]
    cli_lines = FILES[CLI].split("\n")
    assert repository_imports(shop.view().symbols, CLI, cli_lines, ("use ",), 3, 12) == [(0, 1)]


def test_names_in_scope_keep_crate_relative_and_glob_uses_whole(tmp_path):
    text = ("use std::io;\nuse crate::a::{\n    one,\n    two,\n};\nuse super::*;\n\nfn f() {\n    one();\n}\n")
    files = {"src/lib.rs": "mod a;\nmod b;\n", "src/a.rs": "pub fn one() {}\npub fn two() {}\n", "src/b.rs": text}
    service = open_repository(tmp_path, files)
    spans = repository_imports(service.view().symbols, "src/b.rs", text.split("\n"), ("use ",), 8, 12)
    assert spans == [(1, 5), (5, 6)]


def test_an_edit_changes_the_edges_of_its_crate(tmp_path):
    lib, a, b = "src/lib.rs", "src/a.rs", "src/b.rs"
    files = {
        lib: "mod a;\nmod b;\n",
        a: "pub fn zero() {}\n",
        # No edge into a.rs yet: only dependents() can tell that b.rs must change.
        b: "use crate::a::two;\n\npub fn run() {\n    two();\n    crate::a::one();\n}\n",
    }
    service = open_repository(tmp_path, files)
    assert call_edges(service, b) == []
    service.set_buffer(a, "pub fn one() {}\n\npub fn two() {}\n")
    assert call_edges(service, b) == [(3, a, 2), (4, a, 0)]
    service.set_buffer(b, files[b].replace("crate::a::one()", "crate::a::three()"))
    assert call_edges(service, b) == [(3, a, 2)]
    service.drop_buffer(b)
    assert call_edges(service, b) == [(3, a, 2), (4, a, 0)]
    service.drop_buffer(a)
    assert call_edges(service, b) == []
    (tmp_path / a).write_text("pub fn two() {}\n")
    service.ensure_index()
    assert call_edges(service, b) == [(3, a, 0)]


def test_a_path_thousands_of_segments_deep_is_no_call_and_no_recursion_error():
    # Generated code can spell `a::a::...::f()` or `impl a::...::S` thousands of segments deep:
    # a path longer than the resolver follows names nothing, and reading it never recurses per segment.
    deep = "a::\n" * 3000
    text = f"impl {deep}S {{}}\nfn g() {{\n    {deep}f();\n    <{deep}T as Tr>::m();\n    crate::x::f();\n}}\n"
    syntax = extract_syntax("src/lib.rs", "rust", text, "statement")
    assert list(syntax.calls.callee) == ["crate::x::f"]
