"""The model the end-to-end tests run: the 0.5B, the editor's default, which they pull once. The
command line's and the evaluator's default is the 1.5B (twice the time, 1.1 GB more to fetch), so
a test that runs `complete` or `eval run` with the embedded model names the small one: through
the user config tests/e2e/conftest.py points every test at, or through SMALL_MODEL_SETTINGS in a
user config of its own, or `--model` (EVAL_SMALL_MODEL: `eval run` reads no settings files); one
that builds a Config in the test's own process starts from SMALL_CONFIG."""

from __future__ import annotations

from pathlib import Path

from repomem.backends.models import SMALL_MODEL
from repomem.config import Config, with_overrides

SMALL_MODEL_SETTINGS = f'[model]\nembedded_model = "{SMALL_MODEL.name}"\n'
EVAL_SMALL_MODEL = ("--model", SMALL_MODEL.name)
SMALL_CONFIG = with_overrides(Config(), model={"embedded_model": SMALL_MODEL.name})


def rectangle_answers(*paths: Path) -> list[str]:
    """Each GGUF file's greedy one-line answer to a prompt every embedded model completes alike
    (`width * height`): a copy of the model is checked to answer as the shipped file does."""
    from repomem.backends.base import GenerationRequest
    from repomem.backends.llama import LlamaBackend
    from repomem.failures import Failure

    prompt = "def area_of_rectangle(width, height):\n    return"
    answers = []
    for path in paths:
        backend = LlamaBackend.open(path, context_tokens=512, threads=2)
        assert not isinstance(backend, Failure), backend
        try:
            result = backend.generate(GenerationRequest(prompt=prompt, max_tokens=8, stop=("\n",), deadline_s=60.0))
        finally:
            backend.close()
        assert not isinstance(result, Failure), result
        answers.append(result.text)
    return answers
