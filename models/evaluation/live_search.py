"""A live search against the stand-in hardware (hardware.py): the tuner itself (tune_graph) on dev
layout graphs, with configs no file holds, "measured" by a model fitted on every dev graph (the
valid ones included) with 1% noise. THE STAND-IN IS NOT A TPU: its numbers show that the search
and its learning work, not how well they would do on hardware.

Four searches per graph and seed, the same budget and noise stream:
- updated: tune_graph as a user calls it (the model learns from every batch),
- frozen:  tune_graph(learn=False),
- blind:   the same evolution scored at random (no model: measurements alone steer it),
- bound:   the same evolution scored by the stand-in's own noiseless runtime (the exact model:
           what the search finds when its model is right).
Beside them, `genetic`: what the dataset's own search returned, the file's config of lowest
measured runtime (its thousands of measurements), judged by the same stand-in.
With `--quirks SD` the stand-in adds its fixed per-(node, group, layout) quirks (hardware.py):
the tuner's model is then wrong in a way measurements can teach.
With `--folds K` the graphs are the train split's and each is searched with the run's models fit
again without its family (models/training/fold_models.py, as tune-sim --folds): the tuner's
model does not know the family while the stand-in does, as on a program of a new family.
Each search's returned best is judged by the stand-in's noiseless runtime over the default's;
at the budgets of `--at` below `--budget`, the best measured among the first N measurements is
(a search of budget N measures the same, then confirms its best). A family's figure is the
geometric mean over its graphs, per seed and over seeds. Per model family: the share of the
frozen search's distance to the bound that the updates close; the model's Kendall on the graph's
file configs before any measurement (how well it knows the graph); and the learner's held-out
check: Kendall tau of the frozen and the updated model's scores against the stand-in's runtimes
of unmeasured configs a few mutations from the updated search's ten best (where it goes next).

    python pipeline.py live-search --run RUN --hardware HW_RUN \
        --data-dir ../shared/tpugraphs_dev --budget 100 --seeds 0 1 2 --out FILE.json
"""
from __future__ import annotations

import json
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from features.npz.find import list_npz, resolve_npz_root
from features.cache.store import write_atomically
from features.graph.layout_space import LayoutSpace, config_keys
from models.api import CostModel, MissingModelError
from models.api.cost_model import fresh
from models.evaluation.hardware import Hardware
from models.evaluation.tune_sim import fold_train_entries
from models.metrics import kendall_tau_b
from models.reporting.live_search_table import geomean
from models.training.family_split import graph_family
from models.training.fold_models import fold_models
from models.tuning.tune_graph import model_reference, tune_graph
from models.tuning.tuner import CAUSES, Blind, Bound, TuneSettings, tune

SEARCHES = ("updated", "frozen", "blind", "bound")
COLLECTIONS = ("layout:xla:default", "layout:nlp:default")
FAMILY = {"layout:xla:default": "CNN (xla)", "layout:nlp:default": "transformer (nlp)"}
NEAR_PARENTS, NEAR_CHILDREN = 10, 10   # the held-out check: children of the ten best measured
FILE_CONFIGS = 1000     # of a graph's file, ranked by the tuner's model before any search


@dataclass
class Exact:
    """The stand-in's own noiseless runtime as the search's model: the exact-model bound."""
    hw: Hardware

    def score(self, configs):
        return -self.hw.log_runtime(configs), np.zeros(len(configs))

    def learn(self, configs, runtimes):
        return None


def one_search(model: CostModel, hw: Hardware, search: str, budget: int, seed: int,
               collection: str, settings: TuneSettings, stream: int = 0):
    """(TuneResult, the model the search left: taught when updated); the search's noise drawn
    from (seed, stream): the same for every search."""
    rng = np.random.default_rng([seed, stream])
    measure = lambda configs: hw.measure(configs, rng)   # noqa: E731
    if search in ("blind", "bound"):
        scorer = Blind(seed) if search == "blind" else Exact(hw)
        return tune(measure, space_of(hw, settings), scorer, budget, seed=seed,
                    settings=settings), None
    taught = fresh(model)
    return tune_graph(taught, measure, budget=budget, **hw.graph.kwargs(), collection=collection,
                      seed=seed, settings=settings, learn=search == "updated"), taught


def found_at(hw: Hardware, result, at: list[int]) -> list[float]:
    """The stand-in's runtime over the default's of the best measured among the first N
    measurements, for each N of `at`; at the whole budget, of the search's confirmed best."""
    out = []
    for n in at:
        best = (result.best if n >= len(result.runtimes)
                else result.configs[int(np.argmin(result.runtimes[:n]))])
        out.append(float(hw.runtime(best[None])[0] / hw.default_runtime))
    return out


def space_of(hw: Hardware, settings: TuneSettings) -> LayoutSpace:
    """The layout space tune_graph searches on the stand-in's graph."""
    g = hw.graph
    return LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids,
                                settings.space)


def near_configs(space: LayoutSpace, result, seed: int) -> np.ndarray:
    """Distinct unmeasured children (1 + geometric mutations each) of the search's ten best
    measured configs: where the search goes next."""
    keys, parents = config_keys(result.configs), {}
    for i in np.argsort(result.runtimes, kind="stable"):
        if len(parents) < NEAR_PARENTS:
            parents.setdefault(keys[i], result.configs[i])
    children = space.mutate(np.random.default_rng([seed, 7]),
                            np.repeat(np.array(list(parents.values())), NEAR_CHILDREN, axis=0))
    measured, keep = set(keys), {}
    for i, key in enumerate(config_keys(children)):
        if key not in measured:
            keep.setdefault(key, i)
    return children[list(keep.values())]


def near_check(model: CostModel, taught: CostModel, hw: Hardware, result, collection: str,
               seed: int, settings: TuneSettings) -> dict | None:
    """The learner's held-out check: Kendall tau of the frozen and the updated model's scores
    against the stand-in's runtimes (higher = faster) of near_configs; None when fewer than 20."""
    space = space_of(hw, settings)
    near = near_configs(space, result, seed)
    if len(near) < 20:
        return None
    faster = -hw.log_runtime(near)
    reference = model_reference(model, hw.graph, space, settings, seed, collection)
    return {"configs": int(len(near)),
            **{name: kendall_tau_b(scored(m, hw, near, reference, collection), faster)
               for name, m in (("frozen", fresh(model)), ("updated", taught))}}


def scored(model: CostModel, hw: Hardware, configs: np.ndarray, reference: np.ndarray,
           collection: str) -> np.ndarray:
    """The model's scores of the graph's configs, with what it learnt of the graph: the graph
    named by the same arrays tune_graph was given (its state is found by them)."""
    return Bound(model, hw.graph, reference, collection).score(configs)[0]


def graph_results(model, hw_run, path, collection, args, settings) -> dict:
    hw = Hardware.load(hw_run, path, quirks=args.quirks)
    configs = file_configs(path)
    out = {"graph": path.stem, "family": graph_family(path.stem), "collection": collection,
           "nodes": int(hw.graph.node_config_ids.size), "genetic": genetic_best(hw, path),
           "model_kendall": model_kendall(model, hw, configs, collection),
           "search_kendall": model_kendall(model, hw, configs, collection,
                                           model_reference(model, hw.graph, space_of(hw, settings),
                                                           settings, 0, collection))}
    at = sorted({*[n for n in args.at if n < args.budget], args.budget})
    out["at"] = at
    for search in args.searches:
        found, measured, near, kept = [], [], [], []
        for seed in args.seeds:
            r, taught = one_search(model, hw, search, args.budget, seed, collection, settings,
                                   zlib.crc32(path.stem.encode()))
            found.append(found_at(hw, r, at))
            measured.append(int(len(r.runtimes)))
            kept.append(None if r.verdict is None else r.verdict.cause)
            if search == "updated":
                near.append(near_check(model, taught, hw, r, collection, seed, settings))
        out[search] = [f[-1] for f in found]      # per seed, at the whole budget
        out[f"{search}_at"] = found               # per seed, at each budget of `at`
        out[f"{search}_measured"] = measured
        out[f"{search}_kept"] = kept              # per seed, why the default was kept (None: not)
        if search == "updated":
            out["near"] = near
    return out


def file_configs(path: Path) -> np.ndarray:
    """The first FILE_CONFIGS configs of a graph's file, the ones model_kendall ranks."""
    with np.load(path) as z:
        return z["node_config_feat"][:FILE_CONFIGS].astype(np.int8)


def model_kendall(model: CostModel, hw: Hardware, configs: np.ndarray, collection: str,
                  reference: np.ndarray | None = None) -> float:
    """How well the tuner's model knows the graph before any measurement: Kendall tau of its
    scores of `configs` (file_configs) against the stand-in's runtimes, the graph's statistics
    from `reference` (None: those configs themselves, as `submit` ranks a file; the search's:
    as `tune` ranks what it visits)."""
    scores = fresh(model).rank(**hw.graph.kwargs(), node_config_feat=configs, collection=collection,
                                reference=reference).scores
    return kendall_tau_b(scores, -hw.log_runtime(configs))


def genetic_best(hw: Hardware, path: Path) -> float:
    """The stand-in's runtime, over the default's, of the file's fastest-measured config."""
    with np.load(path) as z:
        best = z["node_config_feat"][np.argmin(z["config_runtime"])].astype(np.int8)
    return float(hw.runtime(best[None])[0] / hw.default_runtime)


def summarise(graphs: list[dict], seeds, searches) -> dict:
    """Per search: the geometric mean over graphs of best / default, per seed and overall, how
    many returned bests are slower than the default, and how many searches kept the default,
    by why (tuner.CAUSES)."""
    out = {}
    for search in searches:
        per_seed = [geomean([g[search][i] for g in graphs]) for i in range(len(seeds))]
        out[search] = {"geomean": geomean([v for g in graphs for v in g[search]]),
                       "per_seed": per_seed,
                       "slower_than_default": sum(v > 1 for g in graphs for v in g[search]),
                       "kept_default": {c: sum(k == c for g in graphs
                                               for k in g.get(f"{search}_kept", []))
                                        for c in CAUSES}}
    out["genetic"] = geomean([g["genetic"] for g in graphs])
    return out


def inputs(args) -> tuple[CostModel, Path]:
    """The tuner's model and the dev npz root, the stand-in's run checked: an error here (a
    missing, stale or damaged run, one without the default collections' models, no graphs to
    search) comes before the searches' minutes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # FamilyMismatch etc.: the collection is named
        model = CostModel.load(args.run, seeds=args.model_seeds)
        hardware = CostModel.load(args.hardware)
    for name, m in ((args.run, model), (args.hardware, hardware)):
        missing = [c for c in args.collections if c not in m.trained.models]
        if missing:
            raise MissingModelError(f"{name}: no model for {', '.join(missing)}")
    root = resolve_npz_root(args.data_dir)
    split = "train" if args.folds >= 2 else "valid"
    empty = [c for c in args.collections if root is None or not list_npz(root, c, split)]
    if empty:
        raise FileNotFoundError(f"{args.data_dir}: no {split} graphs of {', '.join(empty)}")
    return model, root


def searched(args, model: CostModel, root: Path, collection: str) -> list[tuple[CostModel, Path]]:
    """(the tuner's model, graph file) pairs: the valid graphs with the run's models, or with
    folds each train graph with the models of the fold that held its family out; at most
    `--max-graphs` per model family."""
    if args.folds < 2:
        pairs = [(model, f) for f in list_npz(root, collection, "valid")]
    else:
        entry = fold_train_entries(args.run, root, [collection], args.cache_dir)[collection]
        files = {f.stem: f for f in list_npz(root, collection, "train")}
        pairs = []
        for models, held in fold_models(args.run, entry, collection, args.folds):
            fold = fresh(model, {collection: models})
            pairs += [(fold, files[g]) for g in sorted(held) if g in files]
    kept, per_family = [], {}
    for m, f in pairs:
        n = per_family.setdefault(graph_family(f.stem), 0)
        if not args.max_graphs or n < args.max_graphs:
            kept.append((m, f))
            per_family[graph_family(f.stem)] = n + 1
    return kept


def search_all(args, model: CostModel, root: Path) -> dict:
    settings = TuneSettings()
    result = {"stand_in": "a cost model fitted on every dev graph, the valid ones included, with "
                          "1% noise: NOT a TPU; the search works, not how well on hardware",
              "run": str(args.run), "hardware": str(args.hardware), "quirks": args.quirks,
              "budget": args.budget, "folds": args.folds, "searches": list(args.searches),
              "seeds": list(args.seeds), "model_seeds": args.model_seeds, "families": {}}
    for collection in args.collections:
        start, graphs = time.perf_counter(), []
        for m, f in searched(args, model, root, collection):
            graphs.append(graph_results(m, args.hardware, f, collection, args, settings))
            print(f"{collection} {f.stem}: " + ", ".join(
                f"{s} {geomean(graphs[-1][s]):.3f}" for s in args.searches), flush=True)
        result["families"][FAMILY[collection]] = {
            "collection": collection, "graphs": graphs,
            "seconds": round(time.perf_counter() - start),
            **summarise(graphs, args.seeds, args.searches)}
    return result


def write_result(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(result, indent=1)))
