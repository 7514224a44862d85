"""When completion requests reach the model, and which answers reach the editor: the one place
the language server schedules (caches, debounce, joining, superseding, cancelling, the answer
budget, stale answers). Free of pygls: the server hands in plain values and a coroutine that runs
the model; the handlers only translate.

Editors are clients we do not control (docs/design.md §8): they time out (eglot after 10 s),
re-send a request they gave up on, keep typing while a request is pending, and cancel requests.

- **Caches**: a finished completion is remembered by the document's text on both sides of the
  cursor (`CompletionCache`); typing the first characters of the completion last shown in a
  document returns the rest (`ForwardTypingCache`). Neither calls the model.
- **One generation per document** (a *flight*). A request whose document state (text before and
  after the cursor, settings) equals the flight's *joins* it: a client's retry never restarts the
  model. Any other request for the document, or any change to the document, *supersedes* the
  flight: it stops between tokens, because its prompt no longer matches what the user sees.
- **Debounce, on bursts only**: a request that comes `debounce_s` or longer after the document's
  last one starts at once (the ask after the user stopped typing, the first of a burst); one that
  follows another within `debounce_s` waits that long first, so the rest of a burst of keystrokes
  starts one more generation, the last. Waiting before every request added `debounce_s` to every
  answer the model gave (docs/editors.md#interactive-latency).
- **Cancelling**: `$/cancelRequest` of the last request waiting on a flight stops it, unless the
  flight was *kept* (below).
- **Answer budget**: a request still waiting after `answer_within_s` is answered *pending* (the
  server sends an empty incomplete list, which clients ask again for) and the flight is kept: it
  runs on, and its answer lands in the cache for the client's next ask, which then costs nothing.
  Better than the client's own time-out, which answers the user with an error. Only for
  `textDocument/completion`: inline completion clients (VS Code, Neovim 0.12) ask without a
  time-out, cancel when the user types, and never ask again for a position they got an empty
  answer at, so an inline request waits for its answer (`answer_budget=False`).
- **Stale answers are dropped**: an answer for a document whose version moved on while the request
  waited is not sent (`dropped`); applying it would overwrite what the user typed since.
- **Speculation at rest**: where the user's cursor rests (the end of an edit, or a cursor position
  the editor reports) for `warm_after_s` with nothing asked, a kept flight starts there. A request
  that then comes at that spot joins it or finds its answer cached; one elsewhere supersedes it,
  and still finds the model's prompt cache warm with the blocks and the file's head.
- **Typing through a flight** (`type_through`): characters typed at a flight's cursor (same line,
  nothing after the cursor changed) do not stop it: its answer may still begin with them, and
  then the forward-typing cache serves the rest, as Copilot joins the requests a user types
  through. A request at the typed-on cursor waits for that flight, then takes the cached rest or,
  if the answer parted from what was typed, starts its own. The model's text is compared with the
  typing as it is written: once the two part (the model wrote `x` where the user typed `a`), the
  flight stops at that token and the completion at the typed-on cursor starts, rather than after
  the rest of an answer nobody can take. And where typing parts from the
  completion last shown (the user did not take it), the completion at the new cursor starts at
  once instead of after `warm_after_s`: a warm answer decodes for a few hundred milliseconds,
  about as long as the next few keystrokes take (docs/editors.md#interactive-latency).
- **A function the model has not read** (`warm_new_function`): an edit whose cursor is in a function
  no flight was launched in (`function_of`: the definition line the prompt's blocks are kept by)
  starts the completion there at once; its cold prompt is most of the wait, and the next requests in
  the function find it cached.
- **Speculation after an accept** (`speculate_below`): a completion accepted at a line's end
  starts the next line's completion where Enter would leave the cursor (lsp/next_line.py). If
  Enter then makes exactly that text, the flight runs on and the request there joins it; if the
  editor indented otherwise, the model's prompt cache is warm all the same. Only a prompt that
  continues the accepted answer's (repomem.completion.line_below) answers it (CompletionAsk.below).
- **The line below a shown answer** (`line_ahead`, off by default): the same, started when a
  one-line answer is shown at a line's end, before it is taken; typing the answer out keeps it
  running (`on_the_way`), anything else stops it. Only a continued prompt answers it
  (CompletionAsk.below), never one read afresh.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum

from repomem.completion.request import enclosing_definition_of
from repomem.languages.registry import language_named, language_of
from repomem.lsp.cache import CachedCompletion, CompletionCache, CursorState, ForwardTypingCache, typing_parts
from repomem.lsp.next_line import enter_at_end
from repomem.lsp.session import CompletionAnswer
from repomem.positions import text_offset

# Functions remembered as ones the model read a prompt for (the warm prefix keeps as many:
# repomem.completion.warm_prefix.STABLE_MEMO_SIZE).
READ_FUNCTIONS = 64


@dataclass(frozen=True)
class CompletionAsk:
    """One editor request: which document, at which version, and its state at the cursor."""

    uri: str
    # The document's version when the request arrived: a number per text received, the server's
    # own (RepomemServer.text_versions), not the client's, which may repeat (None: unversioned).
    version: int | None
    state: CursorState
    text: str  # the document, newlines normalized
    line: int  # 0-based
    character: int  # 0-based, in code points
    line_text: str  # the cursor's line (split once, where the request is read)
    # The model's cache keeps only its common beginning with the prompt, no run moved (the line
    # below an accepted completion: moved cells would not have seen it; GenerationRequest.prefix_only).
    prefix_only: bool = False
    # The line below a shown answer, as if the user took it and pressed Enter: answered only where
    # the engine continues that answer's prompt (repomem.completion.line_below), never by reading one.
    below: bool = False

    @classmethod
    def at(cls, uri: str, version: int | None, path: str, text: str, line: int, character: int,
           answers_generation: int, prefix_only: bool = False, below: bool = False) -> CompletionAsk:
        """The request at (`line`, `character`), 0-based, in code points, of `text` as the document
        `uri` at `version` (its text now, or the one an edit would give it)."""
        lines = text.split("\n")
        state = CursorState.of(path, text, text_offset(lines, line, character), answers_generation)
        return cls(uri, version, state, text, line, character, lines[line], prefix_only, below)


class Outcome(Enum):
    ANSWERED = "answered"  # `text` is the completion ("" when the model had nothing to add)
    PENDING = "pending"  # still generating past the answer budget: ask again
    DROPPED = "dropped"  # superseded, cancelled, failed, or the document moved on


@dataclass(frozen=True)
class Scheduled:
    outcome: Outcome
    text: str = ""
    completion_id: str | None = None


# run_model(ask, stop, written): the model's answer for the ask; it polls `stop` between tokens
# and tells `written` (on its own thread) the text it has written after the cursor so far.
RunModel = Callable[[CompletionAsk, threading.Event, Callable[[str], None]], Awaitable[CompletionAnswer]]


def function_of(ask: CompletionAsk) -> tuple[str, str]:
    """(path, the first line of the definition the cursor is in, "" at module level): what the
    editor's prompt keeps its retrieved blocks by (order "stable", repomem.completion.warm_prefix),
    so a flight in a function leaves the model's cache warm for the next one there. The line's
    text, not its number, names it: lines above move as the user types."""
    grammar = language_of(ask.state.path)
    lines = ask.text.split("\n")
    if grammar is None or not 0 <= ask.line < len(lines):
        return ask.state.path, ""
    language = language_named(grammar)
    if language.indented_blocks:  # def / class lines, read upwards from the cursor
        number = enclosing_definition_of(language, lines, ask.line)
        return ask.state.path, lines[number].strip() if number >= 0 else ""
    # A brace language's definitions come from a parse, and this runs at every keystroke (a whole
    # 10,000-line file: ~30 ms of the event loop): only the top-level statement around the cursor
    # is read, from the line without indentation at or above it to the next one below (its
    # closing brace).
    top = next((at for at in range(ask.line, -1, -1) if lines[at][:1].strip()), 0)
    bottom = next((at for at in range(ask.line + 1, len(lines)) if lines[at][:1].strip()), len(lines) - 1)
    number = enclosing_definition_of(language, lines[top:bottom + 1], ask.line - top)
    return ask.state.path, lines[top + number].strip() if number >= 0 else ""


def worth_speculating(ask: CompletionAsk) -> bool:
    """Whether a cursor resting at `ask` is where people ask for completions: at the end of a
    line's text (only blanks after it) with code or indentation before it. Elsewhere (the first
    column of a file just opened, the middle of a line) a speculation would only hold the model:
    llama.cpp cannot stop a prompt's evaluation halfway, so a wasted one delays the next request
    by up to a whole cold prompt."""
    return ask.line_text[ask.character:].strip() == "" and ask.character > 0


# Finish reasons of a generation that ran its course: its answer holds for the same context. Not a
# deadline's, a cancel's, a failure's or one made while no model was at hand ("unavailable").
SETTLED_FINISHES = frozenset({"stop", "length"})


@dataclass(eq=False)
class Flight:
    """The generation in flight for one document."""

    ask: CompletionAsk
    stop: threading.Event = field(default_factory=threading.Event)  # polled by the model thread
    task: asyncio.Future[CompletionAnswer | None] | None = None
    # Done when the flight is halted: its waiters are answered at once, not when the model thread
    # gets round to noticing (a prompt's evaluation cannot be stopped halfway).
    halted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    waiting: int = 0  # requests awaiting this flight now
    kept: bool = False  # answered pending once: runs on for the client's next ask
    # What the user has typed at its cursor since it started (typing through it), and what the
    # model has written there so far (set on the model thread; a str is replaced whole).
    typed: str = ""
    written: str = ""
    # A flight on the line below a shown answer: where that answer was shown. Typing the answer
    # out there leads to the flight's document, so it runs on meanwhile.
    shown_at: CursorState | None = None

    def joins(self, ask: CompletionAsk) -> bool:
        return not self.stop.is_set() and self.ask.state.key() == ask.state.key()

    def parted(self) -> bool:
        """Whether its answer can no longer begin with what was typed through it."""
        return typing_parts(self.typed, self.written)

    def halt(self) -> None:
        """Stop the model between tokens and release the requests waiting on this flight."""
        self.stop.set()
        if not self.halted.done():
            self.halted.set_result(None)


def on_the_way(start: CursorState, now: CursorState, target: CursorState) -> bool:
    """Whether `now` is `start` with part of what leads to `target` typed at its cursor, on its line
    (the text after the cursor and the settings the same throughout): an answer typed out towards
    the line below it. The line break itself leads there only as `target` has it (the editor's
    indentation): `_still_wanted` checks that."""
    return (now.path == target.path and now.right_digest == start.right_digest == target.right_digest
            and now.answers_generation == target.answers_generation and now.left.startswith(start.left)
            and target.left.startswith(now.left) and "\n" not in now.left[len(start.left):])


def typed_through(before: CursorState, after: CursorState) -> bool:
    """Whether `after` is `before` with characters typed at its cursor: the same line (no line
    break typed), the same text after the cursor, the same settings."""
    return (after.path == before.path and after.right_digest == before.right_digest
            and after.answers_generation == before.answers_generation
            and len(after.left) > len(before.left) and after.left.startswith(before.left)
            and "\n" not in after.left[len(before.left):])


class CompletionScheduler:
    def __init__(self, run_model: RunModel, debounce_s: float, answer_within_s: float, cache_entries: int,
                 log: Callable[[str, str], None] = lambda level, message: None, warm_after_s: float = 0.0,
                 type_through: bool = True, warm_new_function: bool = False, line_ahead: bool = False):
        self._run_model = run_model
        self._log = log
        self.debounce_s = debounce_s
        self.answer_within_s = answer_within_s
        self.warm_after_s = warm_after_s  # 0 = no speculation
        self.type_through = type_through
        self.warm_new_function = warm_new_function
        self.line_ahead = line_ahead
        self._read_functions: OrderedDict[tuple[str, str], None] = OrderedDict()  # function_of a launched flight
        self._rests: dict[str, asyncio.TimerHandle] = {}  # uri -> the speculation waiting to start
        self.cache = CompletionCache(cache_entries)
        self.forward = ForwardTypingCache()
        self._flights: dict[str, Flight] = {}  # uri -> its one flight
        self._asked_at: dict[str, float] = {}  # uri -> the event loop's time of its last request
        self._versions: dict[str, int | None] = {}  # uri -> the newest version the client sent
        self._cursors: dict[str, CompletionAsk] = {}  # uri -> where its last edit left the cursor, if it told

    # -- settings and documents ----------------------------------------------------------------

    def configure(self, debounce_s: float, answer_within_s: float, cache_entries: int,
                  warm_after_s: float = 0.0, type_through: bool = True, warm_new_function: bool = False,
                  line_ahead: bool = False) -> None:
        """New settings: answers cached under the old ones are gone (their keys would not match
        anyway: CursorState carries the settings generation)."""
        self.debounce_s, self.answer_within_s, self.warm_after_s = debounce_s, answer_within_s, warm_after_s
        self.type_through, self.warm_new_function, self.line_ahead = type_through, warm_new_function, line_ahead
        self.cache = CompletionCache(cache_entries)
        self.forward.clear()

    def stop_all(self) -> None:
        """Every flight is stale (the settings changed)."""
        for flight in self._flights.values():
            flight.halt()
        for uri in list(self._rests):
            self._cancel_rest(uri)

    def document_changed(self, uri: str, version: int | None, rest: CompletionAsk | None = None) -> None:
        """A didOpen / didChange: the flight for the document's old text is stale. `rest`: where
        the cursor stands after the edit, when the edit tells."""
        self._versions[uri] = version
        self._cancel_rest(uri)
        if rest is None:
            self._cursors.pop(uri, None)
        else:
            self._cursors[uri] = rest
        flight = self._flights.get(uri)
        if flight is not None and flight.ask.version != version:
            if self._still_wanted(flight, rest):
                flight.kept = True  # the text it completes (or one typed on from it): it runs on
            else:
                flight.halt()
        if rest is None:
            return
        if self.warm_after_s > 0 and self.type_through and self.forward.parted(rest.state):
            self._speculate(rest)  # the shown completion was not taken: the next one starts now
        elif self.warm_after_s > 0 and self.warm_new_function and function_of(rest) not in self._read_functions:
            self._speculate(rest)  # the model has not read this function: its cold prompt starts now
        else:
            self.cursor_rests(rest)

    def _still_wanted(self, flight: Flight, ask: CompletionAsk | None) -> bool:
        """Whether the document the edit left (cursor at `ask`) is the one `flight` completes (a
        speculation of this very edit) or one typed on from it."""
        if ask is None or flight.stop.is_set():
            return False
        if flight.ask.state.key() == ask.state.key() or (
                flight.shown_at is not None and on_the_way(flight.shown_at, ask.state, flight.ask.state)):
            flight.typed = ""
            return True
        if not self._typed_through(flight, ask):
            return False
        flight.typed = ask.state.left[len(flight.ask.state.left):]
        return not flight.parted()  # the model wrote something else there already

    def speculate_below(self, ask: CompletionAsk) -> None:
        """A completion was accepted at the end of a line: `ask` is where Enter would leave the
        cursor (a text the document does not have yet); its completion starts now."""
        if self.warm_after_s > 0:
            self._cancel_rest(ask.uri)
            flight = self._flights.get(ask.uri)
            if flight is not None and flight.joins(ask):
                return  # started there when the answer was shown (line_ahead)
            if flight is not None and flight.waiting == 0:
                flight.halt()  # a speculation where the accepted text was typed in: this one is likelier
            self._speculate(ask)

    def _typed_through(self, flight: Flight, ask: CompletionAsk | None) -> bool:
        """Whether `ask` only typed on at the cursor of `flight`, which still runs."""
        return (self.type_through and ask is not None and not flight.stop.is_set()
                and typed_through(flight.ask.state, ask.state))

    def cursor_rests(self, ask: CompletionAsk, reported: bool = False) -> None:
        """The cursor stands at `ask`: speculate there if nothing else happens for warm_after_s,
        or at once when the editor `reported` a cursor that already rested (its own idle wait).
        A generation nobody waits on for a place the cursor left (a speculation, or an answer the
        user was told is pending) stops: the model is wanted here."""
        self._cancel_rest(ask.uri)
        flight = self._flights.get(ask.uri)
        if flight is not None and flight.waiting == 0 and not self._still_wanted(flight, ask):
            flight.halt()
        if self.warm_after_s > 0:
            delay = 0.0 if reported else self.warm_after_s
            self._rests[ask.uri] = asyncio.get_running_loop().call_later(delay, self._speculate, ask)

    def _typed_past(self, flight: Flight) -> None:
        """The model wrote something else where the user typed through `flight`: the requests
        waiting on it are released, and the completion where the typing left the cursor starts
        now, not when the next request or keystroke comes."""
        flight.halt()
        rest = self._cursors.get(flight.ask.uri)
        if self.warm_after_s > 0 and rest is not None and typed_through(flight.ask.state, rest.state):
            self._speculate(rest)

    def _cancel_rest(self, uri: str) -> None:
        timer = self._rests.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def _speculate(self, ask: CompletionAsk) -> None:
        self._rests.pop(ask.uri, None)
        flight = self._flights.get(ask.uri)
        if (self._versions.get(ask.uri, ask.version) != ask.version or self.cached(ask.state) is not None
                or (flight is not None and not flight.stop.is_set()) or not worth_speculating(ask)):
            return  # the document moved on, the answer is known, a request is being served, or
            # nobody completes here
        self._launch(ask, debounce=False).kept = True

    def _start_below(self, ask: CompletionAsk, text: str) -> None:
        """`text` was shown at `ask`, at the end of its line: the completion of the line below, as
        if the user took it and pressed Enter (lsp/next_line.py), starts now, unless the model is
        busy or the document moved on. Only a continued prompt answers it (CompletionAsk.below)."""
        flight = self._flights.get(ask.uri)
        if (self.warm_after_s <= 0 or not self.line_ahead or not text or "\n" in text
                or ask.line_text[ask.character:].strip() or self._versions.get(ask.uri, ask.version) != ask.version
                or (flight is not None and not flight.stop.is_set())):
            return
        after = ask.text[len(ask.state.left):]
        below = enter_at_end(ask.state.left + text + after, ask.line, text)
        if below is None:
            return
        taken, line, indent = below
        below_ask = CompletionAsk.at(ask.uri, ask.version, ask.state.path, taken, line, len(indent),
                                     ask.state.answers_generation, prefix_only=True, below=True)
        if self.cache.get(below_ask.state) is not None:
            return
        flight = self._launch(below_ask, debounce=False)
        flight.kept, flight.shown_at = True, ask.state

    def document_closed(self, uri: str, path: str | None) -> None:
        self._versions.pop(uri, None)
        self._cursors.pop(uri, None)
        self._asked_at.pop(uri, None)
        self._cancel_rest(uri)
        flight = self._flights.pop(uri, None)
        if flight is not None:
            flight.halt()
        if path is not None:
            self.forward.forget(path)

    def cached(self, state: CursorState) -> CachedCompletion | None:
        """A known answer at this state: the LRU's, else the rest of a completion typed into."""
        found = self.cache.get(state)
        if found is not None:
            self.forward.remember(state, found)  # shown again: typing on from here reuses it
            return found
        return self.forward.continuation(state)

    # -- requests ------------------------------------------------------------------------------

    async def complete(self, ask: CompletionAsk, answer_budget: bool = True) -> Scheduled:
        scheduled = await self._complete(ask, answer_budget)
        if scheduled.outcome is Outcome.ANSWERED:
            self._start_below(ask, scheduled.text)
        return scheduled

    async def _complete(self, ask: CompletionAsk, answer_budget: bool) -> Scheduled:
        self._cancel_rest(ask.uri)
        now = asyncio.get_running_loop().time()
        in_burst = now - self._asked_at.get(ask.uri, -math.inf) < self.debounce_s
        self._asked_at[ask.uri] = now
        known = self.cached(ask.state)
        if known is not None:
            return Scheduled(Outcome.ANSWERED, known.text, known.completion_id)
        flight = self._flights.get(ask.uri)
        budget_s = self.answer_within_s if answer_budget else None
        if flight is not None and not flight.joins(ask) and self._typed_through(flight, ask) and not flight.parted():
            # The user typed on at the cursor of the generation under way: its answer comes first
            # (unless the model writes something else there: the flight then halts, below).
            flight.kept = True
            started = asyncio.get_running_loop().time()
            through = await self._await(flight, flight.ask, budget_s, versioned=False)
            if through.outcome is Outcome.PENDING:
                return through
            if self._versions.get(ask.uri, ask.version) != ask.version:
                return Scheduled(Outcome.DROPPED)
            known = self.cached(ask.state)
            if known is not None:
                return Scheduled(Outcome.ANSWERED, known.text, known.completion_id)
            if budget_s is not None:
                budget_s = max(0.0, budget_s - (asyncio.get_running_loop().time() - started))
            current = self._flights.get(ask.uri)
            if current is not None and current is not flight and not current.joins(ask):
                return Scheduled(Outcome.DROPPED)  # a newer request's generation: it answers instead
            flight, in_burst = current, False  # the user has waited already
        if flight is None or not flight.joins(ask):
            if flight is not None:
                flight.halt()  # superseded by this request
            flight = self._launch(ask, debounce=in_burst)
        return await self._await(flight, ask, budget_s)

    def _launch(self, ask: CompletionAsk, debounce: bool = True) -> Flight:
        read = function_of(ask)
        self._read_functions[read] = None
        self._read_functions.move_to_end(read)
        while len(self._read_functions) > READ_FUNCTIONS:
            self._read_functions.popitem(last=False)
        flight = Flight(ask)
        self._flights[ask.uri] = flight
        flight.task = asyncio.ensure_future(self._fly(flight, self.debounce_s if debounce else 0.0))
        return flight

    async def _fly(self, flight: Flight, debounce_s: float) -> CompletionAnswer | None:
        """Debounce, run the model, remember the answer; None when stopped or failed."""
        try:
            await asyncio.sleep(debounce_s)
            if flight.stop.is_set():
                return None
            loop = asyncio.get_running_loop()

            def written(text: str) -> None:  # on the model thread, between tokens
                flight.written = text
                if flight.parted() and not flight.stop.is_set():
                    flight.stop.set()  # the model stops at this token
                    try:
                        loop.call_soon_threadsafe(self._typed_past, flight)
                    except RuntimeError:  # the loop closed: the server is exiting
                        pass

            try:
                answer = await self._run_model(flight.ask, flight.stop, written)
            except Exception as error:  # noqa: BLE001 - whatever happens, the server answers
                self._log("error", f"completion failed: {error.__class__.__name__}: {error}")
                return None
            if answer.finish_reason == "cancelled":
                return None
            if answer.shown is not None:
                # A one-line answer that ran its course at a line's end ends the line: typed out in
                # full, nothing more comes there (the model stopped at the newline).
                ends_line = (answer.finish_reason == "stop" and "\n" not in answer.text
                             and not flight.ask.line_text[flight.ask.character:].strip())
                completion = CachedCompletion(answer.text, answer.shown.completion_id, ends_line)
                self.cache.put(flight.ask.state, completion)
                if not flight.ask.below:  # shown only when asked there (then `cached` remembers it)
                    self.forward.remember(flight.ask.state, completion)
            elif not answer.text and answer.finish_reason in SETTLED_FINISHES:
                # Nothing to offer here, and greedy decoding gives the same nothing again: a client
                # asking again at this spot (an incomplete list, ~300 ms of the model each on two
                # cores, 78 times a minute in the editor walk) or a speculation gets it at once.
                self.cache.put(flight.ask.state, CachedCompletion("", ""))
            return answer
        finally:
            if self._flights.get(flight.ask.uri) is flight:
                del self._flights[flight.ask.uri]

    async def _await(self, flight: Flight, ask: CompletionAsk, budget_s: float | None,
                     versioned: bool = True) -> Scheduled:
        """`ask`'s answer from `flight` (DROPPED when the document moved on, unless not `versioned`:
        a request typing through the flight checks its own version)."""
        assert flight.task is not None
        flight.waiting += 1
        try:
            done, _ = await asyncio.wait((flight.task, flight.halted), timeout=budget_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # $/cancelRequest
            if flight.waiting == 1 and not flight.kept:
                flight.halt()
            raise
        finally:
            flight.waiting -= 1
        if flight.task not in done:
            if flight.halted.done():
                return Scheduled(Outcome.DROPPED)  # superseded or the document changed
            flight.kept = True
            return Scheduled(Outcome.PENDING)
        answer = flight.task.result()
        if answer is None or (versioned and self._versions.get(ask.uri, ask.version) != ask.version):
            return Scheduled(Outcome.DROPPED)
        completion_id = answer.shown.completion_id if answer.shown is not None else None
        return Scheduled(Outcome.ANSWERED, answer.text, completion_id)
