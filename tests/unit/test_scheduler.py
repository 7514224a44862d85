"""The language server's request scheduler (lsp/scheduler.py) against a model the test controls:
each generation waits until the test releases it, so every interleaving editors cause (retries,
type-ahead, cancels, time-outs) is played out exactly. The real model runs in the e2e tiers."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable

import pytest
from lsprotocol import types

from repomem.lsp.cache import CursorState
from repomem.lsp.feedback import ShownCompletion
from repomem.lsp.items import completion_item, inline_item, typed_word
from repomem.lsp.scheduler import CompletionAsk, CompletionScheduler, Outcome, function_of, worth_speculating
from repomem.lsp.session import CompletionAnswer

TEXT = "def total(a, b):\n    return \n"
OFFSET = TEXT.index("return ") + len("return ")


class ControlledModel:
    """A stand-in for the model thread: records each generation, answers when released, stops
    like the real one (between tokens) when its stop event is set."""

    def __init__(self) -> None:
        self.started: list[CompletionAsk] = []
        self.stopped: list[CompletionAsk] = []
        self.release = asyncio.Event()
        self.ids = itertools.count(1)
        self.before_answer = lambda: None  # runs after the last token, before the answer returns
        self.deaf = False  # True: ignores `stop`, as llama.cpp does while it evaluates a prompt
        self.nothing = ""  # a finish reason: each generation then ends with nothing to offer
        self.writes = ""  # what the generation under way has written after its cursor so far
        self.answer = "a + b"  # what each generation answers

    async def __call__(self, ask: CompletionAsk, stop: threading.Event,
                       written: Callable[[str], None]) -> CompletionAnswer:
        self.started.append(ask)
        while not self.release.is_set():
            if self.writes:
                written(self.writes)  # as the engine tells it between tokens
            if stop.is_set() and not self.deaf:
                self.stopped.append(ask)
                return CompletionAnswer("", None, "cancelled")
            await asyncio.sleep(0.005)
        if self.nothing:
            return CompletionAnswer("", None, self.nothing)
        completion_id = f"c{next(self.ids)}"
        self.before_answer()
        shown = ShownCompletion(completion_id=completion_id, path=ask.state.path, line=ask.line,
                                character=ask.character, text=self.answer, strategy="fragrel", backend="test",
                                fragments=[], in_prompt=frozenset())
        return CompletionAnswer(self.answer, shown, "stop")


async def eventually(condition: Callable[[], bool], within_s: float = 5.0) -> bool:
    """Whether `condition` holds within `within_s` of event-loop time, polled every 5 ms: what
    should happen is waited for, not slept for (a loaded CI host runs the loop's timers late)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not condition():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


def ask(text: str = TEXT, offset: int = OFFSET, version: int = 1, uri: str = "file:///r/a.py") -> CompletionAsk:
    line = text[:offset].count("\n")
    return CompletionAsk(uri, version, CursorState.of("a.py", text, offset, 0), text, line,
                         offset - (text.rfind("\n", 0, offset) + 1), text.split("\n")[line])


def opened(answer_within_s: float = 5.0, warm_after_s: float = 0.0,
           rest: CompletionAsk | None = None) -> tuple[ControlledModel, CompletionScheduler]:
    """A controlled model and a scheduler with the test document open at version 1."""
    model = ControlledModel()
    plan = CompletionScheduler(model, debounce_s=0.01, answer_within_s=answer_within_s, cache_entries=8,
                               warm_after_s=warm_after_s)
    plan.document_changed("file:///r/a.py", 1, rest=rest)
    return model, plan


async def test_an_identical_request_joins_the_one_in_flight():
    (model, plan), first = opened(), ask()
    waiting = [asyncio.ensure_future(plan.complete(first)) for _ in range(3)]  # eglot's retries
    await asyncio.sleep(0.1)
    model.release.set()
    answers = await asyncio.gather(*waiting)
    assert len(model.started) == 1 and not model.stopped
    assert {(a.outcome, a.text, a.completion_id) for a in answers} == {(Outcome.ANSWERED, "a + b", "c1")}
    again = await plan.complete(ask())  # and afterwards from the cache, without the model
    assert again.completion_id == "c1" and len(model.started) == 1


@pytest.mark.parametrize("finish", ["stop", "deadline", "failed", "unavailable"])
async def test_nothing_to_offer_is_known_at_that_spot_but_a_cut_or_failed_generation_is_tried_again(finish):
    """An empty answer was not kept: a client asking again at the same spot (an incomplete list)
    ran the model each time (~300 ms on two cores; 78 times in a minute at one blank line of the
    editor walk). A generation that ran its course answers the same nothing again; one cut by the
    deadline, a failure, or one made while no model was at hand, not."""
    model, plan = opened()
    model.nothing = finish
    model.release.set()
    first = await plan.complete(ask())
    second = await plan.complete(ask())
    assert first.outcome is second.outcome is Outcome.ANSWERED and first.text == second.text == ""
    assert len(model.started) == (1 if finish == "stop" else 2)


async def test_a_request_past_the_budget_is_answered_pending_and_the_retry_gets_the_answer():
    model, plan = opened(answer_within_s=0.1)
    assert (await plan.complete(ask())).outcome is Outcome.PENDING
    assert not model.stopped  # kept: it runs on for the client's next ask
    retry = asyncio.ensure_future(plan.complete(ask()))
    await asyncio.sleep(0.02)
    model.release.set()
    answer = await retry
    assert answer.outcome is Outcome.ANSWERED and answer.text == "a + b" and len(model.started) == 1


async def test_an_inline_request_waits_past_the_budget_for_its_answer():
    """Inline clients never ask again at a position they got an empty answer at (VS Code shows no
    ghost text until the user types): such a request has no answer budget, while a
    textDocument/completion request joining the same generation is answered pending."""
    model, plan = opened(answer_within_s=0.05)
    inline = asyncio.ensure_future(plan.complete(ask(), answer_budget=False))
    assert (await plan.complete(ask())).outcome is Outcome.PENDING
    await asyncio.sleep(0.1)  # twice the budget
    assert not inline.done()
    model.release.set()
    answer = await inline
    assert (answer.outcome, answer.text) == (Outcome.ANSWERED, "a + b") and len(model.started) == 1


async def test_an_answer_for_a_document_that_moved_on_is_dropped_and_its_generation_stopped():
    model, plan = opened()
    pending = asyncio.ensure_future(plan.complete(ask()))
    await asyncio.sleep(0.05)
    plan.document_changed("file:///r/a.py", 2)  # the user typed on while it generated
    assert (await pending).outcome is Outcome.DROPPED
    assert await eventually(lambda: model.stopped == model.started)  # seen at its next token


async def test_an_answer_that_lands_after_a_change_is_still_dropped():
    """The generation finished, but the version moved on before the answer went out."""
    model, plan = opened()
    model.release.set()
    first = ask()
    # The didChange arrives between the model's last token and the reply.
    model.before_answer = lambda: plan.document_changed(first.uri, 2)
    assert (await plan.complete(first)).outcome is Outcome.DROPPED
    # The answer is remembered for that text all the same: an undo back to it costs nothing.
    model.before_answer = lambda: None
    plan.document_changed(first.uri, 3)
    assert (await plan.complete(ask(version=3))).text == "a + b"


async def test_a_newer_request_elsewhere_supersedes_and_a_burst_starts_its_first_and_last():
    model = ControlledModel()
    plan = CompletionScheduler(model, debounce_s=0.3, answer_within_s=5.0, cache_entries=8)
    plan.document_changed("file:///r/a.py", 1)
    other_text = TEXT + "x = \n"
    asks = [ask(other_text, len(other_text) - 1 - i) for i in (2, 1, 0)]
    burst = []
    for each in asks:  # keystrokes 2 ms apart, well within the debounce
        burst.append(asyncio.ensure_future(plan.complete(each)))
        await asyncio.sleep(0.002)
    await asyncio.sleep(0.1)
    model.release.set()
    answers = await asyncio.gather(*burst)
    assert [a.outcome for a in answers] == [Outcome.DROPPED, Outcome.DROPPED, Outcome.ANSWERED]
    # The first started at once (nothing asked before it) and was superseded; the debounce let
    # none of the rest of the burst but its last reach the model.
    assert [started.character for started in model.started] == [asks[0].character, asks[-1].character]
    assert model.stopped == model.started[:1]


async def test_a_request_after_a_quiet_spell_starts_at_once_and_one_in_a_burst_waits():
    model = ControlledModel()
    plan = CompletionScheduler(model, debounce_s=5.0, answer_within_s=10.0, cache_entries=8)
    plan.document_changed("file:///r/a.py", 1)
    first = asyncio.ensure_future(plan.complete(ask()))
    assert await eventually(lambda: len(model.started) == 1, within_s=2.5)  # not 5 s later
    second = asyncio.ensure_future(plan.complete(ask(TEXT, OFFSET - 1)))  # 0.05 s after the first
    await asyncio.sleep(0.1)
    assert len(model.started) == 1  # waits out the debounce
    second.cancel()
    model.release.set()
    assert (await first).outcome is Outcome.DROPPED  # superseded by the second


async def test_cancelling_the_last_waiter_stops_the_generation_but_not_a_kept_one():
    model, plan = opened()
    waiting = asyncio.ensure_future(plan.complete(ask()))
    await asyncio.sleep(0.05)
    waiting.cancel()  # $/cancelRequest
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await eventually(lambda: model.stopped == model.started)
    # One of two waiters cancelled: the other still gets its answer.
    model2, plan2 = opened()
    one, two = (asyncio.ensure_future(plan2.complete(ask())) for _ in range(2))
    await asyncio.sleep(0.05)
    one.cancel()
    await asyncio.sleep(0.02)
    model2.release.set()
    assert (await two).text == "a + b" and not model2.stopped


async def test_typing_the_first_characters_of_an_answer_returns_the_rest_without_the_model():
    model, plan = opened()
    model.release.set()
    await plan.complete(ask())
    typed = TEXT[:OFFSET] + "a +" + TEXT[OFFSET:]
    plan.document_changed("file:///r/a.py", 2)
    answer = await plan.complete(ask(typed, OFFSET + 3, version=2))
    assert answer.text == " b" and answer.completion_id == "c1" and len(model.started) == 1


def test_items_replace_the_word_being_typed():
    assert typed_word("    return com", 14) == "com"
    assert typed_word("    return int(amount_cents", 27) == "amount_cents"
    assert typed_word("    return ", 11) == "" and typed_word("x.déjà", 6) == "déjà"
    position = types.Position(line=8, character=14)
    item = completion_item("pute_tax(amount_cents, tax_class)", "com", position, 3, "c7")
    assert item.label == item.filter_text == item.insert_text == "compute_tax(amount_cents, tax_class)"
    assert item.text_edit.range.start == types.Position(line=8, character=11)
    assert item.text_edit.range.end == position and item.text_edit.new_text == item.insert_text
    assert item.data == {"id": "c7"} and item.command.arguments == ["c7"]
    body = completion_item("if x:\n        return 1", "", position, 0, "c8")
    assert body.label == "if x:" and body.insert_text == "if x:\n        return 1"
    inline = inline_item(" * rate)", "amount_cents", types.Position(line=2, character=27), 12, "c9")
    assert inline.insert_text == inline.filter_text == "amount_cents * rate)"
    assert inline.range.start.character == 15 and inline.range.end.character == 27
    # A word of astral characters is longer in UTF-16 units than in code points.
    wide = completion_item("x", "𝒳", types.Position(line=0, character=2), 2, None)
    assert wide.text_edit.range.start.character == 0


async def test_where_the_cursor_rests_the_completion_starts_and_a_request_there_joins_it():
    model, plan = opened(warm_after_s=0.05, rest=ask())  # an edit that left the cursor there
    await asyncio.sleep(0.02)
    assert not model.started  # not before the cursor has rested
    assert await eventually(lambda: len(model.started) == 1)
    request = asyncio.ensure_future(plan.complete(ask()))
    await asyncio.sleep(0.02)
    model.release.set()
    assert (await request).text == "a + b" and len(model.started) == 1
    # Moving on before the rest is over starts nothing; a request elsewhere supersedes a speculation.
    model2, plan2 = opened(warm_after_s=0.05, rest=ask())
    plan2.document_changed("file:///r/a.py", 2)
    await asyncio.sleep(0.1)
    assert not model2.started
    plan2.cursor_rests(ask(version=2))
    assert await eventually(lambda: len(model2.started) == 1)
    elsewhere = asyncio.ensure_future(plan2.complete(ask(offset=OFFSET - 1, version=2)))
    await asyncio.sleep(0.05)
    model2.release.set()
    assert (await elsewhere).outcome is Outcome.ANSWERED
    assert len(model2.started) == 2 and model2.stopped == model2.started[:1]


async def test_a_speculation_for_a_place_the_cursor_left_stops_and_one_starts_where_it_rests():
    """The editor reports the cursor resting elsewhere, no edit: the generation for the old place,
    which nobody waits on, held the model until it ended."""
    model, plan = opened(warm_after_s=0.01, rest=ask())
    assert await eventually(lambda: len(model.started) == 1)
    other = TEXT + "print(total(1, 2))\n"
    plan.cursor_rests(ask(offset=TEXT.index(":\n") + 1), reported=True)  # same text, the cursor moved up
    assert await eventually(lambda: model.stopped == model.started[:1] and len(model.started) == 2)
    assert model.started[1].state.key() == ask(offset=TEXT.index(":\n") + 1).state.key()
    # A request waiting on a generation keeps it, wherever the cursor rests meanwhile.
    model2, plan2 = opened(warm_after_s=0.01)
    waiting = asyncio.ensure_future(plan2.complete(ask()))
    await asyncio.sleep(0.05)
    plan2.cursor_rests(ask(text=other, offset=len(other) - 1), reported=True)
    await asyncio.sleep(0.05)
    model2.release.set()
    assert (await waiting).outcome is Outcome.ANSWERED and not model2.stopped


def test_speculation_only_where_people_complete():
    assert worth_speculating(ask())  # "    return |"
    assert worth_speculating(ask("def f():\n    \n", len("def f():\n    ")))  # an indented new line
    assert not worth_speculating(ask(TEXT, 0))  # the first column of a file just opened
    assert not worth_speculating(ask(TEXT, 4))  # the middle of a line
    assert not worth_speculating(ask("x = 1\n\n", len("x = 1\n")))  # an empty line's first column


async def test_a_halted_flight_releases_its_requests_at_once_even_while_the_model_cannot_stop():
    model, plan = opened(answer_within_s=5.0)
    model.deaf = True  # evaluating a long prompt: stops are seen only afterwards
    waiting = asyncio.ensure_future(plan.complete(ask()))
    await asyncio.sleep(0.05)
    plan.document_changed("file:///r/a.py", 2)  # the user typed over the pending request
    answer = await asyncio.wait_for(waiting, 0.5)  # not after the 5 s budget, as "pending"
    assert answer.outcome is Outcome.DROPPED
    model.release.set()


def typed_on(characters: str, version: int) -> CompletionAsk:
    """The test document with `characters` typed at the cursor after `return `."""
    return ask(TEXT[:OFFSET] + characters + TEXT[OFFSET:], OFFSET + len(characters), version=version)


async def test_typing_through_a_generation_keeps_it_and_a_request_there_takes_the_rest_of_its_answer():
    model, plan = opened()
    first = asyncio.ensure_future(plan.complete(ask()))
    await asyncio.sleep(0.03)
    plan.document_changed("file:///r/a.py", 2, rest=typed_on("a", 2))  # typed while it generates
    later = asyncio.ensure_future(plan.complete(typed_on("a", 2)))
    await asyncio.sleep(0.05)
    assert not model.stopped and not later.done()  # it waits for the generation typed through
    model.release.set()
    answer = await later
    assert (answer.outcome, answer.text, answer.completion_id) == (Outcome.ANSWERED, " + b", "c1")
    assert (await first).outcome is Outcome.DROPPED  # the first request's text is gone
    assert len(model.started) == 1 and not model.stopped


async def typed_through(plan: CompletionScheduler, characters: str, written: str = "",
                        model: ControlledModel | None = None) -> asyncio.Future:
    """A request at the test cursor, then `characters` typed there while it generates (the model
    having written `written` by then) and a request at the typed-on cursor: that request, running."""
    asyncio.ensure_future(plan.complete(ask()))
    await asyncio.sleep(0.03)
    if model is not None:
        model.writes = written
        await asyncio.sleep(0.02)
    plan.document_changed("file:///r/a.py", 2, rest=typed_on(characters, 2))
    return asyncio.ensure_future(plan.complete(typed_on(characters, 2)))


async def test_typing_through_that_parts_from_the_answer_starts_the_requests_own_generation():
    model, plan = opened()
    later = await typed_through(plan, "x")
    await asyncio.sleep(0.03)
    model.release.set()
    answer = await later
    assert (answer.outcome, answer.text, answer.completion_id) == (Outcome.ANSWERED, "a + b", "c2")
    assert [a.state.left[-1] for a in model.started] == [" ", "x"] and not model.stopped


async def test_typing_through_a_generation_that_wrote_something_else_starts_the_requests_own_at_once():
    # The model wrote "b" after the cursor, then the user typed "x": its answer cannot begin with
    # what was typed, so it stops there, not at its end, and the request at "x" starts its own.
    model, plan = opened()
    later = await typed_through(plan, "x", written="b", model=model)
    assert await eventually(lambda: len(model.started) == 2)  # before any release
    assert model.stopped == model.started[:1]
    model.writes = ""
    model.release.set()
    answer = await later
    assert (answer.outcome, answer.text) == (Outcome.ANSWERED, "a + b")


async def test_a_generation_typed_through_stops_when_it_writes_something_else_than_was_typed():
    # Typed first ("a", which the answer may begin with), written after ("x + 1"): the request
    # waiting on the generation is released at that token and starts its own.
    model, plan = opened()
    later = await typed_through(plan, "a")
    model.writes = "a"  # so far it agrees: the request keeps waiting on it
    await asyncio.sleep(0.05)
    assert len(model.started) == 1 and not model.stopped and not later.done()
    model.writes = "x + 1"
    assert await eventually(lambda: len(model.started) == 2)
    assert model.stopped == model.started[:1]
    model.writes = ""
    model.release.set()
    assert (await later).outcome is Outcome.ANSWERED


async def test_where_typing_went_past_a_speculation_the_next_one_starts_without_a_request():
    model, plan = opened(warm_after_s=10.0)  # no rest timer fires within the test
    plan.cursor_rests(ask(), reported=True)  # the editor said the cursor rests: speculation
    assert await eventually(lambda: len(model.started) == 1)
    plan.document_changed("file:///r/a.py", 2, rest=typed_on("a", 2))  # nothing written yet: kept
    model.writes = "x"
    assert await eventually(lambda: len(model.started) == 2)  # stopped, and the next one started
    assert model.stopped == model.started[:1] and model.started[1].state == typed_on("a", 2).state
    model.writes = ""
    model.release.set()
    answer = await plan.complete(typed_on("a", 2))  # joins it or finds its answer
    assert (answer.outcome, answer.text) == (Outcome.ANSWERED, "a + b") and len(model.started) == 2


async def test_a_line_break_or_type_through_off_stops_the_generation():
    for typed, type_through in (("\n    ", True), ("a", False)):
        model, plan = opened()
        plan.configure(0.01, 5.0, 8, type_through=type_through)
        first = asyncio.ensure_future(plan.complete(ask()))
        await asyncio.sleep(0.03)
        plan.document_changed("file:///r/a.py", 2, rest=typed_on(typed, 2))
        assert (await first).outcome is Outcome.DROPPED
        assert await eventually(lambda model=model: model.stopped == model.started), typed


async def test_typing_that_parts_from_the_shown_completion_starts_the_next_one_at_once():
    model, plan = opened(warm_after_s=10.0)  # speculation at rest would wait 10 s
    model.release.set()
    assert (await plan.complete(ask())).text == "a + b"  # shown
    plan.document_changed("file:///r/a.py", 2, rest=typed_on("a", 2))  # what was shown: nothing to start
    await asyncio.sleep(0.03)
    assert len(model.started) == 1
    plan.document_changed("file:///r/a.py", 3, rest=typed_on("ax", 3))  # parted from it
    assert await eventually(lambda: len(model.started) == 2)
    assert model.started[1].state.left.endswith("return ax")
    assert (await plan.complete(typed_on("ax", 3))).completion_id == "c2"
    # Typing the whole of a shown completion and on is taking it: no start at once.
    model2, plan2 = opened(warm_after_s=10.0)
    model2.release.set()
    assert (await plan2.complete(ask())).text == "a + b"
    plan2.document_changed("file:///r/a.py", 2, rest=typed_on("a + b)", 2))
    await asyncio.sleep(0.03)
    assert len(model2.started) == 1


async def test_after_an_accept_the_next_line_starts_and_enter_joins_it():
    from repomem.lsp.next_line import enter_at_end

    done = "def total(a, b):\n    return a + b\n"  # the accepted completion ended line 1
    model, plan = opened(warm_after_s=10.0)
    plan.document_changed("file:///r/a.py", 2)
    text, line, indent = enter_at_end(done, 1, "a + b")
    offset = len(done.split("\n")[0]) + 1 + len("    return a + b") + 1 + len(indent)
    below = ask(text, offset, version=2)
    plan.speculate_below(below)
    assert await eventually(lambda: len(model.started) == 1)
    assert model.started[0].state.key() == below.state.key()
    plan.document_changed("file:///r/a.py", 3, rest=ask(text, offset, version=3))  # Enter: that very text
    request = asyncio.ensure_future(plan.complete(ask(text, offset, version=3)))
    await asyncio.sleep(0.03)
    model.release.set()
    assert (await request).completion_id == "c1" and len(model.started) == 1 and not model.stopped
    # Enter indented otherwise (a dedent): the speculation stops.
    model2, plan2 = opened(warm_after_s=10.0)
    plan2.document_changed("file:///r/a.py", 2)
    plan2.speculate_below(ask(text, offset, version=2))
    await asyncio.sleep(0.03)
    dedented = done + "\n"
    plan2.document_changed("file:///r/a.py", 3, rest=ask(dedented, len(done), version=3))
    assert await eventually(lambda: model2.stopped == model2.started)


def test_enter_at_the_end_of_a_line_indents_as_editors_do():
    from repomem.lsp.next_line import enter_at_end

    assert enter_at_end("def f():\n    return x\n", 1, "x") == ("def f():\n    return x\n    \n", 2, "    ")
    assert enter_at_end("def f():\n    if a:\n", 1, "if a:")[2] == "        "  # a block opens
    assert enter_at_end("def f():\n\tif a:\n", 1, "if a:")[2] == "\t\t"
    assert enter_at_end("def f():\n    foo(x)\n", 1, "x") is None  # the accepted text did not end the line
    assert enter_at_end("x = 1\n", 5, "1") is None and enter_at_end("x = 1 \n", 0, "1") is None


async def test_typing_all_of_the_shown_completion_is_taking_it_not_parting_from_it():
    model, plan = opened(warm_after_s=10.0)
    model.release.set()
    assert (await plan.complete(ask())).text == "a + b"
    plan.document_changed("file:///r/a.py", 2, rest=typed_on("a + b", 2))  # accepted: typed in whole
    await asyncio.sleep(0.03)
    assert len(model.started) == 1  # nothing started at once (a rest may start one later)


async def test_an_edit_in_a_function_the_model_has_not_read_starts_its_completion_at_once():
    model = ControlledModel()
    plan = CompletionScheduler(model, debounce_s=0.01, answer_within_s=5.0, cache_entries=8, warm_after_s=10.0,
                               warm_new_function=True)  # speculation at rest would wait 10 s
    text = "def total(a, b):\n    return \n\n\ndef scale(a):\n    return \n"
    in_total, in_scale = text.index("return ") + 7, text.rindex("return ") + 7
    plan.document_changed("file:///r/a.py", 1, rest=ask(text, in_total))
    assert await eventually(lambda: len(model.started) == 1)  # `total` was never read: started at the edit
    model.release.set()
    await asyncio.sleep(0.03)
    plan.document_changed("file:///r/a.py", 2, rest=ask(text.replace("return \n", "return a\n", 1), in_total + 1, 2))
    await asyncio.sleep(0.03)
    assert len(model.started) == 1  # typing on in `total`: it waits for the cursor to rest, as before
    plan.document_changed("file:///r/a.py", 3, rest=ask(text.replace("return \n", "return a\n", 1), in_scale + 1, 3))
    assert await eventually(lambda: len(model.started) == 2)
    assert model.started[1].state.left.endswith("def scale(a):\n    return ")
    # Off (the scheduler's own default), an edit in a new function waits like any other.
    model2, plan2 = opened(warm_after_s=10.0, rest=ask(text, in_scale))
    await asyncio.sleep(0.03)
    assert not model2.started


def test_a_function_is_named_by_its_definition_line_wherever_it_moves():
    text = "import os\n\n\nclass Shop:\n    def total(self, a):\n        return \n"
    moved = "import os\nimport re\n\n\nclass Shop:\n    def total(self, a):\n        return \n"
    assert function_of(ask(text, text.index("return ") + 7)) == ("a.py", "def total(self, a):")
    assert function_of(ask(moved, moved.index("return ") + 7)) == function_of(ask(text, text.index("return ") + 7))
    assert function_of(ask(text, text.index("os") + 2)) == ("a.py", "")  # module level
    # A brace language's, from the top-level statement around the cursor only.
    script = "const a = 1;\n\nfunction outer(x) {\n  return \n}\n\nclass Shop {\n  total(a) {\n    return \n  }\n}\n"
    at = script.index("return ") + 7

    def in_script(offset: int) -> tuple[str, str]:
        line = script[:offset].count("\n")
        state = CursorState.of("a.js", script, offset, 0)
        return function_of(CompletionAsk("file:///r/a.js", 1, state, script, line,
                                         offset - (script.rfind("\n", 0, offset) + 1), script.split("\n")[line]))

    assert in_script(at) == ("a.js", "function outer(x) {")
    assert in_script(script.rindex("return ") + 7) == ("a.js", "total(a) {")
    assert in_script(5) == ("a.js", "")


def below_answer(version: int, indent: str = "    ") -> CompletionAsk:
    """The test document with the model's answer "a + b" taken and Enter pressed after it."""
    taken = TEXT[:OFFSET] + "a + b\n" + indent + TEXT[OFFSET:]
    return ask(taken, OFFSET + len("a + b\n" + indent), version=version)


async def shown_with_line_ahead() -> tuple[ControlledModel, CompletionScheduler]:
    """"a + b" shown at the end of its line, the line below's generation started and held."""
    model, plan = opened(warm_after_s=10.0)
    plan.line_ahead = True
    model.release.set()
    assert (await plan.complete(ask())).text == "a + b"
    model.release.clear()  # before the line below's generation runs: the test releases it
    assert await eventually(lambda: len(model.started) == 2)
    assert model.started[1].below and model.started[1].state.key() == below_answer(1).state.key()
    return model, plan


async def test_a_shown_answer_starts_the_line_below_and_typing_it_out_then_enter_joins_it():
    model, plan = await shown_with_line_ahead()
    for version, typed in enumerate(("a", "a +", "a + b"), start=2):
        plan.document_changed("file:///r/a.py", version, rest=typed_on(typed, version))
        answer = await plan.complete(typed_on(typed, version))
        # The rest of the shown answer, then nothing once it is typed out (the model ended the line).
        assert (answer.outcome, answer.text, answer.completion_id) == (Outcome.ANSWERED, "a + b"[len(typed):], "c1")
    assert len(model.started) == 2 and not model.stopped  # the line below ran on throughout
    plan.document_changed("file:///r/a.py", 5, rest=below_answer(5))  # Enter, indented as guessed
    request = asyncio.ensure_future(plan.complete(below_answer(5)))
    await asyncio.sleep(0.03)
    model.release.set()
    assert (await request).completion_id == "c2" and len(model.started) == 2 and not model.stopped


async def test_the_line_below_stops_when_the_user_types_something_else_or_enter_indents_otherwise():
    model, plan = await shown_with_line_ahead()
    plan.document_changed("file:///r/a.py", 2, rest=typed_on("b", 2))  # parts: the next one starts there
    assert await eventually(lambda: model.stopped[:1] == model.started[1:2])
    model, plan = await shown_with_line_ahead()
    plan.document_changed("file:///r/a.py", 2, rest=below_answer(2, indent=""))
    assert await eventually(lambda: model.stopped[:1] == model.started[1:2])


async def test_the_line_below_answers_only_there_and_the_shown_answer_stays_typeable():
    model, plan = await shown_with_line_ahead()
    model.release.set()
    assert await eventually(lambda: plan.cache.get(below_answer(1).state) is not None)
    plan.document_changed("file:///r/a.py", 2, rest=typed_on("a +", 2))
    assert (await plan.complete(typed_on("a +", 2))).text == " b"  # still the line's own answer
    assert len(model.started) == 2


@pytest.mark.parametrize("where", ["off", "not at the end of its line", "two lines"])
async def test_no_line_below_starts_where_taking_the_answer_leaves_no_line_to_complete(where):
    model, plan = opened(warm_after_s=10.0)
    plan.line_ahead = where != "off"
    text = TEXT.replace("return \n", "return  # total\n") if where == "not at the end of its line" else TEXT
    if where == "two lines":
        model.answer = "a + b\n    c"  # a block's answer
    model.release.set()
    answer = await plan.complete(ask(text))
    assert answer.outcome is Outcome.ANSWERED and answer.text == model.answer
    await asyncio.sleep(0.05)
    assert len(model.started) == 1
