"""Token healing inside a word: the cursor's partly typed name taken off the prompt, the answer's
first tokens held to it (repomem.backends.forced_start), and what the engine and the generation
store make of it. The real model runs this path in tests/e2e/test_model_process.py."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from repomem.backends.base import Generation, GenerationRequest
from repomem.backends.forced_start import (
    FORCED_START_HEADER,
    StartConstraint,
    TokenVocabulary,
    start_header,
    start_of_header,
    with_forced_starts,
)
from repomem.backends.memo import DeferredRequests, GenerationStore, MemoBackend
from repomem.completion.engine import CompletionEngine
from repomem.completion.request import CompletionRequest, read_cursor
from repomem.config import with_overrides
from repomem.evaluation.tasks import EvalTask, typed_prefix
from repomem.positions import Cursor, locate
from repomem.strategies import strategy_named
from tests.unit.test_scope_imports import Words, long_report

PIECES = [b"", b"s", b"su", b"sup", b" sup", b" s", b"super", b" super", b"per", b"x", b"p", b" su", b"self", b"u",
          b"uper"]


def test_the_tokens_consistent_with_a_start_are_its_prefixes_and_those_that_begin_with_all_of_it():
    vocabulary = TokenVocabulary(PIECES)
    ids = vocabulary.consistent_with(b" sup")
    assert [PIECES[i] for i in ids] == [b" sup", b" s", b" super", b" su"]
    assert [PIECES[i] for i in vocabulary.consistent_with(b"su")] == [b"s", b"su", b"sup", b"super"]
    assert vocabulary.consistent_with(b"") == [] and vocabulary.consistent_with(b"zz") == []
    # Against a plain scan of every token, on every start made of the pieces' letters.
    for start in (b"s", b"sup", b" supe", b"self", b"se", b"pe", b" s", b"x", b"xs", b"up"):
        plain = [i for i, piece in enumerate(PIECES) if piece and (piece.startswith(start) or
                                                                   (start.startswith(piece) and piece != start))]
        assert vocabulary.consistent_with(start) == plain, start


def test_the_constraint_holds_each_step_until_the_start_is_written_then_lets_go():
    vocabulary = TokenVocabulary(PIECES)
    prompt = np.array([9, 9, 9])
    scores = np.arange(len(PIECES), dtype=np.float32)  # "uper", then "u", then "self" are the model's picks
    held = StartConstraint(vocabulary, b" sup", prompt_tokens=3)
    first = held(prompt, scores)
    assert sorted(PIECES[i] for i in np.flatnonzero(np.isfinite(first))) == [b" s", b" su", b" sup", b" super"]
    assert int(np.argmax(first)) == PIECES.index(b" su") and first[PIECES.index(b" s")] == scores[PIECES.index(b" s")]
    after_partial = held(np.array([9, 9, 9, PIECES.index(b" s")]), scores)  # "up" left to write
    assert sorted(PIECES[i] for i in np.flatnonzero(np.isfinite(after_partial))) == [b"u", b"uper"]
    done = held(np.array([9, 9, 9, PIECES.index(b" super")]), scores)
    assert done is scores  # written: nothing held any more
    # A vocabulary with no way on (never a real one: every byte is a token) holds nothing back.
    stuck = StartConstraint(TokenVocabulary([b"a", b"b"]), b"z", prompt_tokens=0)
    assert stuck(np.array([], dtype=np.int64), np.zeros(2, dtype=np.float32)).tolist() == [0.0, 0.0]


def test_the_constraint_takes_the_prompt_from_its_first_call_when_not_told():
    vocabulary = TokenVocabulary(PIECES)
    scores = np.arange(len(PIECES), dtype=np.float32)
    told, untold = StartConstraint(vocabulary, b" sup", 3), StartConstraint(vocabulary, b" sup", None)
    for input_ids in (np.array([9, 9, 9]), np.array([9, 9, 9, PIECES.index(b" s")]),
                      np.array([9, 9, 9, PIECES.index(b" s"), PIECES.index(b"u")])):
        assert told(input_ids, scores).tolist() == untold(input_ids, scores).tolist()


@pytest.mark.parametrize("start", [" se", "größ", "名前", " a%20b", "x\tyz"])
def test_a_start_travels_to_the_child_in_a_header_of_ascii_and_back(start):
    (name, value), = start_header(start).items()
    assert name == FORCED_START_HEADER and value.isascii() and value.isprintable() and " " not in value
    assert start_of_header(value) == start
    assert start_header("") == {} and start_of_header(None) == start_of_header("") == ""


class Recorded:
    """What with_forced_starts needs of llama_cpp.Llama: create_completion with its settings."""

    def __init__(self, vocabulary: TokenVocabulary):
        self.vocabulary, self.settings = vocabulary, []

    def start_vocabulary(self) -> TokenVocabulary:
        return self.vocabulary

    def create_completion(self, prompt, **settings):
        self.settings.append(settings)
        return "answer"


def test_the_childs_model_holds_its_answer_to_the_start_it_is_told_and_only_then():
    model = with_forced_starts(Recorded)(TokenVocabulary(PIECES))
    assert model.create_completion("p", max_tokens=4) == "answer" and "logits_processor" not in model.settings[0]
    recorder = object()
    model.forced_start = " sup"
    model.create_completion("p", logits_processor=[recorder])
    held, after = model.settings[1]["logits_processor"]
    assert isinstance(held, StartConstraint) and after is recorder  # held first: the recorder reads its logits
    scores = np.arange(len(PIECES), dtype=np.float32)
    assert sorted(PIECES[i] for i in np.flatnonzero(np.isfinite(held(np.array([9, 9]), scores)))) == \
        [b" s", b" su", b" sup", b" super"]


def _context(line: str, heal_words: bool = True, after: str = ""):
    text = f"def f(self):\n{line}{after}\n"
    cursor = Cursor(root=None, path="m.py", line=1, column=len(line), text=text)  # type: ignore[arg-type]
    request = CompletionRequest(cursor=cursor, strategy=strategy_named("infile"), alpha=0.0, order="score",
                                use_suffix=False, max_new_tokens=8)
    return read_cursor(request, 20, supports_fim=False, heal_words=heal_words)


@pytest.mark.parametrize(("line", "healed", "left"), [
    ("        value = se", " se", "        value ="),
    ("        self.pro", "pro", "        self."),
    ("    ret", " ret", "   "),
    ("        x = f(a, b_", " b_", "        x = f(a,"),
    ("        return ", " ", "        return"),  # spaces alone: healed as before, never forced
    ("        x = 12", "", "        x = 12"),  # a number is left in the prompt
    ("        x = (", "", "        x = ("),
    ("        wert = grö", " grö", "        wert ="),  # names in any script
    ("        n = ユーザ", " ユーザ", "        n ="),
    ("        x = नमस्ते", " नमस्ते", "        x ="),  # its vowel signs continue the word (\\w stopped before)
    ("        x = \u0661\u0662", "", "        x = \u0661\u0662"),  # digits of another script: a number
])
def test_a_word_being_typed_leaves_the_prompt_with_the_space_before_it(line, healed, left):
    context = _context(line)
    assert context.healed == healed and context.left_lines[-1] == left
    assert context.forced_start == (healed if healed.strip() else "")
    assert context.shape.line_prefix == line.rstrip(" ") if healed == " " else context.shape.line_prefix == line


@pytest.mark.parametrize("indent", [" ", "    ", "        "])
def test_a_line_of_indentation_alone_leaves_its_last_space_to_the_model(indent):
    """Qwen's vocabulary writes `    return` as `   ` and ` return`: after all four spaces the
    model wrote ` return`, a column too far right. The prompt keeps all but the last space, which the
    model writes with the word; the completion starts at the cursor, on the line as typed."""
    context = _context(indent)
    assert context.left_lines[-1] == indent[:-1] and context.healed == " " and context.forced_start == ""
    assert context.shape.line_prefix == indent
    tabbed = _context("\t")  # a tab is a token of its own: nothing to heal
    assert tabbed.left_lines[-1] == "\t" and tabbed.healed == ""


def test_a_backend_that_cannot_hold_a_start_keeps_the_word_in_the_prompt():
    context = _context("        value = se", heal_words=False)
    assert context.healed == "" and context.left_lines[-1] == "        value = se" and context.forced_start == ""


class Healing(Words):
    """Holds its answers' start as asked: answers `forced_start` + the scripted rest, and keeps
    every request (the engine's part is what is tested)."""

    constrains_start = True

    def __init__(self, rest: str):
        super().__init__()
        self.rest, self.requests = rest, []

    def generate(self, request):
        self.requests.append(request)
        return Generation(request.forced_start + self.rest, self.count(request.prompt), 3, 0, "stop", 0.01, -0.1)


def _word_typed_halfway(tmp_path):
    """(service, cursor, config): `comp` typed after `return ` in a long report.py, a small prompt."""
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text + "comp", n_lines, None)
    config = with_overrides(service.config, completion={"max_prompt_tokens": 300, "fill_in_middle": False},
                            prompt={"file_only_round": False})
    return service, cursor, config


def test_the_engine_asks_for_the_typed_word_and_completes_after_the_cursor(tmp_path):
    service, cursor, config = _word_typed_halfway(tmp_path)
    backend = Healing("ute_tax(amount_cents, tax_class)\n")
    result = CompletionEngine(service, backend, config).complete(cursor, "fragrel", order="score")
    request = backend.requests[0]
    assert request.forced_start == " comp" and request.prompt.endswith("    return")
    assert result.text == "ute_tax(amount_cents, tax_class)"
    # Switched off, the word stays in the prompt and nothing is forced.
    off = with_overrides(config, completion={"word_healing": False})
    backend = Healing("ute_tax(amount_cents, tax_class)\n")
    result = CompletionEngine(service, backend, off).complete(cursor, "fragrel", order="score")
    assert backend.requests[0].forced_start == "" and backend.requests[0].prompt.endswith("    return comp")
    # A backend without the capability (an HTTP server) is never asked to hold a start.
    plain = Words()
    assert not getattr(plain, "constrains_start", False)


class Streaming(Healing):
    """Asks `enough` between its pieces, as a streaming backend does between tokens."""

    def generate(self, request):
        self.requests.append(request)
        text = request.forced_start + self.rest
        for end in range(1, len(text) + 1):
            if request.enough is not None and request.enough(text[:end]):
                text = text[:end]
                break
        return Generation(text, self.count(request.prompt), 3, 0, "stop", 0.01, -0.1)


def test_the_engine_tells_what_the_model_wrote_after_the_cursor_token_by_token(tmp_path):
    # The language server compares it with what the user typed since (lsp/scheduler.py): the
    # typed word the model writes back first is not part of it.
    service, cursor, config = _word_typed_halfway(tmp_path)
    told: list[str] = []
    result = CompletionEngine(service, Streaming("ute_tax(amount_cents, tax_class)\n"), config).complete(
        cursor, "fragrel", order="score", written=told.append)
    assert result.text == "ute_tax(amount_cents, tax_class)"
    answer = "ute_tax(amount_cents, tax_class)"
    assert told[0] == "" and all(answer.startswith(text) for text in told[:-1])  # the word first, then on
    assert told[-1].startswith(answer) and sorted(told, key=len) == told


def test_the_store_keys_a_forced_start_and_a_deferred_request_carries_it(tmp_path):
    plain = GenerationRequest("p", 4, (), 1.0)
    forced = GenerationRequest("p", 4, (), 1.0, forced_start=" se")
    assert GenerationStore.key("t", "m", plain) != GenerationStore.key("t", "m", forced)
    # Keys of requests without a start are those every earlier store was written with.
    earlier = hashlib.sha256(json.dumps(["t", "m", "p", 4, []]).encode()).hexdigest()
    assert GenerationStore.key("t", "m", plain) == earlier
    backend = Healing("x")
    memo = MemoBackend(backend)
    assert memo.constrains_start
    memo.forget("t")
    assert memo.generate(plain).text == "x" and memo.generate(forced).text == " sex" and len(backend.requests) == 2
    # A deferred request carries its start to the machine that answers it.
    deferred = DeferredRequests.open(tmp_path / "requests.jsonl")
    later = MemoBackend(backend, GenerationStore.open(tmp_path / "store.jsonl"), deferred)
    assert later.constrains_start
    later.forget("t")
    assert later.generate(forced).kind == "deferred" and later.generate(plain).kind == "deferred"
    deferred.close()
    entries = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [entry.get("forced_start") for entry in entries] == [" se", None]
    assert entries[0]["key"] == GenerationStore.key("t", backend.name, forced)
    assert not MemoBackend(Words()).constrains_start


def _task(task_id: str, ground_truth: str) -> EvalTask:
    return EvalTask(task_id, "line", "r", "m.py", "", ground_truth, 0, 1)


def test_the_typed_text_stops_halfway_through_a_name_of_four_letters_or_more_the_same_in_every_run():
    task = _task("r/line/7", "        validated_value = self._call_and_store(getter)\n        x = 1")
    typed = typed_prefix(task)
    assert typed == typed_prefix(task) and task.ground_truth.startswith(typed)
    # The middle of one of the line's names: validated_value, self, _call_and_store, getter.
    middles = {16, 28, 39, 50}
    assert len(typed) in middles, typed
    # The task id chooses among them: over a set's ids every one is chosen.
    assert {len(typed_prefix(_task(f"r/line/{number}", task.ground_truth))) for number in range(60)} == middles
    assert typed_prefix(_task("r/line/1", "    )")) == "" and typed_prefix(_task("r/line/1", "x = 1")) == ""
    assert typed_prefix(_task("r/line/1", "    ab.cd(efg)")) == ""  # no name of four letters
