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
from pathlib import Path
from typing import Sequence

import features
from features import FeatureConfig
from features.cache import store as cache
from features.outputs import check_dir, check_file
from models.cli import interrupts
from models.cli.cluster import connect
from models.cli.messages import error_text, recorded_warnings, warning_lines
from models.cli.options import OPTION_GROUPS
from models.overrides import parse_overrides

# The model side is imported where a command needs it, not here: spawned feature-build workers
# run this file's top level again, and importing LightGBM (which loads scikit-learn) cost each
# of them 1.5 s.


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


def cmd_build_features(args) -> int:
    """Build (or reuse from the cache) the feature rows of every collection and split."""
    cfg = FeatureConfig(**parse_overrides(FeatureConfig, args.feature))
    source = data_source(args.data_dir, args.cache_dir)

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
    from models.training.run_record import RunFeatures
    from models.training.runs import RUN_SET_PARAMS, TrainConfig, on_schedule, train_run
    fcfg = FeatureConfig(**parse_overrides(FeatureConfig, args.feature))
    cfg = TrainConfig(ranker=args.ranker, seed=args.seed, folds=args.folds,
                      overrides=parse_overrides(RANKERS[args.ranker][0].params_cls, args.set,
                                                RUN_SET_PARAMS),
                      allow_no_valid=args.allow_no_valid, without=tuple(args.without),
                      partners=not args.ranker_alone)
    source = data_source(args.data_dir, args.cache_dir)
    cfg = on_schedule(cfg, source.is_sample, args.seeds)
    with connect(args.scheduler, args.scheduler_timeout) as client:
        built = features.build_entries(source.npz_root, args.collections, ("train", "valid"),
                                       fcfg, args.cache_dir, workers=args.workers,
                                       pack=args.pack, client=client)
        entries = {c: (built[c, "train"], built[c, "valid"]) for c in args.collections}
        info = RunFeatures(signature=features.feature_signature(fcfg), settings=asdict(fcfg),
                           data=str(source.npz_root), sample=source.is_sample,
                           train_files={c: source.train_fingerprint(c) for c in args.collections})
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
    source = data_source(args.data_dir, args.cache_dir)
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
    listed = {c: features.load_entry(built[c, "test"], ()) for c in tests}   # graphs, no rows
    rows = submission_rows(choices, {c: built[c, "test"] for c in tests},
                           expected_configs(tests, listed))
    path = write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {path}")
    return 0


def cmd_rank(args) -> int:
    """Rank the configs of one npz file (config_runtime optional), or of a program's HLO text
    (--configs), with a trained run."""
    from models.api import CostModel, rank_file
    from models.cli.ranking_text import format_ranking
    from models.training.run_files import latest_run
    run_dir = args.run or latest_run(cache.runs_root(args.cache_dir), fixed_reference=False)
    with recorded_warnings() as caught:   # said as lines, not as tracebacks
        model = CostModel.load(run_dir)
        ranking = rank_file(model, args.file, collection=args.collection, configs=args.configs)
    # stderr, so that stdout stays the ranking (--json parses as is)
    print(f"ranked by the {ranking.collection} model of {model.description}", file=sys.stderr)
    warning_lines(caught)
    print(format_ranking(ranking, top=args.top, as_json=args.json))
    return 0


def cmd_encode(args) -> int:
    """Write a program's HLO text as a TpuGraphs layout file (its one config: the default)."""
    from features.hlo import encode_file
    with recorded_warnings() as caught:   # an opcode outside the table: a line, not a stop
        path, graph = encode_file(args.program, args.out)
    warning_lines(caught)
    print(f"wrote {path}: {graph['node_opcode'].size} nodes, {graph['node_config_ids'].size} "
          f"configurable, {graph['edge_index'].shape[0]} edges; one config, the compiler "
          f"default (all -1), runtime 0 (not measured)")
    return 0


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
          else format_table(results, args.run_a, args.run_b, args.families))
    return 0


def cmd_bench(args) -> int:
    """Time and measure every stage on real-size generated files (100k-config layout file)."""
    from models.bench.run import bench
    print(bench(args.cache_dir, quick=args.quick, workers=args.workers, repeat=args.repeat,
                rank_file=args.rank_file))
    return 0


def cmd_tune_sim(args) -> int:
    """Simulate autotuning on validation graphs: random search vs the model, frozen and updated."""
    from models.training.run_files import latest_run
    from models.evaluation.tune_sim import SimSettings, fold_train_entries, saved_draws, simulate
    from models.reporting.tune_sim_table import format_draws, format_table
    source = data_source(args.data_dir, args.cache_dir)
    run_dir = args.run or latest_run(cache.runs_root(args.cache_dir))
    settings = SimSettings(round_size=args.round_size, max_graphs=args.max_graphs,
                           each_seed=args.each_seed, folds=args.folds, seed=args.seed,
                           reference=args.reference)
    check_file(run_dir / settings.result_name)    # where the result goes, before the simulation
    entries = (fold_train_entries(run_dir, source.npz_root, args.collections, args.cache_dir)
               if settings.folds else None)     # the fold models' rows
    with recorded_warnings() as caught:
        result = simulate(run_dir, source.npz_root, args.collections, settings,
                          data=source.description, train_entries=entries)
    warning_lines(caught)
    print(format_table(result))
    print(f"saved to {run_dir / settings.result_name}")
    draws = format_draws(saved_draws(run_dir, settings, source.description))
    if draws:
        print(draws)
    return 0


def cmd_tune(args) -> int:
    """Find a fast layout of one program, measuring with your command (resumable)."""
    from features.rows.compiled import compile_notice
    from models.api import CostModel
    from models.api.model_choice import tuner_fixed_reference
    from models.cli.messages import reference_note
    from models.training.run_files import latest_run
    from models.tuning.database import check_free
    from models.tuning.job import TuneJob, kept_default_line, load_program, tune_program
    from models.tuning.tuner import TuneSettings
    check_dir(args.out)      # before the model loads and anything is measured
    check_free(args.out)     # another tune running in it: refused before the model loads too
    job = TuneJob(args.program, args.measure, args.budget, args.out, seed=args.seed,
                  collection=args.collection, restart=args.restart,
                  settings=TuneSettings(strategy=args.strategy))
    with recorded_warnings() as caught:   # said as lines, not as tracebacks
        graph = load_program(args.program)     # its family chooses the run
        fixed = tuner_fixed_reference(graph["node_opcode"], args.collection)
        run_dir = args.run or latest_run(cache.runs_root(args.cache_dir), fixed_reference=fixed)
        model = CostModel.load(run_dir, seeds=args.model_seeds)
        print(f"searching with {model.description}")
        note = reference_note(model.trained.settings.reference == "drawn", fixed)
        if note:
            print(note)
        compile_notice()     # the first round scores with the layout kernels
        try:
            result = tune_program(model, job, str(run_dir), graph=graph)
        finally:
            warning_lines(caught)
    print(f"best: {result.best_runtime:.6g} against the default's {result.default_runtime:.6g} "
          f"({result.speedup:.3f}x faster), {len(result.runtimes)} measurements; wrote "
          f"{args.out}/best.npy, best.json, progress.png")
    if result.verdict is not None:
        print(kept_default_line(result.verdict, result.evidence))
    return 0


def cmd_live_search(args) -> int:
    """Search dev graphs live against a stand-in hardware (a model, NOT a TPU)."""
    from models.evaluation.live_search import inputs, search_all, write_result
    from models.reporting.live_search_table import format_table
    if args.out:
        check_file(args.out)   # before the searches' minutes, not after
    model, root = inputs(args)
    with recorded_warnings() as caught:   # said as lines once the searches end
        result = search_all(args, model, root)
    warning_lines(caught)
    print(format_table(result))
    if args.out:
        write_result(args.out, result)
        print(f"wrote {args.out}")
    return 0


# command -> what runs it (its options: models/cli/options.py)
COMMANDS = {"build-features": cmd_build_features, "train": cmd_train, "submit": cmd_submit,
            "rank": cmd_rank, "encode": cmd_encode, "report": cmd_report, "compare": cmd_compare,
            "tune-sim": cmd_tune_sim, "tune": cmd_tune, "live-search": cmd_live_search,
            "bench": cmd_bench}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's options, or only `command`'s (what main parses: the others' option
    groups import LightGBM and XGBoost, seconds a build or --help need not wait)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in COMMANDS.items():
        p = sub.add_parser(name, help=func.__doc__.splitlines()[0])
        p.set_defaults(func=func)
        for add_options in OPTION_GROUPS[name] if command in (None, name) else ():
            add_options(p)
    return parser


# Commands that write under --cache-dir, which is checked before any work: rank, report and
# compare only read runs there, and tune-sim writes there only the sample when no data is found.
WRITES_CACHE = ("build-features", "train", "submit", "bench")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else "").parse_args(argv)
    # Ctrl-C and SIGTERM: one line and exit 130 for every command (models/cli/interrupts.py)
    resumes = interrupts.rerun_text(args.command, out=getattr(args, "out", None))
    return interrupts.run(args.command, lambda: _run(args), resumes=resumes)


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
        print(f"error: {error_text(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
