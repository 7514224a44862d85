"""Java call edges and names in scope on small hand-checked repositories: packages are what files
declare (not their folders), classes of a package see each other, imports (single, on demand,
static) bind classes and methods, methods are found through this / super / the superclass and
through values whose declared type is a repository class."""

from __future__ import annotations

import pytest

from repomem.completion.levers.names_in_scope import repository_imports
from repomem.languages.registry import language_named
from repomem.service import RepoService
from tests.repos import call_edges, open_repository

BASE = "lib/src/main/java/com/shop/util/Base.java"
STRINGS = "lib/src/main/java/com/shop/util/Strings.java"
CACHE = "lib/src/main/java/com/shop/core/Cache.java"
STORE = "weird/place/Store.java"  # package com.shop.core, wherever its folder is
APP = "app/App.java"
PLATFORM = "vendor/java/util/Collections.java"  # declares java.util: still never resolved

FILES = {
    BASE: (
        "package com.shop.util;\n"                           # 0
        "\n"
        "public class Base {\n"                              # 2
        "    public static int helper() {\n"                 # 3
        "        return 1;\n"
        "    }\n"
        "\n"
        "    protected void log(String message) {\n"         # 7
        "    }\n"
        "}\n"
    ),
    STRINGS: (
        "package com.shop.util;\n"                           # 0
        "\n"
        "public class Strings extends Base {\n"              # 2: Strings.helper() reaches Base.helper
        "    public static String clean(String text) {\n"    # 3
        "        return text.trim();\n"                      # 4: a String's method
        "    }\n"
        "\n"
        "    public static String shout(String text) {\n"    # 7
        "        return clean(text).toUpperCase();\n"        # 8 -> clean
        "    }\n"
        "}\n"
    ),
    CACHE: (
        "package com.shop.core;\n"                           # 0
        "\n"
        "class Cache {\n"                                    # 2
        "    void put(String key) {\n"                       # 3
        "    }\n"
        "\n"
        "    static Cache create() {\n"                      # 6
        "        return new Cache();\n"                      # 7 -> the class
        "    }\n"
        "}\n"
    ),
    STORE: (
        "package com.shop.core;\n"                           # 0
        "\n"
        "import com.shop.util.Base;\n"                       # 2
        "import com.shop.util.Strings;\n"                    # 3
        "import java.util.ArrayList;\n"                      # 4
        "import java.util.List;\n"                           # 5
        "\n"
        "public class Store extends Base {\n"                # 7
        "    private final Cache cache = Cache.create();\n"  # 8 -> Cache.create: same package, no import
        "    private final List<String> items = new ArrayList<>();\n"  # 9: java.util
        "\n"
        "    public String get(String key) {\n"             # 11
        "        log(key);\n"                                # 12 -> Base.log, inherited
        "        String clean = Strings.clean(key);\n"       # 13 -> Strings.clean
        "        cache.put(clean);\n"                        # 14 -> Cache.put through the field
        "        this.cache.put(clean);\n"                   # 15 -> Cache.put
        "        items.add(clean);\n"                        # 16: a List's method
        "        return lookup(clean);\n"                    # 17 -> Store.lookup
        "    }\n"
        "\n"
        "    String lookup(String key) {\n"                  # 20
        "        return this.get(key);\n"                    # 21 -> Store.get
        "    }\n"
        "\n"
        "    class Entry {\n"                                # 24
        "        void touch(Store store) {\n"                # 25
        "            lookup(\"x\");\n"                       # 26 -> the outer class's lookup
        "            store.get(\"y\");\n"                    # 27 -> Store.get through the parameter
        "            super.toString();\n"                    # 28: Object's
        "            new Entry();\n"                         # 29 -> the nested class
        "        }\n"
        "    }\n"
        "}\n"
    ),
    APP: (
        "package com.shop.app;\n"                            # 0
        "\n"
        "import com.shop.core.*;\n"                          # 2
        "import com.shop.util.Strings;\n"                    # 3
        "import static com.shop.util.Strings.shout;\n"      # 4
        "import java.util.Collections;\n"                    # 5
        "import org.apache.commons.Lang;\n"                  # 6
        "\n"
        "public class App {\n"                               # 8
        "    private Store store = new Store();\n"           # 9 -> Store, through the on-demand import
        "\n"
        "    void run(String text) {\n"                      # 11
        "        shout(text);\n"                             # 12 -> Strings.shout, statically imported
        "        Strings.helper();\n"                        # 13 -> Base.helper, inherited by Strings
        "        Collections.sort(null);\n"                  # 14: java.util, though vendor/ declares it
        "        Lang.capitalize(text);\n"                   # 15: a package the repository lacks
        "        undefinedThing();\n"                        # 16: an unknown name
        "        store.get(text);\n"                         # 17 -> Store.get through the field
        "        com.shop.util.Strings.clean(text);\n"       # 18 -> Strings.clean, fully qualified
        "    }\n"
        "\n"
        "    void shadow(String text) {\n"                   # 21
        "        Store Strings = store;\n"                   # 22
        "        Strings.clean(text);\n"                     # 23: a Store value, not the class Strings
        "        String Store = text;\n"                     # 24
        "        Store.get(text);\n"                         # 25: a String value, not the class Store
        "        Function<String, String> shout = String::trim;\n"  # 26
        "        shout.apply(text);\n"                       # 27: the local, not the imported shout
        "        shout(text);\n"                             # 28 -> Strings.shout (methods are no values)
        "    }\n"
        "}\n"
    ),
    PLATFORM: (
        "package java.util;\n"
        "\n"
        "public class Collections {\n"
        "    public static void sort(Object items) {\n"
        "    }\n"
        "}\n"
    ),
}


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> RepoService:
    return open_repository(tmp_path_factory.mktemp("javashop"), FILES)


def test_java_resolves_calls_through_its_language_module():
    java = language_named("java")
    assert java.resolves_calls and java.import_prefixes == ("import ",) and java.extensions == (".java",)


def test_calls_resolve_through_single_on_demand_static_and_qualified_imports_never_to_the_platform(shop):
    assert [edge for edge in call_edges(shop, APP) if edge[0] < 20] == [
        (9, STORE, 7),  # new Store(): com.shop.core.*
        (12, STRINGS, 7),  # shout(): import static
        (13, BASE, 3),  # Strings.helper(): declared in Strings' superclass
        (17, STORE, 11),  # store.get(): the field's declared type
        (18, STRINGS, 3),  # com.shop.util.Strings.clean()
    ]  # 14 (java.util), 15 (org.apache) and 16 (unknown) resolve nowhere


def test_a_local_named_like_a_class_or_an_imported_method_is_a_value(shop):
    assert [edge for edge in call_edges(shop, APP) if edge[0] >= 20] == [(28, STRINGS, 7)]


def test_the_package_is_declared_so_classes_of_one_package_in_other_folders_see_each_other(shop):
    edges = call_edges(shop, STORE)
    assert (8, CACHE, 6) in edges and (14, CACHE, 3) in edges
    assert call_edges(shop, CACHE) == [(7, CACHE, 2)]  # new Cache() reaches the class


def test_methods_resolve_through_this_super_fields_parameters_and_enclosing_classes(shop):
    assert call_edges(shop, STORE) == [
        (8, CACHE, 6),
        (12, BASE, 7),  # log(): inherited from the superclass in another package
        (13, STRINGS, 3),
        (14, CACHE, 3),  # cache.put(): the field
        (15, CACHE, 3),  # this.cache.put()
        (17, STORE, 20),  # lookup()
        (21, STORE, 11),  # this.get()
        (26, STORE, 20),  # lookup() from the inner class reaches the outer class's method
        (27, STORE, 11),  # store.get(): the parameter's type
        (29, STORE, 24),  # new Entry(): the nested class
    ]  # 9 and 16 (java.util), 28 (super.toString(): Object's) resolve nowhere
    assert call_edges(shop, STRINGS) == [(8, STRINGS, 3)]


def test_names_in_scope_are_the_imports_of_repository_code(shop):
    lines = FILES[APP].split("\n")
    assert repository_imports(shop.view().symbols, APP, lines, ("import ",), 8, 12) == [(2, 3), (3, 4), (4, 5)]
    lines = FILES[STORE].split("\n")
    assert repository_imports(shop.view().symbols, STORE, lines, ("import ",), 7, 12) == [(2, 3), (3, 4)]


def test_an_edit_changes_the_edges_of_its_package_and_of_its_importers(tmp_path):
    lib, app, helper = "lib/Lib.java", "app/App.java", "app/Helper.java"
    files = {
        lib: "package p.lib;\n\npublic class Lib {\n    public static void a() {\n    }\n}\n",
        # No edge into Lib.java or Helper.java yet: only dependents() can tell that App.java must change.
        app: ("package p.app;\n\nimport p.lib.Lib;\n\nclass App {\n    void run() {\n        Lib.b();\n"
              "        Helper.c();\n    }\n}\n"),
        helper: "package p.app;\n\nclass Helper {\n}\n",
    }
    service = open_repository(tmp_path, files)
    assert call_edges(service, app) == []
    (tmp_path / lib).write_text(files[lib].replace("a()", "b()"))
    service.ensure_index()
    assert call_edges(service, app) == [(6, lib, 3)]  # an importer of the edited class
    service.set_buffer(helper, "package p.app;\n\nclass Helper {\n    static void c() {\n    }\n}\n")
    assert call_edges(service, app) == [(6, lib, 3), (7, helper, 3)]  # a file of the same package
    service.set_buffer(app, files[app].replace("Helper.c();", "Lib.b();"))
    assert call_edges(service, app) == [(6, lib, 3), (7, lib, 3)]  # the file itself
    service.drop_buffer(app)
    # The class moves to another package by its declaration alone (same path): the import misses.
    service.set_buffer(lib, files[lib].replace("a()", "b()").replace("p.lib", "p.moved"))
    assert call_edges(service, app) == [(7, helper, 3)]


def test_supertypes_nested_classes_and_method_references(tmp_path):
    family, user = "src/q/Family.java", "other/User.java"
    files = {
        family: (
            "package q;\n"                                # 0
            "\n"
            "interface Greeter {\n"                       # 2
            "    default void greet() {\n"                # 3
            "    }\n"
            "}\n"
            "\n"
            "class Parent implements Greeter {\n"         # 7
            "    void hello() {\n"                        # 8
            "    }\n"
            "\n"
            "    static class Builder {\n"                # 11
            "        static Parent build() {\n"           # 12
            "            return new Parent();\n"          # 13 -> Parent
            "        }\n"
            "    }\n"
            "}\n"
            "\n"
            "class Child extends Parent {\n"              # 18
            "    @Override\n"                              # 19: the method starts at its annotation
            "    void hello() {\n"
            "        super.hello();\n"                    # 21 -> Parent.hello, not this one
            "        greet();\n"                          # 22 -> the superclass's interface's default method
            "        Runnable r = this::hello;\n"         # 23 -> Child.hello
            "        Supplier<Parent> s = Parent::new;\n"  # 24 -> Parent
            "        Builder.build();\n"                  # 25 -> the nested class Child inherits
            "        Parent.Builder.build();\n"           # 26
            "    }\n"
            "}\n"
        ),
        user: "package r;\n\nimport q.Parent.Builder;\n\nclass User {\n    void use() {\n        Builder.build();\n"
              "    }\n}\n",
    }
    service = open_repository(tmp_path, files)
    assert call_edges(service, family) == [(13, family, 7), (21, family, 8), (22, family, 3), (23, family, 19),
                                           (24, family, 7), (25, family, 12), (26, family, 12)]
    assert call_edges(service, user) == [(6, family, 12)]  # a nested class imported by its qualified name
