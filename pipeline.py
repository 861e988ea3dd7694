"""Rank XLA compiler configurations by predicted runtime (TpuGraphs / Kaggle "Fast or Slow?").

    python pipeline.py build-features
    python pipeline.py train --ranker lambdarank
    python pipeline.py submit
    python pipeline.py rank FILE.npz      # rank one graph's configs with the newest run
    python pipeline.py encode PROGRAM.hlo --out FILE.npz   # a program's HLO text as a graph file
    python pipeline.py report             # HTML report of the newest run

Data: --data-dir, else $TPUGRAPHS_DIR, else ~/data/tpugraphs (the download root, its npz_all/
or npz_all/npz/). With none of them present, a small generated sample is used and said so.
Everything the commands make goes under --cache-dir (default: data_cache/ beside this file).
"""
from __future__ import annotations

import sys

if __name__ == "__main__":   # Ctrl-C while the imports below load (seconds): a line, no traceback
    import signal

    def _stopped(signum, frame):
        print(f"interrupted ({signal.Signals(signum).name}) while starting; nothing was done",
              file=sys.stderr)
        raise SystemExit(130)
    for _signal in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(_signal) is not signal.SIG_IGN:   # nohup's choice stands
            signal.signal(_signal, _stopped)

import argparse
from dataclasses import asdict
import warnings
from pathlib import Path
from typing import Sequence

import features
from features import COLLECTIONS, SPLITS, FeatureConfig
from features.schema import is_tile
from features.cache import store as cache
from features.outputs import check_dir, check_file
from models.cli import interrupts
from models.cli.cluster import CONNECT_TIMEOUT_S, connect
from models.cli.settings import describe, parse_overrides
from features.rows.feature_set import FEATURE_FAMILIES
from features.rows.table import FEATURE_SETS

# The model side is imported where a command needs it, not here: spawned feature-build workers
# run this file's top level again, and importing LightGBM (which loads scikit-learn) cost each
# of them 1.5 s.

DEFAULT_CACHE = Path(__file__).resolve().parent / "data_cache"


def _feature_config(args) -> FeatureConfig:
    return FeatureConfig(**parse_overrides(FeatureConfig, args.feature))


def data_source(data_dir: str | None, cache_dir: Path, sample_spec=None) -> features.DataSource:
    """The data named or found at the default place, else the generated sample (made once
    under the cache): with no download, every command still runs, and says which it used."""
    source = features.resolve_data(data_dir)
    if source is None:
        from models.sample.generate import SampleSpec, ensure_sample
        source = features.sample_source(ensure_sample(cache.sample_root(cache_dir),
                                                      sample_spec or SampleSpec()))
    print(source.description)
    return source


def _source(args) -> features.DataSource:
    return data_source(args.data_dir, args.cache_dir)


def cmd_build_features(args) -> int:
    """Build (or reuse from the cache) the feature rows of every collection and split."""
    cfg = _feature_config(args)
    source = _source(args)

    def log(collection, split, entry, built):
        meta = features.read_meta(entry)
        state = (f"built {meta['files_built_this_run']} files in "
                 f"{meta['wall_seconds_this_run']:.1f}s" if built else "cached")
        print(f"{collection:<20} {split:<5} {meta['n_graphs']:>5} graphs "
              f"{meta['n_rows']:>8} rows  {state:<26} {entry}")

    with connect(args.scheduler, args.scheduler_timeout) as client:
        # every collection and split is tried; bad files are listed together at the end
        features.build_entries(source.npz_root, args.collections, args.splits, cfg,
                               args.cache_dir, log=log, force=args.force,
                               workers=args.workers, pack=args.pack, client=client)
    return 0


def cmd_train(args) -> int:
    """Train one ranker per collection and print the validation table."""
    from models.training import RANKERS
    from models.training.run_files import format_table
    from models.training.runs import RUN_SET_PARAMS, TrainConfig, train_run
    fcfg = _feature_config(args)
    cfg = TrainConfig(ranker=args.ranker, seeds=args.seeds, seed=args.seed, folds=args.folds,
                      overrides=parse_overrides(RANKERS[args.ranker][0].params_cls, args.set,
                                                RUN_SET_PARAMS),
                      allow_no_valid=args.allow_no_valid, without=tuple(args.without),
                      partners=not args.ranker_alone)
    source = _source(args)
    with connect(args.scheduler, args.scheduler_timeout) as client:
        built = features.build_entries(source.npz_root, args.collections, ("train", "valid"),
                                       fcfg, args.cache_dir, workers=args.workers,
                                       pack=args.pack, client=client)
        entries = {c: (built[c, "train"], built[c, "valid"]) for c in args.collections}
        info = {"signature": features.feature_signature(fcfg), "settings": asdict(fcfg),
                "data": str(source.npz_root), "sample": source.is_sample,
                "train_files": {c: source.train_fingerprint(c) for c in args.collections}}
        defaults = {c: features.default_config_rows(valid) for c, (_, valid) in entries.items()}
        run_dir, record = train_run(cfg, entries, cache.runs_root(args.cache_dir), info,
                                    default_rows=defaults, client=client)
    print(format_table(record))
    print(f"run saved to {run_dir}")
    return 0


def cmd_submit(args) -> int:
    """Write submission.csv for every test file, each collection scored by its newest fit run."""
    from models.serving.predict import choose_runs, submission_rows
    from models.serving.submission import expected_configs, files_to_score, write_csv
    check_file(args.out)      # before minutes of work, not after
    source = _source(args)
    tests = files_to_score(source)
    choices = choose_runs(cache.runs_root(args.cache_dir), source, tests, dict(args.run),
                          allow_other_data=args.allow_other_data)
    for c, choice in choices.items():
        print(f"{c:<20} served by {choice.run_dir}" + (f"  (note: {choice.note})"
                                                       if choice.note else ""))
    with connect(args.scheduler, args.scheduler_timeout) as client:
        built = features.build_entries(source.npz_root, tests, ("test",),
                                       {c: choices[c].feature_config for c in tests},
                                       args.cache_dir, workers=args.workers, pack=args.pack,
                                       client=client)
    test_sets = {c: features.load_entry(built[c, "test"]) for c in tests}
    rows = submission_rows(choices, test_sets, expected_configs(tests, test_sets))
    path = write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {path}")
    return 0


def cmd_rank(args) -> int:
    """Rank the configs of one npz file (config_runtime optional), or of a program's HLO text
    (--configs), with a trained run."""
    from models.api import CostModel, format_ranking
    from models.training.run_files import latest_run
    run_dir = args.run or latest_run(cache.runs_root(args.cache_dir))
    with warnings.catch_warnings(record=True) as caught:   # said as lines, not as tracebacks
        warnings.simplefilter("always")
        model = CostModel.load(run_dir)
        ranking = model.rank_file(args.file, collection=args.collection, configs=args.configs)
    # stderr, so that stdout stays the ranking (--json parses as is)
    print(f"ranked by the {ranking.collection} model of {model.description}", file=sys.stderr)
    _warning_lines(caught)
    print(format_ranking(ranking, top=args.top, as_json=args.json))
    return 0


def cmd_encode(args) -> int:
    """Write a program's HLO text as a TpuGraphs layout file (its one config: the default)."""
    from features.hlo import encode_file
    with warnings.catch_warnings(record=True) as caught:   # an unknown opcode: a line, not a stop
        warnings.simplefilter("always")
        path, graph = encode_file(args.program, args.out)
    _warning_lines(caught)
    print(f"wrote {path}: {graph['node_opcode'].size} nodes, {graph['node_config_ids'].size} "
          f"configurable, {graph['edge_index'].shape[0]} edges; one config, the compiler "
          f"default (all -1), runtime 0 (not measured)")
    return 0


def _encode_options(p) -> None:
    p.add_argument("program", type=Path, metavar="PROGRAM",
                   help="HLO text of an XLA program (e.g. jax.jit(f).lower(*args).as_text("
                        "dialect='hlo'), or an XLA dump's .txt)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.npz",
                   help="the layout npz to write (replaced if it exists; missing directories "
                        "are made; no default: required)")


def _warning_lines(caught) -> None:
    """The library's warnings as one stderr line each (once per message), not as tracebacks."""
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"warning: {message}", file=sys.stderr)


def cmd_report(args) -> int:
    """Write an HTML report (validation per graph, features, rounds, timings) of a trained run."""
    from models.reporting.report import write_report
    from models.training.run_files import latest_run
    run_dir = args.run or latest_run(cache.runs_root(args.cache_dir))
    print(f"wrote {write_report(run_dir, args.out)}")
    return 0


def cmd_compare(args) -> int:
    """Compare two runs graph by graph and seed by seed: is B better than A beyond seed noise?"""
    import json
    from models.evaluation.compare import as_json, compare_runs, format_table
    results = compare_runs(args.run_a, args.run_b, args.on)
    print(json.dumps(as_json(results), indent=1) if args.json
          else format_table(results, args.run_a, args.run_b))
    return 0


def cmd_bench(args) -> int:
    """Time and measure every stage on real-size generated files (100k-config layout file)."""
    from models.bench.run import bench
    print(bench(args.cache_dir, quick=args.quick, workers=args.workers, repeat=args.repeat,
                rank_file=args.rank_file))
    return 0


def _at_least(low: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    parse.__name__ = "integer"   # argparse names the type in its own errors
    return parse


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _folds(text: str) -> int:
    value = int(text)
    if value < 0 or value == 1:
        raise argparse.ArgumentTypeError(f"must be 0 (no cross-validation) or >= 2, got {value}")
    return value


def _run_arg(text: str) -> tuple[str | None, Path]:
    """'DIR' (for every collection) or 'COLLECTION=DIR'."""
    collection, sep, path = text.partition("=")
    return (collection, Path(path)) if sep and collection in COLLECTIONS else (None, Path(text))


def _cache_option(holds: str):
    """The --cache-dir option group of a command, saying what that command keeps or finds there."""
    def add(p) -> None:
        p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, metavar="DIR",
                       help=f"{holds} (default: %(default)s)")
    return add


FEATURES_HELD = "feature rows (features/), int8 copies of node_config_feat (packed/) and, " \
                "when no data is found, the generated sample (sample/)"
RUNS_FOUND = "where trained runs are found (runs/; without --run the newest is used)"


def _worker_options(p) -> None:
    p.add_argument("--workers", type=_at_least(1), default=2, metavar="N",
                   help="processes building feature files in parallel (default: %(default)s)")


def _data_dir_option(p) -> None:
    p.add_argument("--data-dir", metavar="DIR",
                   help="TpuGraphs data: the download root, its npz_all/ or npz_all/npz/ "
                        "(default: $TPUGRAPHS_DIR, else ~/data/tpugraphs, else a generated "
                        "sample made under --cache-dir)")


def _data_options(p) -> None:
    _data_dir_option(p)
    p.add_argument("--no-pack", dest="pack", action="store_false",
                   help="do not keep int8 copies of node_config_feat in the cache")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask cluster: a scheduler address (tcp://host:8786), or "
                        "'local' for a LocalCluster of one worker per core (needs the dask "
                        "extra; see README 'Scaling out') (default: none, local processes)")
    p.add_argument("--scheduler-timeout", type=_positive_seconds, default=CONNECT_TIMEOUT_S,
                   metavar="SECONDS",
                   help="seconds the scheduler at --scheduler ADDRESS has to answer before the "
                        "command stops with an error (default: %(default)s)")


def _feature_options(p) -> None:
    p.add_argument("--collections", nargs="+", choices=COLLECTIONS, default=list(COLLECTIONS),
                   metavar="COLLECTION",
                   help=f"collections to use, one or more of {', '.join(COLLECTIONS)} "
                        f"(default: all {len(COLLECTIONS)})")
    p.add_argument("--feature", action="append", default=[], metavar="KEY=VALUE",
                   help="a FeatureConfig setting of the feature rows (repeatable; default: "
                        "none changed); seed= picks which configs a graph's row caps and its "
                        "statistics sample keep (the models' seed is train --seed). Keys: "
                        + describe(FeatureConfig, choices={"feature_set": FEATURE_SETS}))


def _build_options(p) -> None:
    p.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS), metavar="SPLIT",
                   help=f"splits to build, one or more of {', '.join(SPLITS)} "
                        f"(default: all {len(SPLITS)})")
    p.add_argument("--force", action="store_true", help="rebuild even if cached")


def _set_help() -> str:
    from models.training import RANKERS
    from models.training.runs import RUN_SET_PARAMS
    keys = "; ".join(f"{name}: {describe(cls.params_cls, tuple(RUN_SET_PARAMS), defaults=kinds)}"
                     for name, (cls, kinds) in sorted(RANKERS.items()))
    return (f"a ranker parameter (repeatable; default: none changed). Keys of each --ranker, "
            f"with their defaults per collection kind: {keys}")


def _train_options(p) -> None:
    from models.training import RANKERS
    from models.training.node_learner import NODE_COLLECTIONS
    from models.training.runs import REGRESSION_PARTNER_COLLECTIONS, TrainConfig
    p.add_argument("--ranker", choices=sorted(RANKERS), default="lambdarank",
                   help="lambdarank (LightGBM LambdaRank), regression (LightGBM L2 on log "
                        "runtime) or xgboost (XGBoost rank:pairwise); README 'Rankers' "
                        "(default: %(default)s)")
    p.add_argument("--seeds", type=_at_least(1), default=TrainConfig.seeds, metavar="N",
                   help="models per collection, with seeds SEED .. SEED+N-1; their per-graph "
                        "normalised scores are averaged (default: %(default)s)")
    p.add_argument("--seed", type=_at_least(0), default=0, metavar="SEED",
                   help="the first model's seed (model i gets SEED+i): bagging and feature "
                        "sampling, the lambdarank sub-groups, the train families held out for "
                        "early stopping; also the --folds split and the random-order "
                        "reference. The feature rows' own sampling is --feature seed= "
                        "(default: %(default)s)")
    p.add_argument("--folds", type=_folds, default=0, metavar="K",
                   help="cross-validate over train graphs with whole model families held out per "
                        "fold (0 = none, else >= 2; >= the number of families: "
                        "leave-one-family-out) (default: %(default)s)")
    p.add_argument("--without", action="append", default=[], metavar="FAMILY",
                   choices=sorted(FEATURE_FAMILIES),
                   help="leave a feature family out (ablation; repeatable; default: none): "
                        + ", ".join(sorted(FEATURE_FAMILIES)))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=_set_help())
    p.add_argument("--allow-no-valid", action="store_true",
                   help="train collections without scorable validation graphs (no validation "
                        "score; early stopping watches train families)")
    p.add_argument("--ranker-alone", action="store_true",
                   help="each seed's ranker alone, without the partner whose scores are "
                        "averaged in by default: a node learner on "
                        f"{' and '.join(NODE_COLLECTIONS)}, a regression beside lambdarank on "
                        f"{' and '.join(REGRESSION_PARTNER_COLLECTIONS)} (README 'Rankers')")


def _submit_options(p) -> None:
    p.add_argument("--run", type=_run_arg, action="append", default=[],
                   metavar="[COLLECTION=]DIR",
                   help="run serving every collection, or one (repeatable; default: per "
                        "collection the newest run that fits)")
    p.add_argument("--allow-other-data", action="store_true",
                   help="accept runs trained on other data (e.g. the generated sample)")
    p.add_argument("--out", type=Path, default=Path("submission.csv"), metavar="FILE",
                   help="the submission CSV to write (default: %(default)s)")


def _rank_options(p) -> None:
    p.add_argument("file", type=Path, help="npz file: a graph and its candidate configs; or a "
                                           "program's HLO text (any other file), with --configs")
    p.add_argument("--configs", type=Path, metavar="CONFIGS.npy",
                   help="with an HLO program: the layouts to rank, (c, nc, 18) integers -1..5 "
                        "in a .npy, or an npz holding node_config_feat (default: none)")
    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir)")
    p.add_argument("--top", type=_at_least(1), metavar="K",
                   help="configs to print (default: tile 5, layout all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--collection", choices=COLLECTIONS, metavar="COLLECTION",
                   help=f"model to use, one of {', '.join(COLLECTIONS)} (default: from the "
                        f"file's place in a TpuGraphs tree, else tile:xla / layout:xla:random "
                        f"by its keys)")


def cmd_tune_sim(args) -> int:
    """Simulate autotuning on validation graphs: random search vs the model, frozen and updated."""
    from models.training.run_files import latest_run, read_run
    from models.evaluation.tune_sim import SimSettings, saved_draws, simulate
    from models.reporting.tune_sim_table import format_draws, format_table
    source = _source(args)
    run_dir = args.run or latest_run(cache.runs_root(args.cache_dir))
    settings = SimSettings(round_size=args.round_size, max_graphs=args.max_graphs,
                           each_seed=args.each_seed, folds=args.folds, seed=args.seed)
    check_file(run_dir / settings.result_name)    # where the result goes, before the simulation
    entries = None
    if settings.folds:      # the fold models' rows: the run's feature settings, its train split
        record = read_run(run_dir)
        fcfg = FeatureConfig(**record["features"]["settings"])
        wanted = [c for c in args.collections if c in record["metrics"]]
        built = features.build_entries(source.npz_root, wanted, ("train",), fcfg, args.cache_dir)
        entries = {c: built[c, "train"] for c in wanted}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = simulate(run_dir, source.npz_root, args.collections, settings,
                          data=source.description, train_entries=entries)
    _warning_lines(caught)
    print(format_table(result))
    print(f"saved to {run_dir / settings.result_name}")
    draws = format_draws(saved_draws(run_dir, settings, source.description))
    if draws:
        print(draws)
    return 0


def _tune_sim_options(p) -> None:
    from models.tuning.tuner import TuneSettings      # not tune_sim: it loads the rankers

    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir)")
    p.add_argument("--collections", nargs="+", choices=COLLECTIONS, default=list(COLLECTIONS),
                   metavar="COLLECTION",
                   help=f"collections to simulate, one or more of {', '.join(COLLECTIONS)} "
                        f"(default: all 5)")
    p.add_argument("--round-size", type=_at_least(1), default=TuneSettings.batch,
                   metavar="N", help="measurements between two model updates, as `tune`'s "
                                     "(default: %(default)s)")
    p.add_argument("--max-graphs", type=_at_least(0), default=0, metavar="N",
                   help="graphs per collection, per fold with --folds (default: 0 = all)")
    p.add_argument("--seed", type=_at_least(0), default=0, metavar="N",
                   help="seed of the searches' random picks (one of each round's exploring "
                        "picks, as the tuner's; the same draws for the frozen and the updated "
                        "search) (default: %(default)s)")
    p.add_argument("--folds", type=_folds, default=0, metavar="K",
                   help="simulate the train graphs instead of the valid ones, each with the "
                        "run's models fit again without its model family (K folds of whole "
                        "families; fit once, kept in the run as folds-K/) (default: 0 = the "
                        "valid graphs)")
    p.add_argument("--each-seed", action="store_true",
                   help="also simulate each of the run's seeds alone (frozen and updated): "
                        "whether the updates' gain is clear of the seeds' spread")


def cmd_tune(args) -> int:
    """Find a fast layout of one program, measuring with your command (resumable)."""
    from features.rows.compiled import compile_notice
    from models.api import CostModel
    from models.training.run_files import latest_run
    from models.tuning.session import TuneJob, check_free, tune_program
    check_dir(args.out)      # before the model loads and anything is measured
    check_free(args.out)     # another tune running in it: refused before the model loads too
    run_dir = args.run or latest_run(cache.runs_root(args.cache_dir))
    job = TuneJob(args.program, args.measure, args.budget, args.out, seed=args.seed,
                  collection=args.collection)
    with warnings.catch_warnings(record=True) as caught:   # said as lines, not as tracebacks
        warnings.simplefilter("always")
        model = CostModel.load(run_dir, seeds=args.model_seeds)
        print(f"searching with {model.description}")
        compile_notice()     # the first round scores with the layout kernels
        try:
            result = tune_program(model, job, str(run_dir))
        finally:
            _warning_lines(caught)
    print(f"best: {result.best_runtime:.6g} against the default's {result.default_runtime:.6g} "
          f"({result.speedup:.3f}x faster), {len(result.runtimes)} measurements; wrote "
          f"{args.out}/best.npy, best.json, progress.png")
    return 0


def _tune_options(p) -> None:
    p.add_argument("program", type=Path, metavar="PROGRAM",
                   help="a layout npz graph file, or a program's HLO text (any other file)")
    p.add_argument("--measure", required=True, metavar="COMMAND",
                   help="command line run (by the shell) with the path of a .npy of (k, nc, 18) "
                        "int8 configs appended; it prints one runtime per line, lower = faster "
                        "(no default: required)")
    p.add_argument("--budget", type=_at_least(1), required=True, metavar="N",
                   help="configs measured at most, the re-measurements that confirm the best "
                        "included (no default: required)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="best.npy, best.json, progress.png and the state a rerun resumes from; "
                        "one tune at a time runs in it (no default: required)")
    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir)")
    p.add_argument("--seed", type=_at_least(0), default=0,
                   help="the search's seed (default: %(default)s)")
    layouts = [c for c in COLLECTIONS if not is_tile(c)]
    p.add_argument("--collection", choices=layouts, metavar="COLLECTION",
                   help=f"the layout model to search with, one of {', '.join(layouts)} "
                        f"(default: the program's family's 'default' collection)")
    p.add_argument("--model-seeds", type=_at_least(1), metavar="N",
                   help="score with the run's first N seed models only: faster rounds "
                        "(default: all)")


def _report_options(p) -> None:
    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="report directory (default: <run>/report)")


def _compare_options(p) -> None:
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="run directory of the baseline")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="run directory of the change")
    p.add_argument("--on", choices=("cv", "valid"),
                   help="which scores to pair: cv = held-out families of the train graphs "
                        "(both runs trained with --folds; the mean of seeds), valid = the valid "
                        "split (the ensemble's scores, as train prints them) (default: cv when "
                        "both runs have it, else valid, and the table says so)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _bench_options(p) -> None:
    p.add_argument("--quick", action="store_true", help="small sizes (~2 min), not judged")
    p.add_argument("--repeat", type=_at_least(1), default=3, metavar="N",
                   help="runs of every stage; shows median and min-max (default: %(default)s)")
    p.add_argument("--rank-file", type=Path, metavar="FILE",
                   help="a real layout npz: time the ranking API on its graph as well "
                        "(default: none, generated graphs only)")


# command -> (what runs it, its option groups in --help order)
COMMANDS = {
    "build-features": (cmd_build_features, (_cache_option(f"where {FEATURES_HELD} are kept"),
                                            _worker_options, _data_options, _feature_options,
                                            _build_options)),
    "train": (cmd_train, (_cache_option(f"where {FEATURES_HELD} are kept, and the trained run "
                                        f"is saved (runs/)"),
                          _worker_options, _data_options, _feature_options, _train_options)),
    "submit": (cmd_submit, (_cache_option(f"{RUNS_FOUND}; {FEATURES_HELD} are kept"),
                            _worker_options, _data_options, _submit_options)),
    "rank": (cmd_rank, (_cache_option(RUNS_FOUND), _rank_options)),
    "encode": (cmd_encode, (_encode_options,)),
    "report": (cmd_report, (_cache_option(RUNS_FOUND), _report_options)),
    "compare": (cmd_compare, (_compare_options,)),
    "tune-sim": (cmd_tune_sim, (_cache_option(f"{RUNS_FOUND}; the sample is made here when "
                                              f"no data is found"),
                                _data_dir_option, _tune_sim_options)),
    "tune": (cmd_tune, (_cache_option(RUNS_FOUND), _tune_options)),
    "bench": (cmd_bench, (_cache_option("where bench keeps its generated inputs, their feature "
                                        "rows and bench.json (bench/)"),
                          _worker_options, _bench_options)),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's options, or only `command`'s (what main parses: the others' option
    groups import LightGBM and XGBoost, seconds a build or --help need not wait)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (func, option_groups) in COMMANDS.items():
        p = sub.add_parser(name, help=func.__doc__.splitlines()[0])
        p.set_defaults(func=func)
        for add_options in option_groups if command in (None, name) else ():
            add_options(p)
    return parser


# Commands that write under --cache-dir, which is checked before any work: rank, report and
# compare only read runs there, and tune-sim writes there only the sample when no data is found.
WRITES_CACHE = ("build-features", "train", "submit", "bench")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else "").parse_args(argv)
    # Ctrl-C and SIGTERM: one line and exit 130 for every command (models/cli/interrupts.py)
    return interrupts.run(args.command, lambda: _run(args), resumes=_what_a_rerun_resumes(args))


def _what_a_rerun_resumes(args) -> str | None:
    """What an interrupted command keeps, for its one line (None: a rerun starts again)."""
    if args.command == "tune":
        return f"the measurements so far are kept in {args.out}/state"
    if args.command in WRITES_CACHE:
        return "the feature files it finished are cached"
    return None


def _run(args) -> int:
    from models.serving.stale import StaleRunError
    try:
        if args.command in WRITES_CACHE:
            check_dir(args.cache_dir)
        removed = features.reclaim_stale(args.cache_dir) if "cache_dir" in args else []
        if removed:
            print(f"removed {len(removed)} temporaries left under {args.cache_dir} by runs that "
                  f"ended early")
        return args.func(args)
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        sys.stderr.close()
        return 0
    except (features.DataFormatError, StaleRunError, OSError, cache.CacheError,
            ValueError) as exc:   # ValueError covers models.serving.submission.SubmissionError
        print(f"error: {_error_text(exc)}", file=sys.stderr)
        return 2


def _error_text(exc: BaseException) -> str:
    """An OSError as 'PATH: reason' (its repr-like str reads '[Errno 21] ...: 'PATH''), the
    others as they are."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        also = f" -> {exc.filename2}" if exc.filename2 is not None else ""
        return f"{exc.filename}{also}: {exc.strerror}"
    return str(exc)


if __name__ == "__main__":
    raise SystemExit(main())
