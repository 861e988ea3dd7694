"""`pipeline.py tune`: one program tuned with the user's measure command (runner.py), its
measurements in a database a rerun resumes from (database.py), the results beside it.

    OUT/state/                  the measurement database (database.py)
    OUT/best.npy, best.json     the confirmed best config, and how it was made
    OUT/progress.png            best so far against measurements
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from features.npz.read import read_keys
from features.schema import GRAPH_KEYS
from models.tuning.database import (LOG, MeasurementLog, Replaying, discard_state, open_state,
                                    owned, program_digest)
from models.tuning.progress import progress_png, progress_printer
from models.tuning.runner import MeasureCommandError, echo_once, run_command
from models.tuning.tune_graph import tune_graph
from models.tuning.tuner import Evidence, TuneResult, TuneSettings, Verdict


def load_program(path: Path) -> dict[str, np.ndarray]:
    """The graph arrays of an npz layout file, or of a program's HLO text (any other file)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such program file")
    if path.suffix == ".npz":    # DataFormatError naming the file: damaged, or keys missing
        return read_keys(path, GRAPH_KEYS, read_ncf=None)
    from features.hlo import read_hlo     # the HLO reader only when a program's text is given
    return read_hlo(path)


@dataclass
class TuneJob:
    program: Path
    command: str
    budget: int
    out: Path
    seed: int = 0
    collection: str | None = None
    settings: TuneSettings = field(default_factory=TuneSettings)
    restart: bool = False    # discard a state in `out` that an earlier search left


def tune_program(model: Any, job: TuneJob, run: str, log=print,
                 graph: dict | None = None) -> TuneResult:
    """Tune the program with model (a CostModel, through tune_graph) and the job's command;
    results in job.out, which the call owns while it runs (StateBusyError when another tune
    does). `run` names the model's run for the record and the state's identity; `graph`: the
    program's arrays when the caller read them already (load_program)."""
    if graph is None:
        graph = load_program(job.program)      # a program that does not read touches no state
    with owned(job.out) as state:
        if job.restart:
            discard_state(state)
        return _tune_owned(model, job, run, graph, log)


def _tune_owned(model: Any, job: TuneJob, run: str, graph: dict, log) -> TuneResult:
    # what measured the state: a rerun with another command must not mix its runtimes in
    identity = {"program": program_digest(graph), "run": run, "seed": job.seed,
                "budget": job.budget, "collection": job.collection,
                "settings": asdict(job.settings), "measure": job.command}
    state = open_state(job.out, identity, {"settings": asdict(TuneSettings())})
    echo = echo_once(lambda line: print(f"measure command: {line}", file=sys.stderr))
    measure = Replaying(MeasurementLog(state / LOG, graph["node_config_ids"].size),
                        lambda c: run_command(job.command, c, state, echo), job.budget,
                        progress_printer())
    if len(measure.old_runtimes):
        log(f"resuming from {state}: {len(measure.old_runtimes)} measurements to replay")
    try:
        result = tune_graph(model, measure, budget=job.budget, **graph,
                            collection=job.collection, seed=job.seed, settings=job.settings)
    except MeasureCommandError as exc:     # what came before it is in the log already
        n = len(measure.done)
        kept = f", kept in {state} (rerun to resume)" if n else ""
        raise MeasureCommandError(f"{exc}; measurements made before it: {n}{kept}") from None
    write_outputs(job, result, run, identity)
    return result


def kept_default_line(v: Verdict, e: Evidence | None) -> str:
    """Why a search kept the compiler default (Verdict.cause), with what it found."""
    chose = f"{v.picks} configs it chose"
    if v.cause == "unconfirmed":
        return evidence_line(e) if e is not None else (
            f"kept the compiler default: {v.measured_faster} of the {chose} measured faster "
            f"once and not when measured again (best.json 'kept_default'): the noise's gain")
    if v.cause == "mispredicted":
        return (f"kept the compiler default: the model expected {v.predicted_faster} of the "
                f"{chose} to beat it and none measured faster (best.json 'kept_default'): it "
                f"misjudges this program; a larger --budget teaches it more")
    return (f"kept the compiler default: the model expected none of the {chose} to beat it "
            f"and none measured faster (best.json 'kept_default'): the default may be the "
            f"best this search reaches")


def evidence_line(e: Evidence) -> str:
    """What a search that kept the default found, and how sure that is."""
    return (f"kept the compiler default: the best other config measured {e.speedup:.3f}x "
            f"faster, {e.z:.1f} standard errors of the noise where {e.needed:.1f} were needed to "
            f"return it (best.json 'evidence'); a larger --budget measures it again")


def write_outputs(job: TuneJob, result: TuneResult, run: str, identity: dict) -> None:
    out = Path(job.out)
    _atomic(out / "best.npy", lambda p: np.save(p, result.best))
    record = {"program": str(job.program), "best_runtime": result.best_runtime,
              "default_runtime": result.default_runtime, "speedup": result.speedup,
              "measurements": int(len(result.runtimes)), "rounds": result.rounds,
              "evidence": None if result.evidence is None else asdict(result.evidence),
              "kept_default": None if result.verdict is None else asdict(result.verdict),
              "made_by": {"run": run, "seed": job.seed, "budget": job.budget,
                          "collection": job.collection, "measure": job.command,
                          "settings": identity["settings"]},
              "best": result.best.tolist()}
    _atomic(out / "best.json", lambda p: p.write_text(json.dumps(record)))
    _atomic(out / "progress.png", lambda p: p.write_bytes(progress_png(result)))


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    write(tmp)
    tmp.replace(path)
