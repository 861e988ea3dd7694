"""What a tune shows while and after it runs: a line per batch, and the best so far as a PNG."""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np

from models.tuning.database import Replaying
from models.tuning.tuner import TuneResult


def progress_printer(stream=None) -> Callable[[Replaying], None]:
    """One line per batch: measurements, how many replayed, the best so far against the
    default (its first measurement); to `stream`, else to sys.stderr as it is then."""
    def show(r: Replaying) -> None:
        out = stream or sys.stderr
        best = min(r.done)
        rel = f" = {best / r.done[0]:.3f}x the default's first measurement"
        replay = f" ({r.replayed} replayed from the state)" if r.replayed else ""
        end = "\r" if out.isatty() and len(r.done) < r.budget else "\n"
        out.write(f"tune: {len(r.done)}/{r.budget} measured{replay}, best so far "
                  f"{best:.6g}{rel}{end}")
        out.flush()
    return show


def progress_png(result: TuneResult) -> bytes:
    """Every measurement and the best so far, over the default's runtime, against the count."""
    from matplotlib.figure import Figure
    from models.reporting.figures import png
    fig = Figure(figsize=(5, 3.2), layout="constrained")
    ax = fig.subplots()
    x = np.arange(1, len(result.runtimes) + 1)
    base = result.runtimes[0]
    ax.plot(x, result.runtimes / base, ".", color="#999999", ms=3, label="measured")
    ax.plot(x, result.best_so_far() / base, color="#1f77b4", label="best so far")
    ax.axhline(result.best_runtime / base, color="#ff7f0e", ls="--", lw=1,
               label=f"confirmed best ({result.speedup:.3f}x faster)")
    ax.set_xlabel("measurements")
    ax.set_ylabel("runtime / the default's")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return png(fig)
