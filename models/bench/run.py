"""`pipeline.py bench`: every stage from decompression to prediction on real-size files."""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from features import FeatureConfig, build_entry
from . import feature_stages as fb
from features.candidates import read_candidates
from features.cache import write_atomically
from features.io import packed_path

from . import projection as pj
from . import train as tb
from .rank import QUICK_RANK, RankSpec, format_rank_notes, rank_notes

ONE_FILE_ENTRY = "build an entry of one tile file ({workers} workers)"
POOL_START = "start {workers} build workers, stop them"
TILE_TRAIN = f"train lambdarank (tile): load, 4 fits of {tb.ROUNDS} rounds, predict"
BASELINE = "python + imports (baseline)"
FEW_CONFIGS_BUILD = f"build the layout file's graph with {fb.FEW_CONFIGS} configs"
FLOOR_TARGET = 1.5  # full-size build time / the decompression floor
PIPELINE = Path(__file__).resolve().parents[2] / "pipeline.py"
PREFIX_EXAMPLE = 20_000   # the projection is also printed for train files read this far
RSS_MARGIN_MB = 1024  # full-size peak RSS target: 3 x the int8 copy + this


@dataclass(frozen=True)
class BenchResult:
    spec: fb.BenchSpec
    inputs: fb.Inputs
    conditions: fb.Conditions  # taken before the run
    load_after: tuple[float, float, float]
    stages: list[fb.Stage]
    notes: dict  # medians over rounds of what the stages returned
    units: pj.UnitCosts | None = None   # derived from stages and notes (unit_costs)

    @property
    def judged(self) -> bool:
        """The targets only apply to the full-size files."""
        return self.spec == fb.BenchSpec()


def run_bench(cache_root: Path, spec: fb.BenchSpec, *, workers: int = 2, repeat: int = 3,
              rank_file: Path | None = None, log=print) -> BenchResult:
    """Generate (once) the real-size inputs, then run every stage once per round, `repeat`
    rounds, so each stage's run i pairs with the floor's run i."""
    if repeat < 1:
        raise ValueError(f"bench needs at least one run per stage, got --repeat {repeat}")
    if rank_file is not None:   # a bad file fails now, not after the rounds
        read_candidates(Path(rank_file), "layout:xla:random")
    before = fb.conditions()
    root = fb.bench_root(cache_root, spec)
    inputs = fb.ensure_inputs(root, spec)
    log(f"inputs under {root} ({'generated now' if inputs.generated else 'reused'})")
    warm_s = _warm_kernels(inputs, root / "cache", log)
    record = fb.Recorder(log)
    rounds = []
    for i in range(repeat):
        log(f"round {i + 1} of {repeat}")
        rounds.append(_round(record, spec, inputs, root / "cache", workers))
    # The ranking API is timed once, after the rounds: it trains its own models first.
    notes = {**fb.median_notes(rounds),
             "ranking": rank_notes(replace(QUICK_RANK if spec == fb.QUICK else RankSpec(),
                                           real_file=str(rank_file or "")), log),
             "command_s": _command_start(repeat), "warm_kernels_s": warm_s}
    result = BenchResult(spec, inputs, before, os.getloadavg(), list(record.stages.values()),
                         notes)
    result = replace(result, units=unit_costs(result, workers))
    write_atomically(root / "bench.json", lambda tmp: tmp.write_text(json.dumps(
        _record(result), indent=1, default=str)))
    return result


def _warm_kernels(inputs: fb.Inputs, cache: Path, log) -> float:
    """Build the few-configs file untimed, with default settings and with all configs (whose
    memory-mapped int8 copy is a read-only array, another type to Numba), so every kernel the
    stages call is in Numba's on-disk cache before round 1. After an edit to
    features/kernels.py the first build compiles them (about 100 s here), and billing that to
    round 1 made the default build's median the slower of its two other runs. Returns the
    warm-up's seconds. What it leaves in `cache`, round 1 clears."""
    log("  loading Numba's kernels, compiling any not cached (untimed) ...")
    return sum(fb.measure(fb.build_stage, inputs.few_configs_root, "layout:xla:random", cache,
                          1, cfg)[0].seconds for cfg in (FeatureConfig(), fb.ALL_CONFIGS))


def _command_start(repeat: int) -> float:
    """Median wall seconds of `python pipeline.py --help`: what starting a command costs (the
    interpreter and every import) before it does any work. It leaves out loading each Numba
    kernel from its cache, which happens at the kernel's first call, so it is a lower bound."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, str(PIPELINE), "--help"], check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _record(r: BenchResult) -> dict:
    """bench.json: how the figures were made and what they were, for `projection_for`."""
    return {"spec": asdict(r.spec), "conditions": asdict(r.conditions), "load_after": r.load_after,
            "inputs_generated": r.inputs.generated, "units": asdict(r.units), "notes": r.notes,
            "stages": {s.name: {"median_s": s.seconds, "runs_s": [x.seconds for x in s.runs],
                                "peak_rss_mb": s.peak_rss_mb} for s in r.stages}}


def projection_for(npz_root: Path, bench_json: Path, rounds: dict[str, int] | None = None,
                   ) -> list[pj.Projection]:
    """The projection for the data under npz_root, from the unit costs a bench run saved;
    rounds: per collection, the rounds a run trained (default: the upper bound)."""
    saved = json.loads(Path(bench_json).read_text())["units"]
    # fields UnitCosts no longer has are left out: fit_memory (older benches) counted the
    # matrix itself, which the projection now adds apart
    units = pj.UnitCosts(**{f.name: saved[f.name] for f in fields(pj.UnitCosts)
                            if f.name in saved})
    return [pj.project(c, n, units, rounds=(rounds or {}).get(c))
            for c, n in pj.counts_of(npz_root).items()]


def _round(run: fb.Recorder, spec: fb.BenchSpec, inputs: fb.Inputs, work: Path,
           workers: int) -> dict:
    """Every stage once, starting from an empty cache; returns what the stages reported.

    A new stage is one `run(name, fn, *args, items=..., unit=...)` line; fn must be importable
    by name, as it runs in a spawned child."""
    shutil.rmtree(work, ignore_errors=True)
    big, npz_root, packed = inputs.layout_file, inputs.npz_root, work / "packed"
    c, chunk = spec.layout_configs, FeatureConfig().chunk_mb
    run(BASELINE, fb.baseline, 0)
    run("floor: numpy.load node_config_feat", fb.decompress_floor, big, items=c, unit="configs")
    run("floor: inflate only, as the loader does", fb.inflate_floor, big, items=c,
        unit="configs")
    run("read: stream -> int8 copy in cache", fb.read_stage, big, packed, items=c,
        unit="configs")
    run("read: memory-map the int8 copy", fb.read_stage, big, packed, items=c, unit="configs")
    # A default build keeps only the configs it uses and leaves no int8 copy, so every build of
    # it is cold; an all-configs build makes the copy, which its rebuilds memory-map
    packed_path(big, packed).unlink()
    rows = run("build layout file, default settings, cold (npz)", fb.build_stage, npz_root,
               "layout:xla:random", work, 1, FeatureConfig(), items=c, unit="configs")
    for state in ("cold (npz)", "warm (int8 copy)"):
        run(f"build layout file, all configs, {state}", fb.build_stage, npz_root,
            "layout:xla:random", work, 1, fb.ALL_CONFIGS, items=c, unit="configs")
    run(FEW_CONFIGS_BUILD, fb.build_stage, inputs.few_configs_root, "layout:xla:random", work, 1,
        FeatureConfig(), items=1, unit="files")
    split = run("split: read / per-graph / rows / per-config", fb.split_stage, big, packed, chunk,
                items=c, unit="configs")
    per_config = {}
    for n in spec.config_steps:
        per_config[n] = run(f"per-config features, {n:,} configs", fb.per_config_stage, big,
                            packed, n, chunk, items=n, unit="configs")
    tile_rows = run(f"build tile collection ({spec.tile_kernels} kernels, {workers} workers)",
                    fb.build_stage, npz_root, "tile:xla", work, workers,
                    items=spec.tile_kernels, unit="files")
    entry, _ = build_entry(npz_root, "tile:xla", "train", fb.ALL_CONFIGS, work, workers=workers)
    fits = run(TILE_TRAIN, tb.train_stage, entry, items=tile_rows, unit="rows")
    layout_entry, _ = build_entry(npz_root, "layout:xla:random", "train", fb.ALL_CONFIGS, work)
    layout_fit = run(f"train lambdarank (layout): {', '.join(f'{n:,}' for n in tb.LAYOUT_ROWS)} "
                     f"rows, {tb.LAYOUT_ROUNDS} rounds", tb.layout_stage, layout_entry,
                     items=sum(tb.LAYOUT_ROWS), unit="rows")
    run(ONE_FILE_ENTRY.format(workers=workers), fb.build_stage, inputs.one_file_root, "tile:xla",
        work, workers)
    run(POOL_START.format(workers=workers), fb.pool_start_stage, workers)
    return {"layout_rows": rows, "split": split, "per_config_seconds": per_config,
            "tile_rows": tile_rows, "train": fits, "layout_train": layout_fit,
            "int8_mb": c * spec.layout_config_nodes * 18 / 2**20}


def unit_costs(r: BenchResult, workers: int) -> pj.UnitCosts:
    """What a unit of work costs, from the stages' medians (see models/bench/projection.py)."""
    stage = {s.name: s.seconds for s in r.stages}
    s, notes = r.spec, r.notes
    c, nc = s.layout_configs, s.layout_config_nodes
    graph, static = notes["split"]["per_graph"], notes["split"]["static"]
    # The same graph with FEW_CONFIGS configs, built in a fresh process as the others are, costs
    # what a file and its entry cost besides the configs: loading the kernels, the graph's
    # tables, the entry's assembly. What the two builds cost beyond it is their configs':
    # default = nc * (read_c * read + done * featurize); every = nc * c * (read + featurize).
    few = stage[FEW_CONFIGS_BUILD]
    default, every = (stage[f"build layout file, {k}, cold (npz)"] - few
                      for k in ("default settings", "all configs"))
    # A default build streams the file and an all-configs one writes its int8 copy, which costs
    # more per config: featurize takes that difference, at most the read's own cost
    read_c = pj.configs_read(c, FeatureConfig())
    done = pj.featurized(read_c, FeatureConfig().max_train_configs_layout)
    per_both = max(every, 0.0) / (c * nc)
    read = max((default / nc - done * per_both) / max(read_c - done, 1.0), 0.0)
    featurize = max(per_both - read, 0.0)
    tile_build = next(t for name, t in stage.items() if name.startswith("build tile collection"))
    fit = tb.train_costs(notes["train"])
    entry = stage[ONE_FILE_ENTRY.format(workers=workers)]
    load, entry_load = tb.load_costs(notes["train"])
    return pj.UnitCosts(read=read, featurize=featurize, graph=graph / s.layout_nodes,
                        static=static / nc, tile_file=tile_build * workers / s.tile_kernels,
                        entry=entry, layout_entry=max(few - graph - static, 0.0),
                        pool=stage[POOL_START.format(workers=workers)],
                        load=load, entry_load=entry_load,
                        layout_round=tb.layout_round_cost(notes["layout_train"]),
                        baseline_mb=notes["train"]["start_mb"],
                        **tb.memory_costs(notes["train"]),
                        train_round=fit.round, train=fit.row, pair=fit.pair,
                        layout_row=tb.layout_row_cost(notes["layout_train"]), watched=fit.watched,
                        predict=fit.predict, tile_columns=int(notes["train"]["columns"]),
                        command=notes.get("command_s", 0.0),
                        layout_columns=int(notes["ranking"]["parts"]["columns"]), workers=workers)


def format_bench(result: BenchResult) -> str:
    return "\n".join([*_header(result), "", *_table(result.stages), "", *_verdicts(result),
                      *_notes(result.notes), "", *_projection(result)])


def _projection(r: BenchResult) -> list[str]:
    u = r.units
    if u is None:
        return []
    return [f"unit costs (one core): read {u.read * 1e9:.1f} ns and featurize "
            f"{u.featurize * 1e9:.1f} ns per (config x configurable node), "
            f"{u.graph * 1e6:.1f} us per graph node, {u.static * 1e3:.2f} ms per configurable "
            f"node's static tables, {u.tile_file * 1e3:.1f} ms per tile file, {u.entry:.2f} s "
            f"per tile and {u.layout_entry:.2f} s per layout entry, {u.pool:.2f} s per entry "
            f"built by worker processes; train "
            f"{u.train_round * 1e3:.1f} ms per round + {u.train * 1e9:.2f} ns "
            f"per (row x round x column) + {u.pair * 1e9:.2f} ns per (row pair x round) + "
            f"{u.watched * 1e9:.0f} ns per watched (row x round); on layout rows "
            f"{u.layout_round * 1e3:.1f} ms per round + {u.layout_row * 1e6:.2f} us per "
            f"(row x round); predict {u.predict * 1e9:.1f} ns per (row x round); reading a cache "
            f"entry {u.entry_load:.2f} s + {u.load * 1e9:.2f} ns per (row x column); memory: "
            f"a load peaks at {u.load_memory:.2f} MB per MB of its matrix and leaves "
            f"{u.matrix_memory:.2f} MB per MB resident, a fit adds "
            f"{u.fit_extra:.2f} MB per MB of its train matrix + {u.fit_fixed_mb:.0f} MB, over "
            f"a {u.baseline_mb:.0f} MB process; "
            f"{u.workers} build workers",
            *pj.format_projection([pj.project(c, n, u) for c, n in pj.DOWNLOAD.items()],
                                  "projected for the full download (counts: "
                                  "models/projection.DOWNLOAD; train at every default round, "
                                  "an upper bound):", r.judged, u.command, u.baseline_mb),
            _prefix_line(u)]


def _prefix_line(u: pj.UnitCosts) -> str:
    """The trade-off users can make: train files read to a prefix (quality cost: README)."""
    cfg = FeatureConfig(max_read_configs_layout=PREFIX_EXAMPLE)
    total = pj.end_to_end_s([pj.project(c, n, u, cfg) for c, n in pj.DOWNLOAD.items()],
                            u.command)
    return (f"with --feature max_read_configs_layout={PREFIX_EXAMPLE} (layout train files read "
            f"to their first {PREFIX_EXAMPLE:,} configs): end to end {total / 60:.1f} min")


def _load(avg) -> str:
    return " / ".join(f"{x:.2f}" for x in avg)


def _header(r: BenchResult) -> list[str]:
    c, s = r.conditions, r.spec
    runs = len(r.stages[0].runs)
    size = "full size" if r.judged else "reduced sizes, --quick"
    return [
        f"bench: {s.layout_configs:,}-config layout file, {s.tile_kernels:,} tile kernels "
        f"({size}); {runs} run{'s' * (runs > 1)} per stage",
        f"machine: {c.cpus} CPUs ({c.usable_cpus} usable); load average (1/5/15 min) "
        f"{_load(c.load_average)} before the run, {_load(r.load_after)} after",
        "versions: " + ", ".join(f"{k} {v}" for k, v in c.versions.items()),
        "inputs: " + ("generated in this run" if r.inputs.generated
                      else "reused from an earlier run") + f" ({r.inputs.npz_root})",
        "wall s: median and min-max over runs; peak RSS: the stage's own process, largest run"]


def _table(stages: list[fb.Stage]) -> list[str]:
    width = max(len(s.name) for s in stages)
    head = f"{'stage':<{width}} {'wall s':>8} {'min-max':>13} {'throughput':>20} {'peak RSS MB':>12}"
    lines = [head, "-" * len(head)]
    for s in stages:
        lo, hi = s.seconds_range
        lines.append(f"{s.name:<{width}} {s.seconds:>8.2f} {f'{lo:.2f}-{hi:.2f}':>13} "
                     f"{s.throughput:>20} {s.peak_rss_mb:>12.0f}")
    return lines


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _verdicts(r: BenchResult) -> list[str]:
    """Each layout build against the floor, run by run; judged against the targets only at
    full size."""
    floor, inflate = (s for s in r.stages if s.name.startswith("floor"))
    rss_target = 3 * r.notes["int8_mb"] + RSS_MARGIN_MB
    lines = []
    for s in r.stages:
        if not s.name.startswith("build layout file"):
            continue
        ratios = s.ratios_to(floor)
        ratio = statistics.median(ratios)
        line = (f"{s.name[len('build layout file, '):]}: {ratio:.2f}x the decompression floor "
                f"(runs {min(ratios):.2f}-{max(ratios):.2f}x; "
                f"{statistics.median(s.ratios_to(inflate)):.2f}x inflating alone), "
                f"peak RSS {s.peak_rss_mb:.0f} MB")
        if r.judged:
            line += (f"; {FLOOR_TARGET}x target {_verdict(ratio <= FLOOR_TARGET)}, "
                     f"peak RSS target {_verdict(s.peak_rss_mb <= rss_target)}")
        lines.append(line)
    if r.judged:
        lines.append(f"peak RSS target: 3 x int8 ({r.notes['int8_mb']:.0f} MB) + {RSS_MARGIN_MB} "
                     f"= {rss_target:.0f} MB")
    else:
        lines.append(f"not judged with --quick: the targets ({FLOOR_TARGET}x the floor, peak RSS "
                     f"3 x int8 + {RSS_MARGIN_MB} MB) apply to the full-size files only")
    return lines


def _notes(notes: dict) -> list[str]:
    sp, tr = notes["split"], notes["train"]
    return ["", f"before round 1: Numba's kernels loaded, or compiled where not cached, in "
                f"{notes['warm_kernels_s']:.1f} s, untimed (the first build after installing or "
                f"editing features/kernels.py pays that compile once)",
            "medians over runs:",
            "time split (memory-mapped read): " + ", ".join(
                f"{k} {sp[k]:.2f}s" for k in ("read", "per_graph", "rows", "slots", "static",
                                              "per_config")),
            "per-config cost: " + ", ".join(
                f"{n:,} configs {t / n * 1e6:.1f} us/config"
                for n, t in notes["per_config_seconds"].items()),
            f"train {tr['all_s']:.1f}s on {tr['rows']:,.0f} tile rows ({tr['whole_s']:.1f}s "
            f"weighing whole groups), {tr['small_s']:.1f}s on "
            f"{tr['small_rows']:,.0f}, {tr['watch_s']:.1f}s on {tr['fit_rows']:,.0f} watching "
            f"{tr['watched_rows']:,.0f}; predict {tr['predict_s']:.2f}s (wall inside the stage)",
            *(format_rank_notes(notes["ranking"]) if "ranking" in notes else [])]
