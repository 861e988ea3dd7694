"""Rank XLA compiler configurations by predicted runtime (TpuGraphs / Kaggle "Fast or Slow?").

    python pipeline.py build-features
    python pipeline.py train --ranker lambdarank
    python pipeline.py submit

Data: --data-dir, else $TPUGRAPHS_DIR, else ~/data/tpugraphs (the download root, its npz_all/
or npz_all/npz/). With none of them present, a small generated sample is used and said so.
Everything the commands make goes under --cache-dir (default: data_cache/ beside this file).
"""
from __future__ import annotations

import argparse
import ast
from dataclasses import asdict
import sys
from pathlib import Path
from typing import Sequence

import features
from features import COLLECTIONS, SPLITS, FeatureConfig
from features.io import count_configs, list_npz
from features import bench as fb
from models import RANKERS
from models.bench import format_bench, run_bench
from models.predict import StaleRunError, check_run, read_run, submission_rows
from models.runs import TrainConfig, format_table, latest_run, train_run
from models.submission import SubmissionError, write_csv

DEFAULT_CACHE = Path(__file__).resolve().parent / "data_cache"


def parse_settings(pairs: Sequence[str]) -> dict:
    """['num_leaves=63', 'gain=linear'] -> {'num_leaves': 63, 'gain': 'linear'}."""
    out = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


def _feature_config(args) -> FeatureConfig:
    return FeatureConfig(**parse_settings(args.feature))


def _source(args):
    source = features.resolve_data(args.data_dir, args.cache_dir)
    print(source.description)
    return source


def cmd_build_features(args) -> int:
    """Build (or reuse from the cache) the feature rows of every collection and split."""
    source, cfg = _source(args), _feature_config(args)
    for collection in args.collections:
        for split in args.splits:
            entry, built = features.build_entry(source.npz_root, collection, split, cfg,
                                                args.cache_dir, force=args.force,
                                                workers=args.workers, pack=args.pack)
            meta = features.read_meta(entry)
            state = (f"built {meta['files_built_this_run']} files in "
                     f"{meta['wall_seconds_this_run']:.1f}s" if built else "cached")
            print(f"{collection:<20} {split:<5} {meta['n_graphs']:>5} graphs "
                  f"{meta['n_rows']:>8} rows  {state:<26} {entry}")
    return 0


def cmd_train(args) -> int:
    """Train one ranker per collection and print the validation table."""
    source, fcfg = _source(args), _feature_config(args)
    cfg = TrainConfig(ranker=args.ranker, seeds=args.seeds, seed=args.seed, folds=args.folds,
                      overrides=parse_settings(args.set))
    data = {}
    for c in args.collections:
        if not list_npz(source.npz_root, c, "train"):
            print(f"{c}: no train files, skipped")
            continue
        data[c] = tuple(features.load_or_build(source.npz_root, c, s, fcfg, args.cache_dir,
                                               workers=args.workers) for s in ("train", "valid"))
    info = {"signature": features.feature_signature(fcfg), "settings": asdict(fcfg),
            "data": str(source.npz_root), "sample": source.is_sample}
    run_dir, record = train_run(cfg, data, args.cache_dir / "runs", info)
    print(format_table(record))
    print(f"run saved to {run_dir}")
    return 0


def cmd_submit(args) -> int:
    """Write submission.csv from a trained run (default: the newest) for every test file."""
    source = _source(args)
    run_dir = args.run or latest_run(args.cache_dir / "runs")
    record = read_run(run_dir)
    fcfg = FeatureConfig(**record["features"]["settings"])
    tests = {c: list_npz(source.npz_root, c, "test") for c in args.collections}
    tests = {c: files for c, files in tests.items() if files}
    check_run(record, run_dir, tests, features.feature_signature(fcfg))
    test_sets = {c: features.load_or_build(source.npz_root, c, "test", fcfg, args.cache_dir,
                                           workers=args.workers) for c in tests}
    expected = {f"{c}:{f.stem}": count_configs(f) for c, files in tests.items() for f in files}
    rows = submission_rows(run_dir, test_sets, expected)
    path = write_csv(args.out, rows)
    print(f"used run {run_dir}\nwrote {len(rows)} rows to {path}")
    return 0


def cmd_bench(args) -> int:
    """Time and measure every stage on real-size generated files (100k-config layout file)."""
    spec = fb.QUICK if args.quick else fb.BenchSpec()
    stages, notes = run_bench(args.cache_dir, spec, workers=args.workers)
    print(format_bench(stages, notes))
    return 0


COMMANDS = {"build-features": cmd_build_features, "train": cmd_train, "submit": cmd_submit,
            "bench": cmd_bench}


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", help="TpuGraphs root (default: $TPUGRAPHS_DIR, then "
                                           "~/data/tpugraphs, then the generated sample)")
    common.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help=f"where features, runs and the sample go (default {DEFAULT_CACHE})")
    common.add_argument("--collections", nargs="+", choices=COLLECTIONS, default=list(COLLECTIONS))
    common.add_argument("--feature", action="append", default=[], metavar="KEY=VALUE",
                        help="feature setting, e.g. feature_set=basic (repeatable)")
    common.add_argument("--workers", type=int, default=2,
                        help="processes building feature files in parallel (default 2)")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in COMMANDS.items():
        p = sub.add_parser(name, parents=[common], help=func.__doc__.splitlines()[0])
        p.set_defaults(func=func)
        if name == "build-features":
            p.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
            p.add_argument("--force", action="store_true", help="rebuild even if cached")
            p.add_argument("--no-pack", dest="pack", action="store_false",
                           help="do not keep int8 copies of node_config_feat in the cache")
        elif name == "train":
            p.add_argument("--ranker", choices=sorted(RANKERS), default="lambdarank")
            p.add_argument("--seeds", type=int, default=1, help="models averaged per collection")
            p.add_argument("--seed", type=int, default=0, help="first seed")
            p.add_argument("--folds", type=int, default=0, help="k-fold CV over train graphs")
            p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                           help="ranker parameter, e.g. num_leaves=63 (repeatable)")
        elif name == "bench":
            p.add_argument("--quick", action="store_true", help="small sizes, seconds not minutes")
        else:
            p.add_argument("--run", type=Path, help="run directory (default: the newest)")
            p.add_argument("--out", type=Path, default=Path("submission.csv"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        removed = features.reclaim_stale(args.cache_dir)
        if removed:
            print(f"removed {len(removed)} temporaries left under {args.cache_dir} by runs that "
                  f"ended early")
        return args.func(args)
    except (features.DataFormatError, StaleRunError, SubmissionError, FileNotFoundError,
            ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
