"""The embedded model's evaluated prompts kept for later processes (model.prompt_cache_mb,
repomem.backends.prompt_states), with the real GGUF: a new model loads the stored state, evaluates
only the rest and answers bit for bit as the same model holding that beginning in memory does;
a damaged state is never loaded; the CLI's second completion in a file evaluates only what
changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from repomem.backends.base import GenerationRequest, common_prefix
from repomem.backends.llama import LlamaBackend
from repomem.backends.prompt_states import SUFFIX
from repomem.failures import Failure
from tests.cli_process import run
from tests.repos import copy_example, with_short_prompts
from tests.small_model import SMALL_MODEL_SETTINGS

HEADER = "# the below code fragments can be found in the repository\n"
PRICING = "".join(f"def price_{n}(amount):\n    return amount * {n + 2} // {n + 1}\n\n" for n in range(8))
FILE = "from shop.pricing import price_3\n\n\ndef total(items):\n    return sum(price_3(item) for item in"
OTHER_FILE = "from shop.pricing import price_5\n\n\ndef cheapest(items):\n    return min(price_5(item) for item in"
FIRST, SECOND = HEADER + PRICING + FILE, HEADER + PRICING + OTHER_FILE


def _request(prompt: str) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=12, stop=("\n",), deadline_s=120)


def _open(model_path: Path, states: Path) -> LlamaBackend:
    backend = LlamaBackend.open(model_path, context_tokens=2048, threads=2, prompt_cache=(states, 64 << 20))
    assert not isinstance(backend, Failure), backend
    return backend


def test_a_new_model_starts_from_the_stored_state_and_answers_as_one_that_held_it(model_path, llama, tmp_path):
    first = _open(model_path, tmp_path)
    written = first.generate(_request(FIRST))
    assert not isinstance(written, Failure) and written.cached_tokens == 0
    first.close()
    assert len(list(tmp_path.glob(f"*/*{SUFFIX}"))) == 1
    second = _open(model_path, tmp_path)  # nothing in its memory: what it skips, it loaded
    loaded = second.generate(_request(SECOND))
    llama.generate(_request(FIRST))  # the plain model, FIRST evaluated in its own memory
    held = llama.generate(_request(SECOND))
    assert not isinstance(loaded, Failure) and not isinstance(held, Failure)
    shared = common_prefix(second._tokens(FIRST), second._tokens(SECOND))
    assert shared > 100 and loaded.cached_tokens == held.cached_tokens == shared
    # Bit for bit: the same text and the same log-probability of every token picked. (A cold
    # evaluation of the whole of SECOND may differ in the last bits: llama.cpp's CPU kernels take
    # a batch's rows in groups, so where a batch ends changes the rounding; docs/measurements.md.)
    assert loaded.text == held.text and loaded.text.strip()
    assert loaded.mean_logprob == held.mean_logprob
    second.close()


def test_a_damaged_state_is_never_loaded_and_the_prompt_is_evaluated_cold(model_path, tmp_path):
    first = _open(model_path, tmp_path)
    cold = first.generate(_request(FIRST))
    assert not isinstance(cold, Failure)
    first.close()
    (path,) = tmp_path.glob(f"*/*{SUFFIX}")
    data = bytearray(path.read_bytes())
    data[-1000] ^= 0x10  # one bit of a key or a value: llama.cpp itself would read it without a word
    path.write_bytes(bytes(data))
    second = _open(model_path, tmp_path)
    answer = second.generate(_request(FIRST))
    assert not isinstance(answer, Failure) and answer.cached_tokens == 0
    assert answer.text == cold.text and answer.mean_logprob == cold.mean_logprob
    (rewritten,) = tmp_path.glob(f"*/*{SUFFIX}")  # the damaged file gone, the cold evaluation's kept
    assert rewritten.read_bytes() != bytes(data)
    second.close()


def test_the_second_complete_in_a_file_evaluates_only_what_changed(model_path, tmp_path):
    repo = with_short_prompts(copy_example(tmp_path / "shop"))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(model_path.parent)  # the model pulled once; the states this test's own
    env = {k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"} | {"REPOMEM_CACHE": str(cache)}

    def complete(line: int) -> dict:
        result = run("complete", f"shop/report.py:{line}", "--json", cwd=repo, env=env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    cold = complete(9)
    assert cold["tokens"]["cached"] == 0
    assert list((cache / "prompt-states").glob(f"*/*{SUFFIX}"))
    again = complete(9)  # a new process, a new model: the prompt from the state, its last token again
    assert again["completion"] == cold["completion"] == "compute_tax(amount_cents, tax_class)"
    assert again["tokens"]["cached"] == again["tokens"]["prompt"] - 1
    # An edit below the cursor is not in the prompt; one above changes its end only. A blank line:
    # words there would change the retrieval query, and with it the blocks at the prompt's start.
    report = repo / "shop" / "report.py"
    lines = report.read_text().splitlines(keepends=True)
    report.write_text("".join(lines[:8] + ["\n"] + lines[8:]))
    edited = complete(10)
    assert edited["completion"] == cold["completion"]
    assert edited["tokens"]["blocks"] <= edited["tokens"]["cached"] < edited["tokens"]["prompt"] - 1
    settings = tmp_path / "config.toml"  # the user's: a repository may not set it
    settings.write_text(SMALL_MODEL_SETTINGS + "prompt_cache_mb = 0\n")
    off = run("complete", "shop/report.py:10", "--json", cwd=repo, env=env | {"REPOMEM_CONFIG": str(settings)})
    assert off.returncode == 0, off.stderr
    assert json.loads(off.stdout)["tokens"]["cached"] == 0
