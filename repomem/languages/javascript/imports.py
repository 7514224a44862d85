"""Import and export bindings of ES modules, CommonJS and TypeScript, as ImportBinding rows.

An import binds `local` to `name` of the module `module` (the specifier as written): "" for the
module itself (`import * as ns`, `const ns = require(...)`, `import ns = require(...)`),
DEFAULT for its default export.

An export row has a `local` starting with EXPORT_MARK: `>b` exports the name `b` as `name` of
`module`, "" for the module being the file itself (`export {a as b}`, `export default a`,
`module.exports = {b: a}`); `>*` re-exports every name of `module` (`export * from`). These rows
bind nothing in the file, so names in scope never match them.
"""

from __future__ import annotations

from repomem.languages.parsed import ImportBinding
from repomem.languages.treesitter import Node, text_of

DEFAULT = "default"
EXPORT_MARK = ">"
ALL_NAMES = "*"


def is_export(binding: ImportBinding) -> bool:
    return binding.local.startswith(EXPORT_MARK)


def export_row(exported: str, module: str, name: str) -> ImportBinding:
    return ImportBinding(EXPORT_MARK + exported, module, name)


def string_value(node: Node | None) -> str:
    """The text of a string literal without its quotes."""
    text = text_of(node)
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`" else ""


def _specifier_names(specifier: Node) -> tuple[str, str]:
    """(name, alias or name) of an import / export specifier (`a as b`; names may be strings)."""
    name_node, alias_node = specifier.child_by_field_name("name"), specifier.child_by_field_name("alias")
    name = string_value(name_node) if name_node is not None and name_node.type == "string" else text_of(name_node)
    if alias_node is None:
        return name, name
    alias = string_value(alias_node) if alias_node.type == "string" else text_of(alias_node)
    return name, alias


def import_bindings(statement: Node) -> list[ImportBinding]:
    """`import x, {a as b} from 'm'`, `import * as ns from 'm'`, `import x = require('m')`."""
    module = string_value(statement.child_by_field_name("source"))
    bindings: list[ImportBinding] = []
    for clause in statement.named_children:
        if clause.type == "import_require_clause":
            name = next((c for c in clause.named_children if c.type == "identifier"), None)
            required = string_value(clause.child_by_field_name("source"))
            if name is not None and required:
                bindings.append(ImportBinding(text_of(name), required, ""))
        if clause.type != "import_clause" or not module:
            continue
        for part in clause.named_children:
            if part.type == "identifier":
                bindings.append(ImportBinding(text_of(part), module, DEFAULT))
            elif part.type == "namespace_import":
                name = next((c for c in part.named_children if c.type == "identifier"), None)
                if name is not None:
                    bindings.append(ImportBinding(text_of(name), module, ""))
            elif part.type == "named_imports":
                for specifier in part.named_children:
                    if specifier.type == "import_specifier":
                        name, alias = _specifier_names(specifier)
                        bindings.append(ImportBinding(alias, module, name))
    return [binding for binding in bindings if binding.local]


def is_default_export(statement: Node) -> bool:
    return any(child.type == "default" for child in statement.children)


def export_bindings(statement: Node) -> list[ImportBinding]:
    """Export rows of an `export` statement other than `export <declaration>` (whose names are the
    file's own definitions): lists, re-exports, `export default name`, TypeScript's `export = name`."""
    source = statement.child_by_field_name("source")
    module = string_value(source) if source is not None else ""
    rows: list[ImportBinding] = []
    listed = any(c.type in ("export_clause", "namespace_export") for c in statement.named_children)
    if source is not None and not listed:
        rows.append(export_row(ALL_NAMES, module, ""))  # export * from 'm'
    for child in statement.named_children:
        if child.type == "export_clause":
            for specifier in child.named_children:
                if specifier.type == "export_specifier":
                    name, alias = _specifier_names(specifier)
                    rows.append(export_row(alias, module, name))
        elif child.type == "namespace_export":  # export * as ns from 'm'
            name = next((c for c in child.named_children if c.type in ("identifier", "string")), None)
            if name is not None:
                rows.append(export_row(string_value(name) if name.type == "string" else text_of(name), module, ""))
    if source is None:
        declaration = statement.child_by_field_name("declaration")
        value = statement.child_by_field_name("value")
        if declaration is not None and is_default_export(statement):
            named = text_of(declaration.child_by_field_name("name"))
            if named:
                rows.append(export_row(DEFAULT, "", named))  # export default function f() {}
        elif value is None and not is_default_export(statement):
            # TypeScript's `export = name` holds its expression without a field.
            value = next((c for c in statement.named_children if c.type == "identifier"), None)
        if value is not None and value.type == "identifier":
            rows.append(export_row(DEFAULT, "", text_of(value)))
    return rows


def require_specifier(value: Node | None) -> tuple[str, str] | None:
    """(specifier, member) of `require('m')` ("" member) or `require('m').member`, else None."""
    member = ""
    if value is not None and value.type == "member_expression":
        member = text_of(value.child_by_field_name("property"))
        value = value.child_by_field_name("object")
    if value is None or value.type != "call_expression" or text_of(value.child_by_field_name("function")) != "require":
        return None
    arguments = value.child_by_field_name("arguments")
    first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
    specifier = string_value(first) if first is not None and first.type == "string" else ""
    return (specifier, member) if specifier else None


def require_bindings(declarator: Node) -> list[ImportBinding]:
    """`const x = require('m')`, `const {a, b: c} = require('m')`, `const y = require('m').y`."""
    required = require_specifier(declarator.child_by_field_name("value"))
    if required is None:
        return []
    module, member = required
    target = declarator.child_by_field_name("name")
    if target is None:
        return []
    if target.type == "identifier":
        return [ImportBinding(text_of(target), module, member)]
    if target.type != "object_pattern" or member:
        return []
    bindings = []
    for part in target.named_children:
        if part.type == "shorthand_property_identifier_pattern":
            bindings.append(ImportBinding(text_of(part), module, text_of(part)))
        elif part.type == "pair_pattern":
            key, value = part.child_by_field_name("key"), part.child_by_field_name("value")
            if value is not None and value.type == "identifier":
                bindings.append(ImportBinding(text_of(value), module, text_of(key)))
    return bindings


def commonjs_export_name(left: Node | None) -> str | None:
    """DEFAULT for `module.exports = ...`, `x` for `exports.x = ...` / `module.exports.x = ...`."""
    target = text_of(left).replace(" ", "")
    if target == "module.exports":
        return DEFAULT
    for prefix in ("module.exports.", "exports."):
        rest = target[len(prefix):] if target.startswith(prefix) else ""
        if rest and "." not in rest and "[" not in rest:
            return rest
    return None
