"""Go call edges and names in scope on small hand-checked repositories: packages are directories,
imports name them by module path, methods are found through the receiver and embedded types."""

from __future__ import annotations

import pytest

from repomem.completion.levers.names_in_scope import repository_imports
from repomem.languages.go.packages import default_name
from repomem.languages.registry import language_named
from repomem.service import RepoService
from tests.repos import call_edges, open_repository

STORE = "pkg/store/store.go"
HELPERS = "pkg/store/helpers.go"
API = "pkg/api/api.go"
MAIN = "cmd/app/main.go"
UTIL = "cmd/app/util.go"
ERRORS = "errors/errors.go"

FILES = {
    "go.mod": "module example.com/shop\n\ngo 1.22\n",
    STORE: (
        "package store\n"                              # 0
        "\n"
        "type Store struct {\n"                        # 2
        "\titems map[string]int\n"
        "}\n"
        "\n"
        "type Cache struct {\n"                        # 6: embeds Store, gets its methods
        "\t*Store\n"
        "}\n"
        "\n"
        "func New() *Store {\n"                        # 10
        "\treturn &Store{items: map[string]int{}}\n"
        "}\n"
        "\n"
        "func (s *Store) Get(key string) int {\n"      # 14
        "\treturn s.lookup(clean(key))\n"              # 15: receiver -> lookup, clean in helpers.go
        "}\n"
        "\n"
        "func (s *Store) lookup(key string) int {\n"   # 18
        "\treturn s.items[key]\n"
        "}\n"
        "\n"
        "func (c *Cache) Warm() {\n"                   # 22
        "\tc.Get(\"x\")\n"                             # 23: promoted from the embedded Store
        "\tc.Missing()\n"                              # 24: no such method
        "}\n"
    ),
    HELPERS: (
        "package store\n"                              # 0
        "\n"
        "import \"strings\"\n"                         # 2
        "\n"
        "func clean(key string) string {\n"            # 4
        "\treturn strings.TrimSpace(key)\n"            # 5: standard library
        "}\n"
        "\n"
        "func Normalize(key string) string {\n"        # 8
        "\treturn clean(key)\n"                        # 9
        "}\n"
    ),
    API: (
        "package api\n"                                # 0
        "\n"
        "import (\n"                                   # 2
        "\t\"fmt\"\n"
        "\t\"strings\"\n"
        "\t\"math/rand\"\n"                            # 5: the standard library's, not rand/
        "\tst \"example.com/shop/pkg/store\"\n"        # 6: aliased import
        ")\n"
        "\n"
        "type Store = st.Store\n"                      # 9: re-export through a type alias
        "\n"
        "func Fetch(key string) int {\n"               # 11
        "\ts := st.New()\n"                            # 12 -> store.go New
        "\tfmt.Println(strings.ToUpper(key), rand.Int())\n"  # 13: standard library only
        "\treturn s.Get(st.Normalize(key))\n"          # 14 -> helpers.go Normalize; s.Get: a local value
        "}\n"
        "\n"
        "func Make() *Store {\n"                       # 17
        "\treturn st.New()\n"                          # 18
        "}\n"
    ),
    MAIN: (
        "package main\n"                               # 0
        "\n"
        "import (\n"                                   # 2
        "\t\"errors\"\n"                               # 3: the standard library's, not errors/
        "\n"
        "\t\"example.com/shop/pkg/api\"\n"             # 5
        "\t\"example.com/shop/pkg/store\"\n"           # 6
        "\tmyerrors \"example.com/shop/errors\"\n"     # 7
        ")\n"
        "\n"
        "func main() {\n"                              # 10
        "\tn := api.Fetch(\"x\")\n"                    # 11 -> api.go Fetch
        "\thelper(n)\n"                                # 12 -> util.go helper (same package)
        "\tapi.Store.Get(api.Make(), \"k\")\n"         # 13 -> store.go Get (through the alias), api.go Make
        "\t_ = errors.New(\"standard\")\n"             # 14: standard library
        "\t_ = myerrors.New(\"ours\")\n"               # 15 -> errors/errors.go New
        "\tundefinedThing()\n"                         # 16: unknown name
        "\tstore.New()\n"                              # 17 -> store.go New
        "\t_ = api.Store(*store.New())\n"              # 18 -> the alias's target store.Store; New
        "}\n"
        "\n"
        "func run(store *api.Store) {\n"               # 21: parameter named like the import
        "\tstore.New()\n"                              # 22: a value's method, never the import
        "\thelper := func(n int) {}\n"                 # 23
        "\thelper(1)\n"                                # 24: the local, not util.go's helper
        "}\n"
    ),
    UTIL: (
        "package main\n"                               # 0
        "\n"
        "func helper(n int) {\n"                       # 2
        "\t_ = n\n"
        "}\n"
    ),
    # Named like standard library packages; importing those must not reach them.
    "rand/rand.go": "package rand\n\nfunc Int() int {\n\treturn 4\n}\n",
    ERRORS: (
        "package errors\n"                             # 0
        "\n"
        "func New(message string) error {\n"           # 2
        "\treturn nil\n"
        "}\n"
    ),
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> RepoService:
    return open_repository(tmp_path_factory.mktemp("goshop"), FILES)


def test_go_resolves_calls_through_its_language_module():
    go = language_named("go")
    assert go.resolves_calls and go.import_prefixes == ("import ",) and go.extensions == (".go",)


def test_calls_across_packages_resolve_through_aliased_imports_and_not_to_the_standard_library(shop):
    assert call_edges(shop, API) == [(12, STORE, 10), (14, HELPERS, 8), (18, STORE, 10)]


def test_a_package_is_its_directory_so_files_share_their_top_level_names(shop):
    assert call_edges(shop, HELPERS) == [(9, HELPERS, 4)]
    assert (15, HELPERS, 4) in call_edges(shop, STORE)


def test_methods_resolve_through_the_receiver_and_embedded_types(shop):
    # s.lookup / clean on line 15; c.Get on 23 reaches Store.Get; c.Missing on 24 resolves nowhere.
    assert call_edges(shop, STORE) == [(15, HELPERS, 4), (15, STORE, 18), (23, STORE, 14)]


def test_main_package_edges_follow_the_alias_and_leave_out_unknown_standard_and_shadowed_names(shop):
    assert call_edges(shop, MAIN) == [
        (11, API, 11),  # api.Fetch
        (12, UTIL, 2),  # helper, same package, other file
        (13, API, 17),  # api.Make
        (13, STORE, 14),  # api.Store.Get: the alias re-exports store.Store, whose method this is
        (15, ERRORS, 2),  # myerrors.New; errors.New on 14 is the standard library's
        (17, STORE, 10),  # store.New; on 22 `store` is a parameter, on 24 `helper` a local
        (18, STORE, 2),  # api.Store(...) converts to the type the alias re-exports
        (18, STORE, 10),
    ]


def test_names_in_scope_are_the_imports_of_repository_packages(tmp_path):
    text = ("package main\n\nimport \"fmt\"\nimport (\n\t\"os\"\n\t\"strings\"\n)\n"
            "import st \"example.com/shop/pkg/store\"\n\nfunc main() {\n\tst.New()\n}\n")
    service = open_repository(tmp_path, {**FILES, MAIN: text})
    lines = text.split("\n")
    assert repository_imports(service.view().symbols, MAIN, lines, ("import ",), 10, 12) == [(7, 8)]
    # One import block holding repository packages (and the standard library's errors): kept whole.
    service.set_buffer(MAIN, FILES[MAIN])
    grouped = FILES[MAIN].split("\n")
    assert repository_imports(service.view().symbols, MAIN, grouped, ("import ",), 10, 12) == [(2, 9)]


def test_an_edit_changes_the_edges_of_the_file_of_its_package_and_of_its_importers(tmp_path):
    lib, app, other = "lib/lib.go", "app/app.go", "app/other.go"
    files = {
        "go.mod": "module example.com/edit\n",
        lib: "package lib\n\nfunc A() {}\n",
        # No edge into lib.go or other.go yet: only dependents() can tell that app.go must change.
        app: "package app\n\nimport \"example.com/edit/lib\"\n\nfunc Run() {\n\tlib.B()\n\tC()\n}\n",
        other: "package app\n\nfunc unused() {}\n",
    }
    service = open_repository(tmp_path, files)
    assert call_edges(service, app) == []
    (tmp_path / lib).write_text("package lib\n\nfunc A() {}\n\nfunc B() {}\n")
    service.ensure_index()
    assert call_edges(service, app) == [(5, lib, 4)]  # an importer of the edited package
    service.set_buffer(other, "package app\n\nfunc unused() {}\n\nfunc C() {}\n")
    assert call_edges(service, app) == [(5, lib, 4), (6, other, 4)]  # a file of the same package
    service.set_buffer(app, files[app].replace("lib.B()", "lib.A()").replace("\tC()\n", "\tD()\n"))
    assert call_edges(service, app) == [(5, lib, 2)]  # the file itself
    service.drop_buffer(app)
    service.drop_buffer(other)
    assert call_edges(service, app) == [(5, lib, 4)]


def test_the_default_import_name_is_the_last_path_element_without_its_version():
    assert [default_name(p) for p in ("example.com/m/pkg/util", "github.com/x/y/v2", "gopkg.in/yaml.v3",
                                      "github.com/mattn/go-sqlite3", "fmt")] == ["util", "y", "yaml", "sqlite3", "fmt"]
