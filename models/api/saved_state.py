"""What `CostModel.save` writes and `CostModel.load` restores: the run it scores with and, per
graph it has seen, the graph, its reference configs, its measurements and the tile booster
learnt from them (node effects are refit from the measurements: a function of them).

On disk, one directory: `run/` (a copy of the run), `cost_model.json` (the run, the seeds, one
entry per graph), `graph-<i>.npz` (the graph's arrays, `reference`, `measured`, `runtimes`) and
`graph-<i>.refine.txt` (a native LightGBM booster)."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from features.outputs import check_dir
from models.api.graph_arrays import GraphArrays
from models.api.refine import Refinement

SAVED = "cost_model.json"


@dataclass(frozen=True, eq=False)   # arrays: no elementwise ==
class LearntGraph:
    """One graph as a CostModel keeps it between sessions."""
    arrays: GraphArrays
    collection: str
    name: str                        # the graph id it was ranked under
    reference: np.ndarray            # the configs fixing its statistics
    measured: np.ndarray | None = None   # configs measured so far, and their runtimes
    runtimes: np.ndarray | None = None
    refinement: Refinement | None = None     # tile: the booster over the trained score


@dataclass(frozen=True)
class SavedState:
    run: str              # the run directory the models are read from
    trained_run: str      # the run as the saved model recorded it (names it in errors)
    seeds: int | None     # the run's first `seeds` seed models (None: all)
    graphs: tuple[LearntGraph, ...] = ()


def is_saved(path: Path) -> bool:
    return (Path(path) / SAVED).is_file()


def write(state: SavedState, path: Path) -> Path:
    """The state in one directory, written beside `path` and renamed over it."""
    if not state.run:
        raise ValueError("save: this CostModel was not loaded from a run directory")
    check_dir(path, replaced=True)     # a file there, a file above it, or no write access
    if path.exists() and not is_saved(path):
        raise FileExistsError(f"save: {path} exists and is not a saved cost model; "
                              f"not replacing it")
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(state.run, tmp / "run")
    graphs = [_write_graph(g, tmp, i) for i, g in enumerate(state.graphs)]
    (tmp / SAVED).write_text(json.dumps({"run": "run", "trained_run": state.run,
                                         "seeds": state.seeds, "graphs": graphs}, indent=1))
    if path.exists():
        shutil.rmtree(path)
    tmp.rename(path)
    return path


def _write_graph(g: LearntGraph, where: Path, i: int) -> dict:
    """Writes graph i's files; its entry in cost_model.json."""
    arrays = {**g.arrays.kwargs(), "reference": g.reference}
    if g.measured is not None:
        arrays.update(measured=g.measured, runtimes=g.runtimes)
    np.savez(where / f"graph-{i}.npz", **arrays)
    if g.refinement is not None:
        g.refinement.save(where / f"graph-{i}.refine.txt")
    return {"file": f"graph-{i}.npz", "collection": g.collection, "name": g.name,
            "refinement_weight": None if g.refinement is None else g.refinement.weight}


def read(path: Path) -> SavedState:
    record = json.loads((path / SAVED).read_text())
    return SavedState(str(path / record["run"]), record["trained_run"], record.get("seeds"),
                      tuple(_read_graph(path, entry) for entry in record["graphs"]))


def _read_graph(path: Path, entry: dict) -> LearntGraph:
    with np.load(path / entry["file"]) as z:
        arrays = {k: z[k] for k in z.files}
    refinement = None
    if entry["refinement_weight"] is not None:
        refinement = Refinement.load(path / entry["file"].replace(".npz", ".refine.txt"),
                                     entry["refinement_weight"])
    return LearntGraph(GraphArrays.of_npz(arrays), entry["collection"], entry["name"],
                       arrays["reference"], arrays.get("measured"), arrays.get("runtimes"),
                       refinement)
