"""Ctrl-C and SIGTERM, for every command in one place: one line saying what stopped and whether
a rerun resumes, exit code 130, never a traceback (issue 41).

SIGTERM is turned into the KeyboardInterrupt that Ctrl-C raises, so both unwind the same way:
temporaries are removed by the `with` blocks that made them (features/cache/store.py), worker
pools are stopped (features/cache/workers.py). Whatever an interrupt sets off on its way out (a
worker pool broken by the same signal reaching its workers) is the interrupt, not a new error.
"""
from __future__ import annotations

import signal
import sys
import threading
from typing import Callable

EXIT_INTERRUPTED = 130   # 128 + SIGINT, what a shell reports for Ctrl-C
SIGNALS = (signal.SIGINT, signal.SIGTERM)


# What a rerun of each interrupted command takes up and what it does again, said in its line
# (a command not here keeps nothing). Features are cached file by file; a run directory is
# published whole, so an interrupted train keeps no model and its rerun trains every one again.
CACHED_FEATURES = "the feature files it finished are cached, so a rerun builds only the rest"
RERUNS = {
    "build-features": CACHED_FEATURES,
    "train": f"{CACHED_FEATURES}; training starts over (no model of an unfinished run is kept)",
    "submit": f"{CACHED_FEATURES}; the scoring starts over",
    "bench": "the inputs and feature files it finished are kept, so a rerun makes only the "
             "rest; the timings start over",
    "tune": "the measurements so far are kept in {out}/state, so a rerun with the same command "
            "replays them and measures only what is new",
}


def rerun_text(command: str, **where) -> str | None:
    """RERUNS' sentence for the command, its places filled in (tune's out=)."""
    text = RERUNS.get(command)
    return text.format(**where) if text else None


def run(command: str, func: Callable[[], int], resumes: str | None) -> int:
    """func() with SIGINT and SIGTERM raising KeyboardInterrupt; an interrupt is answered with
    one stderr line and EXIT_INTERRUPTED. resumes: what a rerun takes up and does again
    (rerun_text; None: it starts again)."""
    received: list[int] = []

    def interrupt(signum, frame):
        received.append(signum)
        if len(received) == 1:    # once: a second signal must not cut the cleanup short
            raise KeyboardInterrupt

    previous = _install(interrupt)
    try:
        result = func()
    except BaseException as exc:
        if not received and not isinstance(exc, KeyboardInterrupt):
            _restore(previous)
            raise
        # Ignored from here to the exit: a second signal (`timeout` forwards its own, a shell
        # sends one to the group) must cut neither this line nor the exit handlers short.
        _install(signal.SIG_IGN)
        print(_line(command, received[0] if received else signal.SIGINT, resumes),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    _restore(previous)
    return result


def _line(command: str, signum: int, resumes: str | None) -> str:
    then = resumes or "a rerun starts again"
    return (f"interrupted ({signal.Signals(signum).name}): `pipeline.py {command}` stopped; "
            f"nothing half-written was kept; {then}")


def _install(handler) -> dict:
    """Set `handler` for SIGNALS, except one the caller ignores (nohup, a background job); {}
    where signals cannot be handled (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in SIGNALS
            if signal.getsignal(s) is not signal.SIG_IGN}


def _restore(previous: dict) -> None:
    for s, handler in previous.items():
        if handler is not None:    # None: a handler set outside Python, which cannot be put back
            signal.signal(s, handler)
