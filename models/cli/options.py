"""Each command's options for pipeline.py, as option groups: a function adding some options to
a subparser. OPTION_GROUPS says which groups each command has, in --help order.

The model side is imported inside the groups that need it (train's rankers, tune-sim's tuner
settings), so a build or another command's --help does not wait seconds for LightGBM."""
from __future__ import annotations

import argparse
from pathlib import Path

from features import COLLECTIONS, SPLITS, FeatureConfig
from features.rows.feature_set import FEATURE_FAMILIES
from features.rows.table import feature_sets
from features.schema import is_tile
from models.cli.cluster import CONNECT_TIMEOUT_S
from models.overrides import describe

DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "data_cache"


def encode_options(p) -> None:
    p.add_argument("program", type=Path, metavar="PROGRAM",
                   help="HLO text of an XLA program (e.g. jax.jit(f).lower(*args).as_text("
                        "dialect='hlo'), or an XLA dump's .txt)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.npz",
                   help="the layout npz to write (replaced if it exists; missing directories "
                        "are made; no default: required)")


def at_least(low: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    parse.__name__ = "integer"   # argparse names the type in its own errors
    return parse


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def folds(text: str) -> int:
    value = int(text)
    if value < 0 or value == 1:
        raise argparse.ArgumentTypeError(f"must be 0 (no cross-validation) or >= 2, got {value}")
    return value


def run_arg(text: str) -> tuple[str | None, Path]:
    """'DIR' (for every collection) or 'COLLECTION=DIR'."""
    collection, sep, path = text.partition("=")
    return (collection, Path(path)) if sep and collection in COLLECTIONS else (None, Path(text))


def cache_option(holds: str):
    """The --cache-dir option group of a command, saying what that command keeps or finds there."""
    def add(p) -> None:
        p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, metavar="DIR",
                       help=f"{holds} (default: %(default)s)")
    return add


FEATURES_HELD = "feature rows (features/), int8 copies of node_config_feat (packed/) and, " \
                "when no data is found, the generated sample (sample/)"
RUNS_FOUND = ("where trained runs are found (runs/; without --run the newest fitting one, as "
              "--run says)")


def worker_options(p) -> None:
    p.add_argument("--workers", type=at_least(1), default=2, metavar="N",
                   help="processes building feature files in parallel (default: %(default)s)")


def data_dir_option(p) -> None:
    p.add_argument("--data-dir", metavar="DIR",
                   help="TpuGraphs data: the download root, its npz_all/ or npz_all/npz/ "
                        "(default: $TPUGRAPHS_DIR, else ~/data/tpugraphs, else a generated "
                        "sample made under --cache-dir)")


def data_options(p) -> None:
    data_dir_option(p)
    p.add_argument("--no-pack", dest="pack", action="store_false",
                   help="do not keep int8 copies of node_config_feat in the cache")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask cluster: a scheduler address (tcp://host:8786), or "
                        "'local' for a LocalCluster of one worker per core (needs the dask "
                        "extra; see README 'Scaling out') (default: none, local processes)")
    p.add_argument("--scheduler-timeout", type=positive_seconds, default=CONNECT_TIMEOUT_S,
                   metavar="SECONDS",
                   help="seconds the scheduler at --scheduler ADDRESS has to answer before the "
                        "command stops with an error (default: %(default)s)")


def feature_options(p) -> None:
    p.add_argument("--collections", nargs="+", choices=COLLECTIONS, default=list(COLLECTIONS),
                   metavar="COLLECTION",
                   help=f"collections to use, one or more of {', '.join(COLLECTIONS)} "
                        f"(default: all {len(COLLECTIONS)})")
    p.add_argument("--feature", action="append", default=[], metavar="KEY=VALUE",
                   help="a FeatureConfig setting of the feature rows (repeatable; default: "
                        "none changed); seed= picks which configs a graph's row caps and its "
                        "statistics sample keep (the models' seed is train --seed). Keys: "
                        + describe(FeatureConfig, choices={"feature_set": feature_sets()}))


def build_options(p) -> None:
    p.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS), metavar="SPLIT",
                   help=f"splits to build, one or more of {', '.join(SPLITS)} "
                        f"(default: all {len(SPLITS)})")
    p.add_argument("--force", action="store_true", help="rebuild even if cached")


def set_help() -> str:
    from models.training import RANKERS
    from models.training.runs import RUN_SET_PARAMS
    keys = "; ".join(f"{name}: {describe(cls.params_cls, tuple(RUN_SET_PARAMS), defaults=kinds)}"
                     for name, (cls, kinds) in sorted(RANKERS.items()))
    return (f"a ranker parameter (repeatable; default: none changed). Keys of each --ranker, "
            f"with their defaults per collection kind: {keys}")


def train_options(p) -> None:
    from models.training import RANKERS
    from models.training.node_learner import NODE_COLLECTIONS
    from models.training.runs import DEMO, REGRESSION_PARTNER_COLLECTIONS, TrainConfig
    p.add_argument("--ranker", choices=sorted(RANKERS), default="lambdarank",
                   help="lambdarank (LightGBM LambdaRank), regression (LightGBM L2 on log "
                        "runtime) or xgboost (XGBoost rank:pairwise); README 'Rankers' "
                        "(default: %(default)s)")
    p.add_argument("--seeds", type=at_least(1), metavar="N",
                   help="models per collection, with seeds SEED .. SEED+N-1; their per-graph "
                        f"normalised scores are averaged (default: {TrainConfig.seeds}; "
                        f"{DEMO.seeds} in the demo schedule the generated sample trains with, "
                        f"{DEMO.rounds} rounds a model at most)")
    p.add_argument("--seed", type=at_least(0), default=0, metavar="SEED",
                   help="the first model's seed (model i gets SEED+i): bagging and feature "
                        "sampling, the lambdarank sub-groups, the train families held out for "
                        "early stopping; also the --folds split and the random-order "
                        "reference. The feature rows' own sampling is --feature seed= "
                        "(default: %(default)s)")
    p.add_argument("--folds", type=folds, default=0, metavar="K",
                   help="cross-validate over the train and valid graphs together with whole "
                        "model families held out per fold (0 = none, else >= 2; >= the number of families: "
                        "leave-one-family-out) (default: %(default)s)")
    p.add_argument("--without", action="append", default=[], metavar="FAMILY",
                   choices=sorted(FEATURE_FAMILIES),
                   help="leave a feature family out (ablation; repeatable; default: none): "
                        + ", ".join(sorted(FEATURE_FAMILIES)))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=set_help())
    p.add_argument("--allow-no-valid", action="store_true",
                   help="train collections without scorable validation graphs (no validation "
                        "score; early stopping watches train families)")
    p.add_argument("--ranker-alone", action="store_true",
                   help="each seed's ranker alone, without the partner whose scores are "
                        "averaged in by default: a node learner on "
                        f"{' and '.join(NODE_COLLECTIONS)}, a regression beside lambdarank on "
                        f"{' and '.join(REGRESSION_PARTNER_COLLECTIONS)} (README 'Rankers')")


def submit_options(p) -> None:
    p.add_argument("--run", type=run_arg, action="append", default=[],
                   metavar="[COLLECTION=]DIR",
                   help="run serving every collection, or one (repeatable; default: per "
                        "collection the newest run that fits, one whose rows had each file's "
                        "own configs as their reference first)")
    p.add_argument("--allow-other-data", action="store_true",
                   help="accept runs trained on other data (e.g. the generated sample)")
    p.add_argument("--out", type=Path, default=Path("submission.csv"), metavar="FILE",
                   help="the submission CSV to write (default: %(default)s)")


def rank_options(p) -> None:
    p.add_argument("file", type=Path, help="npz file: a graph and its candidate configs; or a "
                                           "program's HLO text (any other file), with --configs")
    p.add_argument("--configs", type=Path, metavar="CONFIGS.npy",
                   help="with an HLO program: the layouts to rank, (c, nc, 18) integers -1..5 "
                        "in a .npy, or an npz holding node_config_feat (default: none)")
    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir whose rows had "
                        "each file's own configs as their reference, else the newest)")
    p.add_argument("--top", type=at_least(1), metavar="K",
                   help="configs to print (default: tile 5, layout all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--collection", choices=COLLECTIONS, metavar="COLLECTION",
                   help=f"model to use, one of {', '.join(COLLECTIONS)} (default: from the "
                        f"file's place in a TpuGraphs tree, else tile:xla / layout:xla:random "
                        f"by its keys; a program's HLO text: its family's 'default' "
                        f"collection, as tune's)")


def tune_sim_options(p) -> None:
    from models.tuning.tuner import TuneSettings      # not tune_sim: it loads the rankers

    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir)")
    p.add_argument("--collections", nargs="+", choices=COLLECTIONS, default=list(COLLECTIONS),
                   metavar="COLLECTION",
                   help=f"collections to simulate, one or more of {', '.join(COLLECTIONS)} "
                        f"(default: all 5)")
    p.add_argument("--round-size", type=at_least(1), default=TuneSettings.batch,
                   metavar="N", help="measurements between two model updates, as `tune`'s "
                                     "(default: %(default)s)")
    p.add_argument("--max-graphs", type=at_least(0), default=0, metavar="N",
                   help="graphs per collection, per fold with --folds (default: 0 = all)")
    p.add_argument("--seed", type=at_least(0), default=0, metavar="N",
                   help="seed of the searches' random picks (one of each round's exploring "
                        "picks, as the tuner's; the same draws for the frozen and the updated "
                        "search) (default: %(default)s)")
    p.add_argument("--folds", type=folds, default=0, metavar="K",
                   help="simulate the train graphs instead of the valid ones, each with the "
                        "run's models fit again without its model family (K folds of whole "
                        "families; fit once, kept in the run as folds-K/) (default: 0 = the "
                        "valid graphs)")
    p.add_argument("--each-seed", action="store_true",
                   help="also simulate each of the run's seeds alone (frozen and updated): "
                        "whether the updates' gain is clear of the seeds' spread")
    p.add_argument("--reference", choices=("pool", "search"), default="pool",
                   help="what fixes each graph's within-graph statistics: pool = the pool's "
                        "own configs (every one measured: no user has that), search = the "
                        "configs `tune` gives its model (drawn around the compiler default; "
                        "a CNN's grown by the model's own search when the run's statistics "
                        "follow its reference) "
                        "(default: %(default)s)")


def live_search_options(p) -> None:
    from models.evaluation.live_search import COLLECTIONS as SEARCHED, SEARCHES

    p.add_argument("--run", type=Path, required=True, metavar="DIR",
                   help="the tuner's trained run (no default: required)")
    p.add_argument("--hardware", type=Path, required=True, metavar="DIR",
                   help="the stand-in's run (models/evaluation/hardware.py: trained on train + "
                        "valid; a model, NOT a TPU) (no default: required)")
    p.add_argument("--data-dir", required=True, metavar="DIR",
                   help="the dev TpuGraphs tree (no default: required)")
    p.add_argument("--collections", nargs="+", choices=SEARCHED, default=list(SEARCHED),
                   metavar="COLLECTION", help=f"one or more of {', '.join(SEARCHED)} "
                                              f"(default: both)")
    p.add_argument("--budget", type=at_least(1), default=100, metavar="N",
                   help="measurements per search (default: %(default)s)")
    p.add_argument("--at", type=at_least(1), nargs="+", default=[20, 50], metavar="N",
                   help="smaller budgets reported too: the best of the first N measurements "
                        "(default: 20 50)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], metavar="N",
                   help="search seeds (default: 0 1 2)")
    p.add_argument("--searches", nargs="+", choices=SEARCHES, default=list(SEARCHES),
                   metavar="SEARCH", help=f"one or more of {', '.join(SEARCHES)} (default: all)")
    p.add_argument("--model-seeds", type=at_least(1), metavar="N",
                   help="the run's first N seed models only (default: all)")
    p.add_argument("--folds", type=folds, default=0, metavar="K",
                   help="search the train graphs, each with the run's models fit without its "
                        "family over K folds (default: 0 = the valid graphs, the run's models)")
    p.add_argument("--max-graphs", type=at_least(0), default=0, metavar="N",
                   help="graphs per model family (default: 0 = all)")
    p.add_argument("--quirks", type=float, default=0.0, metavar="SD",
                   help="the stand-in's per (node, group, layout) log-runtime sd (default: "
                        "%(default)s)")
    p.add_argument("--out", type=Path, metavar="FILE.json",
                   help="write the result as JSON (default: printed only)")


def tune_options(p) -> None:
    p.add_argument("program", type=Path, metavar="PROGRAM",
                   help="a layout npz graph file, or a program's HLO text (any other file)")
    p.add_argument("--measure", required=True, metavar="COMMAND",
                   help="command line run (by the shell) with the path of a .npy of (k, nc, 18) "
                        "int8 configs appended; it prints one runtime per line, lower = faster "
                        "(no default: required)")
    p.add_argument("--budget", type=at_least(1), required=True, metavar="N",
                   help="configs measured at most, the re-measurements that confirm the best "
                        "included (no default: required)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="best.npy, best.json, progress.png and the state a rerun resumes from; "
                        "one tune at a time runs in it (no default: required)")
    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir of the kind "
                        "that tunes the program best: for a CNN one trained with --feature "
                        "reference=drawn, for a transformer one without; else the newest)")
    p.add_argument("--seed", type=at_least(0), default=0,
                   help="the search's seed (default: %(default)s)")
    layouts = [c for c in COLLECTIONS if not is_tile(c)]
    p.add_argument("--collection", choices=layouts, metavar="COLLECTION",
                   help=f"the layout model to search with, one of {', '.join(layouts)} "
                        f"(default: the program's family's 'default' collection, xla or nlp "
                        f"by its opcodes: the search starts from the compiler default, as that "
                        f"collection's did; rank PROGRAM --configs uses the same)")
    p.add_argument("--model-seeds", type=at_least(1), metavar="N",
                   help="score with the run's first N seed models only: faster rounds "
                        "(default: all)")
    from models.tuning.strategies import STRATEGIES
    from models.tuning.tuner import TuneSettings
    p.add_argument("--strategy", choices=sorted(STRATEGIES), default=TuneSettings.strategy,
                   help="what proposes each round's candidates for the model to score: "
                        "evolutionary (mutations and crossover of the best measured) or random "
                        "(valid random layouts) (default: %(default)s)")
    p.add_argument("--restart", action="store_true",
                   help="discard the state an earlier search left in --out (its measurements) "
                        "and start a new one, e.g. with another --measure command (default: "
                        "resume it, refused when the program, run, settings or command differ)")


def report_options(p) -> None:
    p.add_argument("--run", type=Path, metavar="DIR",
                   help="run directory (default: the newest under --cache-dir)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="report directory (default: <run>/report)")


def compare_options(p) -> None:
    p.add_argument("run_a", type=Path, metavar="RUN_A", help="run directory of the baseline")
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="run directory of the change")
    p.add_argument("--on", choices=("cv", "valid"),
                   help="which scores to pair: cv = held-out families of the train and valid "
                        "graphs (both runs trained with --folds; the mean of seeds), valid = the "
                        "valid split (the ensemble's scores, as train prints them) (default: cv "
                        "when both runs have it, else valid, and the table says so)")
    p.add_argument("--families", action="store_true",
                   help="also list every family's mean score in both runs, B's worst first")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def bench_options(p) -> None:
    p.add_argument("--quick", action="store_true", help="small sizes (~2 min), not judged")
    p.add_argument("--repeat", type=at_least(1), default=3, metavar="N",
                   help="runs of every stage; shows median and min-max (default: %(default)s)")
    p.add_argument("--rank-file", type=Path, metavar="FILE",
                   help="a real layout npz: time the ranking API on its graph as well "
                        "(default: none, generated graphs only)")


# command -> its option groups, in --help order
OPTION_GROUPS = {
    "build-features": (cache_option(f"where {FEATURES_HELD} are kept"), worker_options,
                       data_options, feature_options, build_options),
    "train": (cache_option(f"where {FEATURES_HELD} are kept, and the trained run is saved "
                           f"(runs/)"),
              worker_options, data_options, feature_options, train_options),
    "submit": (cache_option(f"{RUNS_FOUND}; {FEATURES_HELD} are kept"), worker_options,
               data_options, submit_options),
    "rank": (cache_option(RUNS_FOUND), rank_options),
    "encode": (encode_options,),
    "report": (cache_option(RUNS_FOUND), report_options),
    "compare": (compare_options,),
    "tune-sim": (cache_option(f"{RUNS_FOUND}; the sample is made here when no data is found"),
                 data_dir_option, tune_sim_options),
    "tune": (cache_option(RUNS_FOUND), tune_options),
    "live-search": (cache_option("with --folds: where the train graphs' feature rows are built"),
                    live_search_options),
    "bench": (cache_option("where bench keeps its generated inputs, their feature rows and "
                           "bench.json (bench/)"),
              worker_options, bench_options),
}
