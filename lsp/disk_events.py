"""The watch of the repository's folders read as soon as something changes, not at the next request.

The session reads the watch before each retrieval (lsp/session.py), but a completion the scheduler
holds in its cache is answered without one (lsp/scheduler.py): after a `git checkout` that renamed
the function an answer called, asking again at the same place gave the old answer, and the first
request that did reach the model thread first indexed the checkout's files. A thread of the
server's waits on the watch's descriptor instead and, once something is there, has the model thread
read it (`check`): the index then follows the disk before the user's next keystroke, and an index
changed so makes the cached answers stale (CompletionSession.on_index_changed)."""

from __future__ import annotations

import select
import threading
from collections.abc import Callable

SETTLE_S = 0.2  # a checkout writes its files in a burst: read them once it is (mostly) through
POLL_S = 1.0  # how often the descriptor is asked for anew (the watch may be made anew, or stopped)


def listen(fileno: Callable[[], int | None], check: Callable[[], None], stop: threading.Event,
           log: Callable[[str, str], None], settle_s: float = SETTLE_S, poll_s: float = POLL_S) -> None:
    """Until `stop`: wait for the descriptor `fileno()` names (None: no watch now) to be readable,
    then call `check` (blocking: it runs on the model thread, after what that is doing). A
    RuntimeError from `check` (the model thread is gone: the server is exiting) ends the loop."""
    while not stop.is_set():
        fd = fileno()
        if fd is None or fd < 0:
            stop.wait(poll_s)
            continue
        try:
            readable, _, _ = select.select([fd], [], [], poll_s)
        except (OSError, ValueError):  # closed meanwhile: the watch made anew, or stopped
            continue
        if not readable or stop.wait(settle_s):
            continue
        try:
            check()
        except RuntimeError:
            return
        except Exception as error:  # the watch is still read before each retrieval  # noqa: BLE001
            log("warning", f"reading the changes on disk failed ({error.__class__.__name__}: {error})")
        stop.wait(settle_s)  # at most a few reads a second while a tool keeps writing


def start(fileno: Callable[[], int | None], check: Callable[[], None], stop: threading.Event,
          log: Callable[[str, str], None]) -> threading.Thread:
    thread = threading.Thread(target=listen, args=(fileno, check, stop, log), daemon=True,
                              name="repomem-disk-events")
    thread.start()
    return thread
