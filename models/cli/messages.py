"""How pipeline.py says what the library warns and what failed: one stderr line each, never a
traceback."""
from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager


@contextmanager
def recorded_warnings():
    """Every warning raised inside, kept (not printed) in the list it yields: for
    `warning_lines`, after the command's own line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def warning_lines(caught) -> None:
    """The library's warnings as one stderr line each (once per message), not as tracebacks."""
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"warning: {message}", file=sys.stderr)


def error_text(exc: BaseException) -> str:
    """An OSError as 'PATH: reason' (its repr-like str reads '[Errno 21] ...: 'PATH''), the
    others as they are."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        also = f" -> {exc.filename2}" if exc.filename2 is not None else ""
        return f"{exc.filename}{also}: {exc.strerror}"
    return str(exc)


# Said by `tune` when its run is not the kind that tunes the program's family best
# (models.api.model_choice.TUNER_FIXED_REFERENCE)
FILE_REFERENCE_NOTE = (
    "note: this run's statistics come from each graph's reference configs, so a CNN's search "
    "starts from the model's own short search (a few seconds); a run trained with `--feature "
    "reference=drawn` (on layout:xla:default) finds faster layouts in a search's first "
    "rounds, and tune takes the newest such run for a CNN when --run is not given")
DRAWN_REFERENCE_NOTE = (
    "note: this run's reference is fixed (`--feature reference=drawn`); a transformer's layouts "
    "are searched better by a run trained with the default reference, whose view learns from "
    "the search's measurements, and tune takes the newest such run for a transformer when "
    "--run is not given")


def reference_note(run_fixed: bool, program_fixed: bool) -> str | None:
    """The note when a run's reference kind is not the one that tunes the program best."""
    if run_fixed == program_fixed:
        return None
    return DRAWN_REFERENCE_NOTE if run_fixed else FILE_REFERENCE_NOTE
