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


def run(command: str, func: Callable[[], int], resumes: str | None) -> int:
    """func() with SIGINT and SIGTERM raising KeyboardInterrupt; an interrupt is answered with
    one stderr line and EXIT_INTERRUPTED. resumes: what the command keeps of its work, so that a
    rerun takes up from there (None: nothing)."""
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
    then = f"{resumes}, so rerunning it resumes from there" if resumes else "rerun it to start again"
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
