"""RepoEval-protocol evaluation (docs/design.md section 6): build tasks from pinned package sources,
run completions over them, score and report."""
