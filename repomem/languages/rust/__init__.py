"""Rust: symbols (`syntax`) and call resolution (`calls`) over crates' module trees (`layout`)."""

from __future__ import annotations

from repomem.languages.language import brace_language
from repomem.languages.rust.calls import RustCallResolver
from repomem.languages.rust.syntax import LANGUAGE_NAME, RustSymbols

RUST = brace_language(LANGUAGE_NAME, (".rs",), symbols=RustSymbols, call_resolver=RustCallResolver,
                      import_prefixes=("use ", "pub use ", "pub(crate) use ", "pub(super) use "))
