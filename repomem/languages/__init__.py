"""The language seam: which grammar parses a file (`registry`), what a language contributes to the
code graph and to completion (`language.Language`), one module per language with rules of its own
(`python/`), and the walk that turns a parse into graph nodes (`syntax`)."""
