"""A live search against the stand-in hardware (hardware.py): the tuner itself (tune_graph) on the dev
valid layout graphs, with configs no file holds, "measured" by a model fitted on every dev graph
(the valid ones included) with 1% noise. THE STAND-IN IS NOT A TPU: its numbers show that the
search and its learning work, not how well they would do on hardware.

Three searches per graph and seed, the same budget and noise stream:
- updated: tune_graph as a user calls it (the model learns from every batch),
- frozen:  tune_graph(learn=False),
- blind:   the same evolution scored at random (no model: measurements alone steer it).
Beside them, `genetic`: what the dataset's own search returned, the file's config of lowest
measured runtime (its thousands of measurements), judged by the same stand-in.
With `--quirks SD` the stand-in adds its fixed per-(node, group, layout) quirks (hardware.py):
the tuner's model is then wrong in a way measurements can teach.
Each search's returned best is judged by the stand-in's noiseless runtime over the default's;
a family's figure is the geometric mean over its graphs (CNN = layout:xla, transformer =
layout:nlp), per seed and over seeds.

    python -m models.evaluation.live_search --run RUN --hardware HW_RUN \
        --data-dir ../shared/tpugraphs_dev --budget 100 --seeds 0 1 2 --out FILE.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

from features.npz.find import list_npz, resolve_npz_root
from features.cache.store import CacheError, StorageError, write_atomically
from features.outputs import OutputPathError, check_file
from models.api import CostModel, MissingModelError, StaleRunError
from models.evaluation.hardware import Hardware
from features.graph.layout_space import LayoutSpace
from models.tuning.tune_graph import tune_graph
from models.tuning.tuner import Blind, TuneSettings, tune

SEARCHES = ("updated", "frozen", "blind")
COLLECTIONS = ("layout:xla:default", "layout:nlp:default")
FAMILY = {"layout:xla:default": "CNN (xla)", "layout:nlp:default": "transformer (nlp)"}


def one_search(model: CostModel, hw: Hardware, search: str, budget: int, seed: int,
               collection: str, settings: TuneSettings, stream: int = 0):
    """The search's TuneResult; its noise drawn from (seed, stream): the same for all three."""
    rng = np.random.default_rng([seed, stream])
    measure = lambda configs: hw.measure(configs, rng)   # noqa: E731
    if search == "blind":
        space = LayoutSpace.of_graph(hw.graph["node_feat"], hw.graph["node_opcode"],
                                     hw.graph["edge_index"], hw.graph["node_config_ids"],
                                     settings.space)
        return tune(measure, space, Blind(seed), budget, seed=seed, settings=settings)
    return tune_graph(model.fresh(), measure, budget=budget, **hw.graph, collection=collection,
                      seed=seed, settings=settings, learn=search == "updated")


def graph_results(model, hw_run, path, collection, budget, seeds, settings, quirks) -> dict:
    hw = Hardware.load(hw_run, path, quirks=quirks)
    out = {"graph": path.stem, "nodes": int(hw.graph["node_config_ids"].size),
           "genetic": genetic_best(hw, path)}
    for search in SEARCHES:
        ratios, measured = [], []
        for seed in seeds:
            r = one_search(model, hw, search, budget, seed, collection, settings,
                           zlib.crc32(path.stem.encode()))
            ratios.append(float(hw.runtime(r.best[None])[0] / hw.default_runtime))
            measured.append(int(len(r.runtimes)))
        out[search] = ratios
        out[f"{search}_measured"] = measured
    return out


def genetic_best(hw: Hardware, path: Path) -> float:
    """The stand-in's runtime, over the default's, of the file's fastest-measured config."""
    with np.load(path) as z:
        best = z["node_config_feat"][np.argmin(z["config_runtime"])].astype(np.int8)
    return float(hw.runtime(best[None])[0] / hw.default_runtime)


def geomean(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def summarise(graphs: list[dict], seeds) -> dict:
    """Per search: the geometric mean over graphs of best / default, per seed and overall, and
    how many returned bests are slower than the default."""
    out = {}
    for search in SEARCHES:
        per_seed = [geomean([g[search][i] for g in graphs]) for i in range(len(seeds))]
        out[search] = {"geomean": geomean([v for g in graphs for v in g[search]]),
                       "per_seed": per_seed,
                       "slower_than_default": sum(v > 1 for g in graphs for v in g[search])}
    out["genetic"] = geomean([g["genetic"] for g in graphs])
    return out


def inputs(args) -> tuple[CostModel, Path]:
    """The tuner's model and the dev npz root, the stand-in's run checked: an error here (a
    missing, stale or damaged run, one without the default collections' models, no valid
    graphs) comes before the searches' minutes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # FamilyMismatch etc.: the collection is named
        model = CostModel.load(args.run, seeds=args.model_seeds)
        hardware = CostModel.load(args.hardware)
    for name, m in ((args.run, model), (args.hardware, hardware)):
        missing = [c for c in COLLECTIONS if c not in m.models]
        if missing:
            raise MissingModelError(f"{name}: no model for {', '.join(missing)}")
    root = resolve_npz_root(args.data_dir)
    empty = [c for c in COLLECTIONS if root is None or not list_npz(root, c, "valid")]
    if empty:
        raise FileNotFoundError(f"{args.data_dir}: no valid graphs of {', '.join(empty)}")
    return model, root


def run(args, model: CostModel, root: Path) -> dict:
    settings = TuneSettings()
    result = {"stand_in": "a cost model fitted on every dev graph, the valid ones included, with "
                          "1% noise: NOT a TPU; the search works, not how well on hardware",
              "run": str(args.run), "hardware": str(args.hardware), "quirks": args.quirks,
              "budget": args.budget,
              "seeds": list(args.seeds), "model_seeds": args.model_seeds, "families": {}}
    for collection in COLLECTIONS:
        files = list_npz(root, collection, "valid")[:args.max_graphs or None]
        start, graphs = time.perf_counter(), []
        for f in files:
            graphs.append(graph_results(model, args.hardware, f, collection, args.budget,
                                        args.seeds, settings, args.quirks))
            print(f"{collection} {f.stem}: " + ", ".join(
                f"{s} {geomean(graphs[-1][s]):.3f}" for s in SEARCHES), flush=True)
        result["families"][FAMILY[collection]] = {
            "collection": collection, "graphs": graphs,
            "seconds": round(time.perf_counter() - start), **summarise(graphs, args.seeds)}
    return result


def format_table(result: dict) -> str:
    lines = [f"best found / compiler default, stand-in runtime, after {result['budget']} "
             f"measurements (geometric mean over graphs; seeds {result['seeds']}; quirks "
             f"{result.get('quirks', 0.0)}); THE STAND-IN IS A MODEL, NOT A TPU",
             f"{'family':<20} {'search':<8} {'geomean':>8}  per seed{'':<16} slower than default"]
    for family, f in result["families"].items():
        for i, s in enumerate(SEARCHES):
            label = f"{family} ({len(f['graphs'])})" if i == 0 else ""
            seeds = " ".join(f"{v:.3f}" for v in f[s]["per_seed"])
            lines.append(f"{label:<20} {s:<8} {f[s]['geomean']:>8.3f}  {seeds:<24} "
                         f"{f[s]['slower_than_default']}")
        lines.append(f"{'':<20} {'genetic':<8} {f['genetic']:>8.3f}  (the file's fastest-"
                     f"measured config, thousands of measurements)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.evaluation.live_search",
                                description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, required=True, help="the tuner's trained run")
    p.add_argument("--hardware", type=Path, required=True,
                   help="the stand-in's run (hardware.py: trained on train + valid)")
    p.add_argument("--data-dir", required=True, help="the dev TpuGraphs tree")
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--model-seeds", type=int, help="the run's first N seed models only")
    p.add_argument("--max-graphs", type=int, default=0, help="per family (0: all)")
    p.add_argument("--quirks", type=float, default=0.0,
                   help="the stand-in's per (node, group, layout) log-runtime sd (hardware.py)")
    p.add_argument("--out", type=Path, help="write the result as JSON")
    args = p.parse_args(argv)
    try:   # before the searches' minutes, not after
        if args.out:
            check_file(args.out)
        model, root = inputs(args)
    except (OutputPathError, StaleRunError, CacheError, OSError, ValueError) as exc:
        # ValueError: CostModel.load's own refusals (seeds=, MissingModelError)
        print(f"live_search: {exc}", file=sys.stderr)
        return 2
    try:
        result = run(args, model, root)
    except KeyboardInterrupt:
        print("live_search: interrupted; nothing written", file=sys.stderr)
        return 130
    print(format_table(result))
    if args.out:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(args.out, lambda tmp: tmp.write_text(json.dumps(result, indent=1)))
        except (OSError, StorageError) as exc:
            print(f"live_search: cannot write {args.out}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
