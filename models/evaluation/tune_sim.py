"""tune-sim: how much the cost model helps a search, on graphs whose every config is measured.

For each validation graph, the pool is the file's configs and a "measurement" reads the file's
runtime. Three searches spend the same budget: random picks (the exact expectation over all
draws), the frozen model (its order, top first) and the model with updates (rounds of its top
unmeasured picks, each round's runtimes fed to CostModel.update before the next). Reported: the
best runtime found over the file's best after each budget (1.000 = the best config found).
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from math import lgamma
from pathlib import Path

import numpy as np

from models.api.candidates import config_key, graph_arrays, read_candidates
from features.npz.find import list_npz
from features.npz.read import read_graph
from features.rows.selection import target_runtime

from models.api import CostModel
from models.training.run_files import is_partner

STRATEGIES = ("random", "frozen", "updated")


@dataclass(frozen=True)
class SimSettings:
    budgets: tuple[int, ...] = (5, 10, 20, 50, 100)
    round_size: int = 5            # measurements between two updates
    max_graphs: int = 0            # per collection (0 = every validation graph)
    each_seed: bool = False        # also each seed's models alone: is a gain clear of seeds?


def random_best(runtime: np.ndarray, k: int) -> float:
    """E[min of k configs drawn without replacement]: sorted r_j is the min when the other k-1
    come from the n-j slower ones, C(n-j, k-1) / C(n, k) of the draws."""
    r = np.sort(np.asarray(runtime, np.float64))
    n, k = r.size, min(k, r.size)
    j = np.arange(1, n + 1)
    log_c = lambda a, b: lgamma(a + 1) - lgamma(b + 1) - lgamma(a - b + 1)
    weights = np.array([np.exp(log_c(n - i, k - 1) - log_c(n, k)) if n - i >= k - 1 else 0.0
                        for i in j])
    return float(weights @ r)


def _found(runtime: np.ndarray, picks: np.ndarray, budgets) -> list[float]:
    best = runtime.min()
    return [float(runtime[picks[:k]].min() / best) for k in budgets]


def _updated_picks(model: CostModel, g, runtime: np.ndarray, s: SimSettings) -> np.ndarray:
    """Picks of the search that updates the model after every round."""
    arrays, key = graph_arrays(g), config_key(g.collection)
    configs = getattr(g, key)
    picks: list[int] = []
    budget = min(max(s.budgets), runtime.size)
    order = model.rank_graph(g).order
    while len(picks) < budget:
        taken = set(picks)
        new = [int(i) for i in order if int(i) not in taken][:min(s.round_size,
                                                                   budget - len(picks))]
        picks += new
        if len(picks) < budget:
            model.update(**arrays, **{key: configs[new]}, runtimes=runtime[new],
                         collection=g.collection, name=g.graph_id)
            order = model.rank_graph(g).order
    return np.array(picks)


def seed_models(model: CostModel, collection: str, i: int) -> CostModel:
    """The run's seed i alone (its ranker and its partner), nothing learnt."""
    models = model.models[collection]
    rankers = [m for m in models if not is_partner(m)]
    partners = [m for m in models if is_partner(m)]
    return CostModel({collection: [rankers[i]] + partners[i:i + 1]}, model.settings,
                     without=model.without, source=model.source)


def simulate_graph(model: CostModel, path: Path, collection: str, s: SimSettings) -> dict:
    runtime = target_runtime(read_graph(path, collection, "valid"))
    g = read_candidates(path, collection)
    out = {"graph": path.stem, "configs": int(runtime.size),
           "random": [random_best(runtime, k) / runtime.min() for k in s.budgets]}
    n_seeds = sum(not is_partner(m) for m in model.models[collection])
    variants = [(None, model)] + ([(i, seed_models(model, collection, i)) for i in
                                   range(n_seeds)] if s.each_seed and n_seeds > 1 else [])
    for i, m in variants:
        fresh = CostModel(m.models, m.settings, without=m.without, source=m.source)
        tag = "" if i is None else f"_seed{i}"
        out[f"frozen{tag}"] = _found(runtime, fresh.rank_graph(g).order, s.budgets)
        out[f"updated{tag}"] = _found(runtime, _updated_picks(fresh, g, runtime, s), s.budgets)
    return out


def simulate(run_dir: Path, npz_root: Path, collections, s: SimSettings, *,
             data: str, log=print) -> dict:
    """Every collection's per-graph results and means; written to <run>/tune_sim.json."""
    model = CostModel.load(run_dir)
    result = {"settings": asdict(s), "run": str(run_dir), "data": data, "collections": {}}
    for collection in collections:
        if collection not in model.models:
            continue
        files = list_npz(npz_root, collection, "valid")[:s.max_graphs or None]
        start = time.perf_counter()
        graphs = [simulate_graph(model, f, collection, s) for f in files]
        if graphs:
            result["collections"][collection] = {
                "graphs": graphs, "seconds": round(time.perf_counter() - start, 1),
                "mean": {st: np.mean([g[st] for g in graphs], axis=0).tolist()
                         for st in graphs[0] if st not in ("graph", "configs")}}
            log(f"{collection}: {len(graphs)} graphs in {time.perf_counter() - start:.0f}s")
    return _save(Path(run_dir) / "tune_sim.json", result)


def _save(path: Path, result: dict) -> dict:
    """Write the result, keeping the collections an earlier simulation with the same settings
    measured and this one did not (a run can be simulated a few collections at a time)."""
    if path.is_file():
        earlier = json.loads(path.read_text())
        same = (earlier.get("settings") == json.loads(json.dumps(result["settings"]))
                and earlier.get("data") == result["data"])
        if same:
            result["collections"] = {**earlier["collections"], **result["collections"]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(path)
    return result
