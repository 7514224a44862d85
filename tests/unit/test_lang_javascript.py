"""TypeScript / JavaScript / TSX call edges and names in scope on small hand-checked repositories:
relative specifiers name files the way Node and TypeScript find them, re-exports are followed,
`this` / `super` reach methods through `extends`, packages and locals never resolve."""

from __future__ import annotations

from dataclasses import replace

import pytest

from repomem.completion.levers.names_in_scope import repository_imports
from repomem.config import Config
from repomem.languages.javascript.calls import JavaScriptCallResolver
from repomem.languages.javascript.modules import ModuleFiles
from repomem.languages.registry import language_named
from repomem.languages.syntax import extract_syntax
from repomem.service import RepoService
from tests.repos import call_edges, open_repository

MATH = "src/util/math.ts"
UTIL_INDEX = "src/util/index.ts"
STRINGS = "src/util/strings.js"
SHAPE = "src/models/shape.ts"
SQUARE = "src/models/square.ts"
APP = "src/app.tsx"
LEGACY = "src/legacy.js"

FILES = {
    MATH: (
        "export function add(a: number, b: number): number {\n"   # 0
        "  return a + b;\n"
        "}\n"
        "export const double = (n: number) => add(n, n);\n"       # 3 -> add
        "export default function square(n: number) {\n"           # 4
        "  return n * n;\n"
        "}\n"
    ),
    UTIL_INDEX: (
        "export { add as plus, double } from './math';\n"         # 0: re-export, renamed
        "export * from './strings';\n"                            # 1
        "export { default as square } from './math';\n"           # 2: a default re-exported by name
    ),
    STRINGS: (
        "export function shout(text) {\n"                         # 0
        "  return text.toUpperCase();\n"                          # 1: a string's method
        "}\n"
    ),
    SHAPE: (
        "export class Shape {\n"                                  # 0
        "  area(): number {\n"                                    # 1
        "    return 0;\n"
        "  }\n"
        "  describe(): string {\n"                                # 4
        "    return `area ${this.area()}`;\n"                     # 5 -> Shape.area
        "  }\n"
        "}\n"
    ),
    SQUARE: (
        "import { Shape } from './shape.js';\n"                   # 0: TypeScript's ESM style names shape.ts
        "import { square } from '../util';\n"                     # 1: the folder's index.ts
        "\n"
        "export class Square extends Shape {\n"                   # 3
        "  constructor(private side: number) {\n"                 # 4
        "    super();\n"                                          # 5
        "  }\n"
        "  area(): number {\n"                                    # 7
        "    return square(this.side);\n"                         # 8 -> math.ts square (default)
        "  }\n"
        "  report(): string {\n"                                  # 10
        "    return this.describe() + super.area();\n"            # 11 -> Shape.describe, Shape.area
        "  }\n"
        "  twice(): number {\n"                                   # 13
        "    return this.area() * 2;\n"                           # 14 -> its own area, not Shape's
        "  }\n"
        "}\n"
    ),
    APP: (
        "import React from 'react';\n"                            # 0: packages
        "import { useState } from 'react';\n"                     # 1
        "import * as util from './util';\n"                       # 2
        "import { plus, shout } from './util';\n"                 # 3
        "import { Square } from './models/square';\n"             # 4
        "import lodash from 'lodash';\n"                          # 5
        "const legacy = require('./legacy');\n"                   # 6
        "\n"
        "export function Badge(props: { n: number }) {\n"         # 8
        "  return <span>{plus(props.n, 1)}</span>;\n"             # 9 -> math.ts add, through `add as plus`
        "}\n"
        "\n"
        "export function App() {\n"                               # 12
        "  const [n, setN] = useState(0);\n"                      # 13: a package's
        "  const shape = new Square(2);\n"                        # 14 -> square.ts Square
        "  util.double(n);\n"                                     # 15 -> math.ts double
        "  lodash.chunk([], 2);\n"                                # 16: a package's
        "  undefinedThing();\n"                                   # 17: unknown
        "  legacy.run();\n"                                       # 18 -> legacy.js run
        "  return <Badge n={shape.area()} />;\n"                  # 19 -> Badge; shape.area: a value's
        "}\n"
        "\n"
        "function render(shout: (s: string) => void) {\n"         # 22: parameter named like the import
        "  shout('x');\n"                                         # 23: the parameter
        "  const plus = () => 0;\n"                               # 24
        "  plus();\n"                                             # 25: the local
        "  util.shout('y');\n"                                    # 26 -> strings.js shout via export *
        "}\n"
    ),
    LEGACY: (
        "function run() {\n"                                      # 0
        "  return helper();\n"                                    # 1 -> helper
        "}\n"
        "function helper() {\n"                                   # 3
        "  return 1;\n"
        "}\n"
        "module.exports = { run };\n"                             # 6
    ),
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> RepoService:
    return open_repository(tmp_path_factory.mktemp("tsshop"), FILES)


def test_the_three_grammars_resolve_calls_through_one_package():
    for grammar, extension in (("javascript", ".jsx"), ("typescript", ".ts"), ("tsx", ".tsx")):
        language = language_named(grammar)
        assert language.resolves_calls and language.import_prefixes[0] == "import "
        assert "require" in language.import_pattern
        assert extension in language.extensions
    assert language_named("tsx").call_resolver is language_named("javascript").call_resolver


def test_calls_across_files_follow_imports_and_re_exports_and_leave_packages_and_unknown_names_out(shop):
    assert call_edges(shop, APP) == [
        (9, MATH, 0),  # plus: index.ts re-exports math's add as plus
        (14, SQUARE, 3),  # new Square
        (15, MATH, 3),  # util.double through the namespace of index.ts
        (18, LEGACY, 0),  # legacy.run through require and module.exports = {run}
        (19, APP, 8),  # <Badge />
        (26, STRINGS, 0),  # util.shout: index.ts's export * from './strings'
    ]


def test_locals_named_like_imports_are_values_not_the_imports(shop):
    lines = {line for line, _, _ in call_edges(shop, APP)}
    assert not lines & {23, 25}  # shout (a parameter), plus (a local arrow function)
    assert 26 in lines  # util.shout is still the import's


def test_methods_resolve_through_this_super_and_the_base_class(shop):
    assert call_edges(shop, SHAPE) == [(5, SHAPE, 1)]
    assert call_edges(shop, SQUARE) == [
        (8, MATH, 4),  # square: index.ts re-exports math's default export by name
        (11, SHAPE, 1),  # super.area
        (11, SHAPE, 4),  # this.describe, inherited from Shape
        (14, SQUARE, 7),  # this.area: Square's own
    ]


def test_commonjs_and_module_level_arrow_functions_resolve_inside_their_file(shop):
    assert call_edges(shop, LEGACY) == [(1, LEGACY, 3)]
    assert call_edges(shop, MATH) == [(3, MATH, 0)]
    assert call_edges(shop, STRINGS) == []  # text.toUpperCase: a value's method


def test_names_in_scope_are_the_imports_of_repository_modules(shop):
    lines = FILES[APP].split("\n")
    # util (twice) and Square; react and lodash are packages.
    assert repository_imports(shop.view().symbols, APP, lines, ("import ",), 12, 10) == [(2, 3), (3, 4), (4, 5)]
    assert repository_imports(shop.view().symbols, APP, lines, ("import ",), 12, 2) == [(3, 4), (4, 5)]


def test_specifiers_name_files_like_node_and_typescript():
    files = ModuleFiles()
    for file_id, path in enumerate(["src/a.js", "src/a.ts", "src/b/index.jsx", "src/c.d.ts", "src/c.js",
                                    "src/d.service.ts"]):
        files.add(path, file_id)
    assert files.find("src/x.ts", "./a") == 1  # .ts before .js
    assert files.find("src/x.ts", "./a.js") == 0  # an existing file as written
    assert files.find("src/x.ts", "./b") == 2  # the folder's index
    assert files.find("src/x.ts", "./c") == 4  # a source before a declaration file
    assert files.find("src/x.ts", "./d.service") == 5  # a dot in a name is no extension
    assert files.find("src/deep/x.ts", "../b/index.js") == 2
    assert files.find("src/x.ts", "react") is None
    assert files.find("src/x.ts", "../../outside") is None
    files.remove("src/a.ts", 1)
    assert files.find("src/x.ts", "./a") == 0


def test_an_edit_changes_the_edges_of_importers_and_of_importers_through_a_re_export(tmp_path):
    lib, barrel, app, extra = "lib.ts", "barrel.ts", "app.ts", "extra.ts"
    files = {
        lib: "export function a() {}\n",
        barrel: "export * from './lib';\n",
        # No edge leaves app.ts yet: only dependents() can tell that it must be resolved again.
        app: "import { b } from './barrel';\nimport { c } from './extra';\n\nb();\nc();\n",
    }
    # Edits are applied to the index, never answered by a rebuild (which would resolve every file).
    no_rebuild = replace(Config(), index=replace(Config().index, compact_ratio=100.0))
    service = open_repository(tmp_path, files, no_rebuild)
    assert call_edges(service, app) == []
    (tmp_path / lib).write_text("export function a() {}\n\nexport function b() {}\n")
    assert service.ensure_index().action == "updated"
    assert call_edges(service, app) == [(3, lib, 2)]  # through the barrel's export *
    (tmp_path / extra).write_text("export const c = () => 1;\n")
    assert service.ensure_index().action == "updated"
    assert call_edges(service, app) == [(3, lib, 2), (4, extra, 0)]  # a new file
    service.set_buffer(app, files[app].replace("b();\n", "[1].forEach((b) => b());\n"))
    assert call_edges(service, app) == [(4, extra, 0)]  # b is a parameter now
    service.drop_buffer(app)
    assert call_edges(service, app) == [(3, lib, 2), (4, extra, 0)]


def test_class_fields_private_methods_class_expressions_and_anonymous_default_classes():
    widget = (
        "export default class {\n"                                # 0: an anonymous default export
        "  #check() { return true; }\n"                           # 1
        "  onClick = () => this.#check();\n"                      # 2 -> #check
        "}\n"
    )
    panel = (
        "import Widget from './widget';\n"                        # 0
        "export const Panel = class extends Widget {\n"           # 1: a class expression
        "  render() { return super.onClick() && this.render(); }\n"  # 2 -> onClick (an arrow field), render
        "};\n"
        "new Panel();\n"                                          # 4 -> Panel
        "new Widget();\n"                                         # 5 -> the default class
    )
    syntaxes = {0: extract_syntax("ui/widget.js", "javascript", widget, "statement"),
                1: extract_syntax("ui/panel.mjs", "javascript", panel, "statement")}
    resolver = JavaScriptCallResolver(syntaxes, 4, 8)

    def edges(file_id: int) -> list[tuple[int, int, int]]:
        source, found = syntaxes[file_id], []
        for edge in resolver.resolve_file(file_id):
            target = syntaxes[edge.target_file]
            found.append((int(source.start_line[edge.source_node]), edge.target_file,
                          int(target.start_line[edge.target_node])))
        return sorted(found)

    assert edges(0) == [(2, 0, 1)]
    assert edges(1) == [(2, 0, 2), (2, 1, 2), (4, 1, 1), (5, 0, 0)]
