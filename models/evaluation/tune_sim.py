"""tune-sim: how much the cost model helps a search, on graphs whose every config is measured.

For each validation graph, the pool is the file's distinct configs and a "measurement" reads the
file's runtime: a config the file holds several times (a genetic search measures the default and
its best again and again; the dev pools hold them 60-317 times) is one candidate, its runtime the
mean of its copies, as a search that measured it once knows it and measures something else next.
Three searches spend the same budget: random picks (the exact expectation over all draws), and
the model frozen and with updates: the tuner's own loop over the pool (tuner.tune_pool, its
measurer reading the pool's runtimes): rounds of `round_size` unmeasured configs, most by score,
`explore` not: `drawn` of those at random (seeded, the same draws for both while their picks
agree), the rest by score + kappa x spread; the updated one feeds each round's runtimes to
CostModel.update before the next, so its scores and its spread (the seeds' and the node effects'
posterior) move, while the frozen one's spread stays the seeds'. Reported: the best runtime found over the pool's best after each
budget (1.000 = the best config found). With `folds`, the graphs are the train split's instead,
each searched with the run's models fit again without its family (models/training/fold_models.py):
many more graphs than the valid split's, none of whose family the models saw.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from math import lgamma
from pathlib import Path

import numpy as np

import features
from features.schema import is_tile
from models.api.candidates import config_key, read_candidates
from features.npz.find import list_npz
from features.npz.read import read_graph
from features.rows.row_selection import target_runtime

from models.api import CostModel, GraphArrays
from models.api.cost_model import fresh
from models.api.reference_growth import Growth
from models.training.fold_models import fold_models
from models.metrics import kendall_tau_b
from models.training.run_files import is_partner
from models.training.run_record import RunRecord
from features.graph.layout_space import LayoutSpace, config_keys, group_codes
from models.tuning.tune_graph import model_reference
from models.tuning.tuner import Bound, Frozen, TuneSettings, tune_pool

STRATEGIES = ("random", "frozen", "updated")
NEAR_STEPS = 3     # slot groups from a search's best: the configs its next rounds would try
TOP_K = 10         # the model's top-scored pool configs whose best pool_view reports


@dataclass(frozen=True)
class SimSettings:
    budgets: tuple[int, ...] = (5, 10, 20, 50, 100)
    round_size: int = TuneSettings.batch   # measurements between two updates
    explore: int = TuneSettings.explore    # of each round's, chosen by score + kappa x spread
    kappa: float = TuneSettings.kappa
    drawn: int = TuneSettings.drawn        # of the exploring ones, at random (layout)
    seed: int = 0                  # of those draws, the same for the frozen and updated search
    max_graphs: int = 0            # per collection, per fold with folds (0 = every graph)
    each_seed: bool = False        # also each seed's models alone: is a gain clear of seeds?
    folds: int = 0                 # >= 2: the train graphs, families held out over this many folds
    # What fixes each graph's statistics: "pool", the pool's own configs (every config measured,
    # a reference no user has), or "search", the configs tune_graph gives its model
    reference: str = "pool"

    @property
    def tune_settings(self) -> TuneSettings:
        """The tuner's rounds as simulated: nothing kept back to confirm the best (the pool's
        runtimes are exact)."""
        return TuneSettings(batch=self.round_size, explore=self.explore, kappa=self.kappa,
                            drawn=self.drawn, confirm=0)

    @property
    def result_name(self) -> str:
        """Where in the run the result is saved: the valid split's and the folds', and each
        seed's draws, apart (several seeds' results side by side: the draws' spread)."""
        folds = f"_folds-{self.folds}" if self.folds >= 2 else ""
        reference = "" if self.reference == "pool" else f"_ref-{self.reference}"
        return f"tune_sim{folds}{reference}{f'_seed-{self.seed}' if self.seed else ''}.json"


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


def _picks(model: CostModel, g, runtime: np.ndarray, s: SimSettings, learn: bool,
           reference: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The configs a search measures, in order: the tuner's loop over the pool (tune_pool,
    `learn` or frozen), a measurement reading the pool's runtime; and the pool's scores after
    the last round (updated with it too when `learn`); `reference` fixes g's statistics
    (sim_reference)."""
    configs = getattr(g, config_key(g.collection))
    index = {k: i for i, k in enumerate(config_keys(configs))}
    measure = lambda c: runtime[[index[k] for k in config_keys(c)]]     # noqa: E731
    bound = Bound(model, GraphArrays.of_graph(g), reference, collection=g.collection,
                  key=config_key(g.collection), name=g.graph_id)
    result = tune_pool(measure, configs, bound if learn else Frozen(bound),
                       min(max(s.budgets), runtime.size), seed=s.seed,
                       settings=s.tune_settings, tile=is_tile(g.collection))
    return np.array([index[k] for k in config_keys(result.configs)]), bound.score(configs)[0]


def sim_reference(model: CostModel, g, s: SimSettings) -> np.ndarray | None:
    """The configs fixing g's statistics: None (the pool itself, the model's first call) or
    the reference tune_graph gives the model (tile pools are their own)."""
    if s.reference == "pool" or is_tile(g.collection):
        return None
    space = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids,
                                 TuneSettings().space)
    return model_reference(model, GraphArrays.of_graph(g), space, TuneSettings(), s.seed,
                           g.collection)


def pool_view(scores: np.ndarray, runtime: np.ndarray, k: int = TOP_K) -> dict:
    """The unmeasured model's view of the whole pool: Kendall of its scores against the
    runtimes, and the best runtime among its k top-scored configs over the pool's best."""
    top = np.argsort(-scores, kind="stable")[:k]
    return {"kendall": kendall_tau_b(scores, -runtime.astype(np.float64)),
            f"top{k}": float(runtime[top].min() / runtime.min())}


def near_best(g, runtime: np.ndarray, picks: np.ndarray, scores: dict[str, np.ndarray],
              steps: int = NEAR_STEPS) -> dict | None:
    """The learner's held-out check: Kendall tau of each search's final scores (higher =
    predicted faster) against the runtimes of the pool configs the search did not measure
    within `steps` slot groups of its ten best measured ones (the 50 nearest when fewer than
    20 are), where a search goes next. None for tile pools or too few such configs."""
    if is_tile(g.collection):
        return None
    codes = group_codes(g.node_config_feat).reshape(runtime.size, -1)
    best = picks[np.argsort(runtime[picks], kind="stable")[:10]]
    unmeasured = np.setdiff1d(np.arange(runtime.size), picks)
    if unmeasured.size < 5:
        return None
    distance = np.min([(codes[unmeasured] != codes[b]).sum(axis=1) for b in best], axis=0)
    near = unmeasured[distance <= steps]
    if near.size < 20:
        near = unmeasured[np.argsort(distance, kind="stable")[:50]]
    faster = -runtime[near].astype(np.float64)
    if np.unique(faster).size < 2:
        return None
    return {"configs": int(near.size),
            **{k: kendall_tau_b(v[near], faster) for k, v in scores.items()}}


def distinct_pool(g, runtime: np.ndarray):
    """g holding each of its configs once (first-seen order), and their mean runtimes."""
    configs = getattr(g, config_key(g.collection))
    first: dict[int, int] = {}
    which = np.array([first.setdefault(k, len(first)) for k in config_keys(configs)])
    keep = np.unique(which, return_index=True)[1]
    mean = np.bincount(which, runtime) / np.bincount(which)
    return g.with_configs(configs[keep]), mean


def seed_models(model: CostModel, collection: str, i: int) -> CostModel:
    """The run's seed i alone (its ranker and its partner), nothing learnt."""
    models = model.trained.models[collection]
    rankers = [m for m in models if not is_partner(m)]
    partners = [m for m in models if is_partner(m)]
    return fresh(model, {collection: [rankers[i]] + partners[i:i + 1]})


def simulate_graph(model: CostModel, path: Path, collection: str,
                   s: SimSettings) -> dict | None:
    """The three searches' best found on one graph; None when its pool holds fewer than two
    distinct configs (nothing to choose; train leaves such graphs unscored too)."""
    g, runtime = distinct_pool(read_candidates(path, collection),
                               target_runtime(read_graph(path, collection, "valid")))
    if runtime.size < 2:
        return None
    out = {"graph": path.stem, "configs": int(runtime.size),
           "random": [random_best(runtime, k) / runtime.min() for k in s.budgets]}
    n_seeds = sum(not is_partner(m) for m in model.trained.models[collection])
    variants = [(None, model)] + ([(i, seed_models(model, collection, i)) for i in
                                   range(n_seeds)] if s.each_seed and n_seeds > 1 else [])
    for i, m in variants:
        start = fresh(m)
        tag = "" if i is None else f"_seed{i}"
        reference = sim_reference(start, g, s)
        frozen, frozen_scores = _picks(start, g, runtime, s, False, reference)
        updated, updated_scores = _picks(start, g, runtime, s, True, reference)
        out[f"frozen{tag}"] = _found(runtime, frozen, s.budgets)
        out[f"updated{tag}"] = _found(runtime, updated, s.budgets)
        if i is None:
            out["pool_view"] = pool_view(frozen_scores, runtime)
            out["near_best"] = near_best(g, runtime, updated,
                                         {"frozen": frozen_scores, "updated": updated_scores})
    return out


def fold_train_entries(run_dir: Path, npz_root: Path, collections, cache_dir: Path) -> dict:
    """The fold models' rows, for `simulate(train_entries=)` with folds: the train split's
    feature entries of the run's collections, built (or found) with the run's feature settings."""
    record = RunRecord.read(run_dir)
    wanted = [c for c in collections if c in record.metrics]
    built = features.build_entries(npz_root, wanted, ("train",), record.feature_config, cache_dir)
    return {c: built[c, "train"] for c in wanted}


def simulate(run_dir: Path, npz_root: Path, collections, s: SimSettings, *,
             data: str, train_entries: dict | None = None, log=print) -> dict:
    """Every collection's per-graph results and means; written to <run>/<s.result_name>.
    train_entries: the collections' train feature entries (for folds: the models' rows)."""
    model = CostModel.load(run_dir)
    result = {"settings": asdict(s), "run": str(run_dir), "data": data,
              "growth": asdict(model.growth), "collections": {},
              "graphs": ("the valid graphs" if s.folds < 2 else
                         f"the train graphs, their families held out over {s.folds} folds")}
    for collection in collections:
        if collection not in model.trained.models:
            continue
        start = time.perf_counter()
        searched = _searched(model, Path(run_dir), npz_root, collection, s, train_entries, log)
        files = [f for _, f in searched]
        results = [simulate_graph(m, f, collection, s) for m, f in searched]
        graphs = [g for g in results if g is not None]
        skipped = [f.stem for f, g in zip(files, results) if g is None]
        if skipped:
            log(f"{collection}: {len(skipped)} graph(s) with fewer than 2 distinct configs left "
                f"out: {', '.join(skipped)}")
        if graphs:
            result["collections"][collection] = {
                "graphs": graphs, "left_out": skipped,
                "seconds": round(time.perf_counter() - start, 1),
                "mean": {st: np.mean([g[st] for g in graphs], axis=0).tolist()
                         for st in graphs[0]
                         if st not in ("graph", "configs", "near_best", "pool_view")}}
            log(f"{collection}: {len(graphs)} graphs in {time.perf_counter() - start:.0f}s")
    return _save(Path(run_dir) / s.result_name, result)


def _searched(model: CostModel, run_dir: Path, npz_root: Path, collection: str,
              s: SimSettings, train_entries: dict | None, log) -> list[tuple[CostModel, Path]]:
    """(model, graph file) pairs to simulate: the valid graphs with the run's models, or with
    folds each train graph with the models of the fold that held its family out."""
    if s.folds < 2:
        return [(model, f) for f in list_npz(npz_root, collection, "valid")[:s.max_graphs or None]]
    files = {f.stem: f for f in list_npz(npz_root, collection, "train")}
    pairs = []
    for models, held in fold_models(run_dir, train_entries[collection], collection, s.folds,
                                    log):
        fold = fresh(model, {collection: models})
        pairs += [(fold, files[g]) for g in held if g in files][:s.max_graphs or None]
    return pairs


def saved_draws(run_dir: Path, s: SimSettings, data: str) -> list[dict]:
    """The results in the run of this simulation with every seed of its draws saved (the same
    settings and data but the seed), by seed: how much the draws move it."""
    first = Path(run_dir) / replace(s, seed=0).result_name
    this = {"settings": asdict(s), "data": data, "growth": asdict(Growth())}   # simulate's
    found = []
    for path in [first] + sorted(first.parent.glob(f"{first.stem}_seed-*.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue        # absent, or not JSON: no draw to show
        if _same_simulation(result, this, but="seed"):
            found.append(result)
    return sorted(found, key=lambda r: r["settings"]["seed"])


def _same_simulation(a: dict, b: dict, but: str = "") -> bool:
    """Whether two results (or a result and this one's settings and data) are of one
    simulation: the same data, model growth (a search's reference) and settings, `but` aside
    (as saved: tuples are lists)."""
    if not isinstance(a.get("settings"), dict) or a.get("data") != b.get("data"):
        return False
    plain = lambda r: {k: v for k, v in json.loads(json.dumps(r["settings"])).items() if k != but}
    growth = lambda r: json.loads(json.dumps(r.get("growth")))
    return plain(a) == plain(b) and growth(a) == growth(b)


def _save(path: Path, result: dict) -> dict:
    """Write the result, keeping the collections an earlier simulation with the same settings
    measured and this one did not (a run can be simulated a few collections at a time)."""
    if path.is_file():
        earlier = json.loads(path.read_text())
        if _same_simulation(earlier, result):
            result["collections"] = {**earlier["collections"], **result["collections"]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(path)
    return result
