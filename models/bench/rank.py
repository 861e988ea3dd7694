"""`bench`'s ranking-API latency: one `CostModel.rank` call (models/api/cost_model.py) on one core (every
thread pinned to one CPU, Numba to one thread). Candidates of a generated layout graph draw each
node's layout from `node_values` values of it, as in real files (a dev file's node takes a median
of 50 distinct values in 1,000 configs); cold (the graph's tables built), warm (new candidates),
and warm with fresh random draws (the worst case); and tile configs. Models: what a default
`train` run holds (its seeds and their partners), all rounds; for the tuner round those of
`tune`'s default collection (TUNE), trained on configs of a genetic search. Targets per 1,000
layout candidates: warm <= 100 ms, cold <= 1 s; one tuner round <= 2 s. `real_file`
(--rank-file): a real layout file's graph too, warm candidates drawn from its own values, and
a tuner round on it."""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from features import FeatureConfig
from models.sample import generate as sample
from models.sample import synth_graph
from models.bench import stages
from models.api.candidates import candidate_rows, read_candidates
from features.npz.read import read_graph
from features.rows.node_rows import NODE_ROW_COLLECTIONS, graph_node_rows
from features.schema import collection_slug

from models.api import CostModel, GraphArrays, TrainedRun
from models.tuning.search import evolve
from features.graph.layout_space import LayoutSpace
from models.tuning.tune_graph import model_reference
from models.tuning.tuner import Bound, TuneSettings
from models.training.run_files import first_seeds
from models.training.runs import TrainConfig, fit_partners, fit_seeds


@dataclass(frozen=True)
class RankSpec:
    nodes: int = 3000
    config_nodes: int = 600
    candidates: int = 1000
    train_configs: int = 2000     # configs of the graph the layout model is trained on
    tile_configs: int = 1000
    tile_train_graphs: int = 8
    warm_calls: int = 5
    node_values: int = 50         # distinct layouts per node the candidates draw from
    seed: int = 0
    real_file: str = ""           # a real layout npz, timed as well (see the module docstring)


QUICK_RANK = RankSpec(nodes=400, config_nodes=60, candidates=200, train_configs=300,
                      tile_configs=200, tile_train_graphs=3, warm_calls=2, node_values=10)
LAYOUT, TILE = "layout:xla:random", "tile:xla"
# a CNN program's model in `tune` (models.api.program_collection: its family's 'default'
# collection): node learners beside the rankers, the slowest scoring a round has
TUNE = "layout:xla:default"
# a transformer's: the same models' kind, and its graph's reference grows with the measurements
# (models/api/reference_growth.py), its tables rebuilt when the fastest ten change
TUNE_GROWING = "layout:nlp:default"
TUNER_HISTORY = 48    # measurements a timed tuner round's update adds to (mid-search at 100)


def _train(arrays: list[dict], collection: str, tmp: Path) -> list:
    """A default run's models in load_models' order (every seed's ranker, then every seed's
    partner), trained on these graphs, which are written as files and read back so they are
    validated like any other. The graphs make one family: nothing is held out to stop early,
    every round is trained."""
    settings = FeatureConfig(max_train_configs_layout=0, max_train_configs_tile=0)
    sets = []
    for i, a in enumerate(arrays):
        path = tmp / f"{collection_slug(collection)}-{i}.npz"
        sample.write_npz(path, a)
        g = read_graph(path, collection, "train")
        rows = candidate_rows(g, settings)
        if collection in NODE_ROW_COLLECTIONS:
            rows = replace(rows, nodes=(graph_node_rows(g, rows.config_idx, settings.seed),))
        sets.append(rows)
    joined = {k: np.concatenate([getattr(s, k) for s in sets])
              for k in ("X", "runtime", "config_idx", "dup_count")}
    ids = tuple(f"bench_batch_{i}" for i in range(len(sets)))   # one family: "bench"
    nodes = tuple(n for s in sets for n in s.nodes) if sets[0].nodes else None
    data = replace(sets[0], **joined, graph_ids=ids, nodes=nodes,
                   ptr=np.concatenate([[0], np.cumsum([s.X.shape[0] for s in sets])]))
    cfg = TrainConfig()
    return fit_seeds(cfg, data) + fit_partners(cfg, data)


def _models(spec: RankSpec, rng, tmp: Path) -> tuple[CostModel, dict, list[np.ndarray]]:
    graph, ids, train = stages.layout_arrays(rng, spec.nodes, spec.config_nodes,
                                             spec.train_configs)
    values = sample.layout_configs(rng, graph, ids, spec.node_values, "random")
    calls = [_draw(rng, values, spec.candidates) for _ in range(spec.warm_calls + 1)]
    calls += [sample.layout_configs(rng, graph, ids, spec.candidates, "random")
              for _ in range(spec.warm_calls)]
    tiles = []
    for _ in range(spec.tile_train_graphs + 1):
        g = synth_graph.build_graph(rng, int(rng.integers(8, 40)), "xla")
        tiles.append(sample.tile_arrays(rng, g, spec.tile_configs, "train", 0.003))
    searched = sample.layout_configs(rng, graph, ids, spec.train_configs, "default")
    default = sample.layout_arrays(graph, ids, searched,
                                   sample.layout_runtime(graph, ids, searched, rng, 0.003))
    models = {LAYOUT: _train([train], LAYOUT, tmp), TUNE: _train([default], TUNE, tmp),
              TUNE_GROWING: _train([default], TUNE_GROWING, tmp),
              TILE: _train(tiles[1:], TILE, tmp)}
    return (CostModel(TrainedRun(models, FeatureConfig())),
            {"layout": GraphArrays.of_npz(train), "tile": tiles[0]}, calls)


def _draw(rng, values: np.ndarray, n: int) -> np.ndarray:
    """n candidates, each node's layout drawn from that node's values (values (v, nc, 18))."""
    nc = values.shape[1]
    return values[rng.integers(0, values.shape[0], (n, nc)), np.arange(nc)]


def _one_core() -> None:
    """Pin every thread of this process to one CPU, those the libraries started while training
    (LightGBM's OpenMP pool) included: a thread keeps the affinity it had when it began."""
    import numba

    cpu = {min(os.sched_getaffinity(0))}
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpu)
        except ProcessLookupError:   # the thread ended meanwhile
            pass
    numba.set_num_threads(1)


def _cpu_timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds: on a shared machine the CPU time is what a core of one's own needs."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def rank_latency(spec: RankSpec) -> dict:
    """Runs in a bench child: train the models, then time ranking on one core."""
    rng = np.random.default_rng(spec.seed)
    with tempfile.TemporaryDirectory() as tmp:
        model, graphs, calls = _models(spec, rng, Path(tmp))
    _one_core()
    small = stages.layout_arrays(rng, 200, 20, 20, runtime=False)[2]   # loads every kernel once
    model.rank(**GraphArrays.of_npz(small).kwargs(), node_config_feat=small["node_config_feat"])
    layout = graphs["layout"]
    cold = _cpu_timed(lambda: model.rank(**layout.kwargs(), node_config_feat=calls[0]))
    hits = model.cache.hits
    warm, fresh = [[_cpu_timed(lambda c=c: model.rank(**layout.kwargs(), node_config_feat=c))
                    for c in cs]
                   for cs in (calls[1:spec.warm_calls + 1], calls[spec.warm_calls + 1:])]
    if model.cache.hits - hits != len(warm) + len(fresh):
        raise RuntimeError("a warm call missed the graph-static cache; its time is not warm")
    one = CostModel(TrainedRun({c: first_seeds(ms, 1) for c, ms in model.trained.models.items()},
                               FeatureConfig()))
    one.rank(**layout.kwargs(), node_config_feat=calls[0])
    one_seed = _median([_cpu_timed(lambda c=c: one.rank(**layout.kwargs(), node_config_feat=c))
                        for c in calls[1:spec.warm_calls + 1]])
    tile = {k: graphs["tile"][k] for k in ("node_feat", "node_opcode", "edge_index",
                                            "config_feat")}
    tile_cold, tile_warm = [_cpu_timed(lambda: model.rank(**tile)) for _ in range(2)]
    return {"layout_cold": cold, "layout_warm": _median(warm), "layout_fresh": _median(fresh),
            "layout_warm_one_seed": one_seed, "layout_models": len(model.trained.models[LAYOUT]),
            "tuner_round": _tuner_round(model, layout, spec),
            "tuner_round_growing": _tuner_round(model, layout, spec, TUNE_GROWING),
            "tile_cold": tile_cold, "tile_warm": tile_warm, "load_average": os.getloadavg(),
            "real": _real_latency(model, spec, rng) if spec.real_file else None}


def _tuner_round(model: CostModel, layout: GraphArrays, spec: RankSpec,
                 collection: str = TUNE) -> dict:
    """(wall, CPU) seconds of one round of tune_graph's search on the layout graph, with
    TUNER_HISTORY measurements learnt already: the evolution and the draws screened by the
    model, then the update with the round's batch. Each timed round starts a new layout
    distribution, as a search's first (slowest) round does: its draws bring the most node
    rows the model has not scored. The graph's state is built before (once per search).
    TUNE_GROWING's rounds each bring the fastest configs yet (their runtimes drawn below the
    history's), so each rebuilds the grown reference's tables: its worst case. `start`: the
    search's reference given once before its first round (model_reference: a CNN's grown by
    the model's own search)."""
    s = TuneSettings()
    rng = np.random.default_rng(spec.seed)
    space = LayoutSpace.of_graph(layout.node_feat, layout.node_opcode, layout.edge_index,
                                 layout.node_config_ids, s.space)
    given = []
    start = _cpu_timed(lambda: given.append(model_reference(model, layout, space, s, spec.seed,
                                                            collection)))
    bound = Bound(model, layout, given[0], collection)
    history = space.mutate(rng, space.random(rng, TUNER_HISTORY))
    bound.learn(history, np.exp(rng.normal(0, 0.1, len(history))))
    fastest = [0.5]

    def one_round():
        archive = evolve(space, bound.score, history[:s.search.population], rng, s.search)
        picks = np.array(archive.configs)[archive.best(s.batch)]
        fastest[0] /= 2
        bound.learn(picks, fastest[0] * np.exp(rng.normal(0, 0.1, len(picks))))
    times = [_cpu_timed(one_round) for _ in range(2)]
    return {"time": _median(times), "start": start, "collection": collection,
            "proposals": (s.search.proposals + s.search.sampled) * s.search.generations,
            "history": TUNER_HISTORY, "config_nodes": space.n_nodes,
            "models": len(model.trained.models[collection])}


def _median(times: list[tuple[float, float]]) -> tuple[float, float]:
    """(wall, CPU): each the median over calls."""
    return tuple(float(x) for x in np.median(np.array(times), axis=0))


def _real_latency(model: CostModel, spec: RankSpec, rng) -> dict:
    """Cold and warm (wall, CPU) seconds per call on a real file's graph, and its sizes."""
    g = read_candidates(Path(spec.real_file), LAYOUT)
    graph = GraphArrays.of_graph(g).kwargs()
    ncf = np.asarray(g.node_config_feat)
    c, nc = ncf.shape[:2]
    cold = _cpu_timed(lambda: model.rank(**graph, node_config_feat=ncf[:spec.candidates]))
    warm = []
    for _ in range(spec.warm_calls):
        draw = _draw(rng, ncf, spec.candidates)
        warm.append(_cpu_timed(lambda d=draw: model.rank(**graph, node_config_feat=d)))
    distinct = [np.unique(ncf[:, k], axis=0).shape[0] for k in range(nc)]
    return {"file": Path(spec.real_file).name, "nodes": int(g.node_feat.shape[0]),
            "config_nodes": int(nc), "candidates": int(min(c, spec.candidates)),
            "median_distinct": float(np.median(distinct)), "cold": cold,
            "warm": _median(warm),
            "tuner_round": _tuner_round(model, GraphArrays.of_graph(g), spec)}


def rank_notes(spec: RankSpec, log=print) -> dict:
    """Measure in a fresh child, whose libraries read these settings when it starts. Its OpenMP
    threads wait passively, not spinning at all (not even features/__init__.py's short spin):
    LightGBM starts them while training on both cores, and once the child is pinned to one, a
    thread spinning at a barrier took the core from the next call (warm 100 ms against 93). Its
    BLAS runs one thread, as Numba does: a second one on the same core only waits for the first
    (a tuner update's small Cholesky factorisations took 16 ms each instead of 0.1-1, a round
    2.1-3.6 s against 1.3)."""
    log("  ranking API latency (trains its models first) ...")
    child_env = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0", "OPENBLAS_NUM_THREADS": "1"}
    before = {k: os.environ.get(k) for k in child_env}
    os.environ.update(child_env)
    try:
        child, result = stages.measure(rank_latency, spec)
    finally:
        for k, v in before.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v
    return {**result, "spec": spec, "peak_rss_mb": child.peak_rss_mb}


def format_rank_notes(notes: dict) -> list[str]:
    spec, per_k = notes["spec"], 1e3 * 1000 / notes["spec"].candidates   # ms per 1,000

    def both(key: str, scale: float = per_k) -> str:
        wall, cpu = notes[key]
        return f"{wall * scale:.0f} ms (CPU {cpu * scale:.0f})"
    return [f"ranking API, one core, graph of {spec.nodes:,} nodes / {spec.config_nodes} "
            f"configurable, candidates drawing each node's layout from {spec.node_values} values:"
            f" per 1,000 layout candidates, with a default run's {notes['layout_models']} "
            f"models (its seeds and their partners), cold {both('layout_cold')}, warm "
            f"{both('layout_warm')} (targets 1000 / 100 ms; with seed 0's alone, "
            f"CostModel.load(run, seeds=1), {both('layout_warm_one_seed')}); warm with every "
            f"layout a fresh "
            f"random draw (worst case) {both('layout_fresh')}; {spec.tile_configs:,} tile "
            f"configs cold {both('tile_cold', 1e3)}, warm {both('tile_warm', 1e3)}; load "
            f"average {notes['load_average'][0]:.1f}", _tuner_line(notes["tuner_round"]),
            _tuner_line(notes["tuner_round_growing"]), *_real_lines(notes.get("real"))]


def _tuner_line(t: dict) -> str:
    wall, cpu = t["time"]
    growing = (" (a transformer's: its reference grown again, as when the fastest measured "
               "change)" if t["collection"] == TUNE_GROWING else "")
    return (f"one tuner round (tune_graph) on that graph ({t['config_nodes']} configurable "
            f"nodes): screening {t['proposals']:,} proposals on {t['collection']}'s "
            f"{t['models']} models (`tune`'s default: node learners beside the rankers) and an "
            f"update after {t['history']} measurements{growing}, {wall:.2f} s (CPU {cpu:.2f}; "
            f"target 2 s); the search's reference before it, once per search, "
            f"{t['start'][0]:.2f} s (CPU {t['start'][1]:.2f})")


def _real_lines(real: dict | None) -> list[str]:
    return [f"ranking API on a real graph, {real['file']} ({real['nodes']:,} nodes / "
            f"{real['config_nodes']} configurable, a median of {real['median_distinct']:.0f} "
            f"distinct layouts per node): {real['candidates']:,} candidates cold "
            f"{real['cold'][0] * 1e3:.0f} ms (CPU {real['cold'][1] * 1e3:.0f}), warm "
            f"{real['warm'][0] * 1e3:.0f} ms (CPU {real['warm'][1] * 1e3:.0f})",
            _tuner_line(real["tuner_round"])] if real else []
