"""Java: symbols (`syntax`) and call resolution (`calls`) over the packages files declare."""

from __future__ import annotations

from repomem.languages.java.calls import JavaCallResolver
from repomem.languages.java.syntax import LANGUAGE_NAME, JavaSymbols
from repomem.languages.language import brace_language

JAVA = brace_language(LANGUAGE_NAME, (".java",), symbols=JavaSymbols, call_resolver=JavaCallResolver,
                      import_prefixes=("import ",))
