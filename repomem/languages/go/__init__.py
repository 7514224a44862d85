"""Go: symbols (`syntax`) and call resolution (`calls`) over packages that are directories."""

from __future__ import annotations

from repomem.languages.go.calls import GoCallResolver
from repomem.languages.go.syntax import LANGUAGE_NAME, GoSymbols
from repomem.languages.language import brace_language

GO = brace_language(LANGUAGE_NAME, (".go",), symbols=GoSymbols, call_resolver=GoCallResolver,
                    import_prefixes=("import ",))
