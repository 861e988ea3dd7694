"""`pipeline.py bench`: every stage on real-size generated files, the unit costs they imply, and
the full download's projected time and memory (projection.py)."""
from __future__ import annotations

import json
import os
import shutil
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from features import FeatureConfig, build_entry
from features.cache.store import write_atomically
from models.api.candidates import read_candidates

from models.bench import projection as pj
from models.bench import stages as st
from models.sample import synth_hlo
from models.bench.rank import QUICK_RANK, RankSpec, format_rank_notes, rank_notes

BASELINE = "python + imports (baseline)"
FLOOR = "floor: numpy.load node_config_feat"
DEFAULT_BUILD = "build layout file, default settings"
ALL_BUILD = "build layout file, all configs, cold (npz)"
FEW_BUILD = f"build the layout file's graph with {st.FEW_CONFIGS} configs"
TABLES = "graph tables of that graph (second call)"
TILE_BUILD = "build tile collection, default settings ({workers} workers)"
POOL = "start {workers} build workers, stop them"
HLO_READ = "read a program's HLO text (encode, one core)"
TRAIN = "train {kind}: `train`'s code, {rounds} rounds"
PREFIX_EXAMPLE = 20_000   # the projection also for train files read this far


@dataclass(frozen=True)
class BenchResult:
    spec: st.BenchSpec
    inputs: st.Inputs
    conditions: st.Conditions  # taken before the run
    load_after: tuple[float, float, float]
    stages: list[st.Stage]
    notes: dict              # medians over rounds of what the stages returned
    fastest_notes: dict      # the same, their least times (st.round_notes)
    workers: int = 2

    @property
    def judged(self) -> bool:
        """The targets only apply to the full-size files."""
        return self.spec == st.BenchSpec()


def bench(cache_dir: Path, *, quick: bool, workers: int, repeat: int,
          rank_file: Path | None) -> str:
    """The command: run every stage and return the report to print."""
    spec = st.QUICK if quick else st.BenchSpec()
    return format_bench(run_bench(cache_dir, spec, workers=workers, repeat=repeat,
                                  rank_file=rank_file))


def run_bench(cache_root: Path, spec: st.BenchSpec, *, workers: int = 2, repeat: int = 3,
              rank_file: Path | None = None, log=print) -> BenchResult:
    """Generate (once) the inputs, build once untimed, then run every stage once per round,
    `repeat` rounds; time the ranking API; save bench.json beside the inputs."""
    if repeat < 1:
        raise ValueError(f"bench needs at least one run per stage, got --repeat {repeat}")
    if rank_file is not None:   # a bad file fails now, not after the rounds
        read_candidates(Path(rank_file), "layout:xla:random")
    before = st.conditions()
    inputs = st.ensure_inputs(cache_root, spec)
    log(f"inputs under {inputs.root} ({'generated now' if inputs.generated else 'reused'})")
    warm_s = _warm_kernels(inputs, inputs.root / "cache", log)
    record = st.Recorder(log)
    rounds = []
    for i in range(repeat):
        log(f"round {i + 1} of {repeat}")
        rounds.append(_round(record, spec, inputs, inputs.root / "cache", workers))
    ranking = rank_notes(replace(RankSpec() if spec == st.BenchSpec() else QUICK_RANK,
                                 real_file=str(rank_file or "")), log)
    result = BenchResult(spec, inputs, before, os.getloadavg(), list(record.stages.values()),
                         {**st.round_notes(rounds), "ranking": ranking, "warm_s": warm_s},
                         st.round_notes(rounds, fastest=True), workers)
    units = {"median": unit_costs(result), "fastest": unit_costs(result, fastest=True)}
    record_json = {**asdict(result), "units": asdict(units["median"]),
                   "units_fastest": asdict(units["fastest"]),
                   "projection": {k: download_summary(u).record() for k, u in units.items()}}
    write_atomically(inputs.root / "bench.json", lambda tmp: tmp.write_text(
        json.dumps(record_json, indent=1, default=str)))
    return result


def _warm_kernels(inputs: st.Inputs, cache: Path, log) -> float:
    """Build the few-configs file untimed, with default settings and with all configs (a
    memory-mapped int8 copy is another array type to Numba), so every kernel is in Numba's
    on-disk cache before round 1: after an edit to features/rows/row_kernels.py the first build
    compiles them (about 3 minutes), which would be billed to round 1. Round 1 clears `cache`."""
    log("  loading Numba's kernels, compiling any not cached (untimed) ...")
    return sum(st.measure(st.build_stage, inputs.few_configs_root, "layout:xla:random", cache, 1,
                          cfg)[0].seconds for cfg in (FeatureConfig(), st.ALL_CONFIGS))


def _round(run: st.Recorder, spec: st.BenchSpec, inputs: st.Inputs, work: Path,
           workers: int) -> dict:
    """Every stage once, from an empty cache; returns what the stages reported. A new stage is
    one `run(name, fn, *args, items=..., unit=...)` line (fn importable by name)."""
    shutil.rmtree(work, ignore_errors=True)
    npz, c, layout = inputs.npz_root, spec.layout_configs, "layout:xla:random"
    run(BASELINE, st.baseline, 0)
    run(FLOOR, st.decompress_floor, st.layout_path(npz), items=c, unit="configs")
    # a default build keeps no int8 copy; an all-configs build makes one, its rebuild maps it
    run(DEFAULT_BUILD, st.build_stage, npz, layout, work, 1, items=c, unit="configs")
    for state in ("cold (npz)", "warm (int8 copy)"):
        run(f"build layout file, all configs, {state}", st.build_stage, npz, layout, work, 1,
            st.ALL_CONFIGS, items=c, unit="configs")
    run(FEW_BUILD, st.build_stage, inputs.few_configs_root, layout, work, 1)
    tables = run(TABLES, st.graph_tables_stage, inputs.few_configs_root,
                 items=spec.layout_nodes, unit="nodes")
    tile_rows = run(TILE_BUILD.format(workers=workers), st.build_stage, npz, "tile:xla", work,
                    workers, FeatureConfig(), items=spec.tile_kernels, unit="files")
    run(POOL.format(workers=workers), st.pool_start_stage, workers)
    run(HLO_READ, st.hlo_read_stage, inputs.hlo_path,
        items=synth_hlo.instructions(spec.hlo_blocks), unit="instructions")
    tile_entry, _ = build_entry(npz, "tile:xla", "train", FeatureConfig(), work)
    uncut, _ = build_entry(npz, "tile:xla", "train", st.ALL_CONFIGS, work)   # as valid, test
    rounds = spec.train_rounds
    train = {"tile": run(TRAIN.format(kind="tile:xla", rounds=rounds), st.train_stage, tile_entry,
                         rounds, 0, 0, uncut, items=tile_rows, unit="rows")}
    for name, collection in pj.TRAINED.items():
        if name != "tile":   # the same file under each layout collection: their own columns
            entry, _ = build_entry(npz, collection, "train", st.ALL_CONFIGS, work)
            train[name] = run(TRAIN.format(kind=collection, rounds=rounds), st.train_stage,
                              entry, rounds, FeatureConfig().max_train_configs_layout,
                              spec.layout_train_rows, items=min(c, spec.layout_train_rows),
                              unit="rows")
    return {"graph_tables_s": tables, "train": train}


def _train_units(m: dict, baseline_mb: float) -> pj.TrainUnits:
    per, per_valid = (1.0 / (m[rows] * m["rounds"]) for rows in ("rows", "valid_rows"))
    held = max(m["held_peak_mb"], baseline_mb)
    return pj.TrainUnits(load=m["load_s"] / m["loaded_values"], fit=(m["bin"] + m["fit"]) * per,
                         check=(m["validate"] + m["report data"]) * per_valid,
                         predict=m["validate"] * per_valid,
                         bin_memory=max(m["bin_peak_mb"] - baseline_mb - pj.sample_mb(
                             m["rows"], m["columns"]), 0.0) / m["x_mb"],
                         fit_memory=max(m["fit_peak_mb"] - baseline_mb, 0.0) / m["x_mb"],
                         check_memory=max(m["check_peak_mb"] - held, 0.0) / m["part_mb"],
                         held_memory=max(held - baseline_mb, 0.0) / m["x_mb"],
                         columns=int(m["columns"]))


def unit_costs(r: BenchResult, *, fastest: bool = False) -> pj.UnitCosts:
    """What a unit of work costs, from the stages' medians (fastest: each stage's fastest run,
    the times of the training stages' fastest parts; memory as from the medians).

    The few-configs build (same graph, fresh process) is what a file and its entry cost besides
    the configs; the two layout builds cost nc * (read_c * read + done * featurize) (default:
    read_c configs read, done featurized) and nc * c * (read + featurize) (all configs) more."""
    seconds = {x.name: x.fastest if fastest else x.seconds for x in r.stages}
    s, notes, w = r.spec, r.fastest_notes if fastest else r.notes, r.workers
    c, nc = s.layout_configs, s.layout_config_nodes
    few, tables = seconds[FEW_BUILD], notes["graph_tables_s"]
    default, every = (seconds[name] - few for name in (DEFAULT_BUILD, ALL_BUILD))
    read_c = pj.configs_read(c, FeatureConfig())
    done = pj.featurized(read_c, FeatureConfig().max_train_configs_layout)
    per_both = max(every, 0.0) / (c * nc)
    read = max((default / nc - done * per_both) / max(read_c - done, 1.0), 0.0)
    base_mb = next(x for x in r.stages if x.name == BASELINE).peak_rss_mb
    train = {name: _train_units(notes["train"][name], base_mb) for name in pj.TRAINED}
    return pj.UnitCosts(floor=seconds[FLOOR] / (c * nc), read=read,
                        featurize=max(per_both - read, 0.0), graph=tables / s.layout_nodes,
                        tile_file=seconds[TILE_BUILD.format(workers=w)] * w / s.tile_kernels,
                        entry=max(few - tables, 0.0), pool=seconds[POOL.format(workers=w)],
                        workers=w, baseline_mb=base_mb, **train)


def download_summary(u: pj.UnitCosts) -> pj.Summary:
    return pj.summarize(pj.project_download(u), u)


def format_bench(r: BenchResult) -> str:
    units = unit_costs(r)
    projections = pj.project_download(units)
    prefix = FeatureConfig(max_read_configs_layout=PREFIX_EXAMPLE)
    prefix_s = pj.end_to_end_s(pj.project_download(units, prefix))
    fastest = download_summary(unit_costs(r, fastest=True))
    return "\n".join([
        *_header(r), "", *_table(r.stages),
        f"before round 1: Numba's kernels loaded, or compiled where not cached, in "
        f"{r.notes['warm_s']:.1f} s, untimed", "",
        *_units_lines(units),
        "projected for the full download (published counts: models/bench/projection.DOWNLOAD; "
        "every default round trained, an upper bound) from each stage's median; the floor: "
        f"the floor stage's numpy.load inflating every layout file's node_config_feat once, "
        f"on {r.workers} processes:",
        *pj.format_projection(projections, pj.summarize(projections, units), r.judged),
        f"from each stage's fastest run (the least load): {pj.ratio_text(fastest)}",
        f"with --feature max_read_configs_layout={PREFIX_EXAMPLE} (layout train files read to "
        f"their first {PREFIX_EXAMPLE:,} configs): end to end {prefix_s / 60:.1f} min", "",
        *format_rank_notes(r.notes["ranking"])])


def _header(r: BenchResult) -> list[str]:
    c, s, runs = r.conditions, r.spec, len(r.stages[0].runs)
    load = [" / ".join(f"{x:.2f}" for x in avg) for avg in (c.load_average, r.load_after)]
    size = "full size" if r.judged else "reduced sizes, --quick: not judged against the targets"
    return [
        f"bench: {s.layout_configs:,}-config layout file, {s.tile_kernels:,} tile kernels "
        f"({size}); {runs} run{'s' * (runs > 1)} per stage",
        f"machine: {c.cpus} CPUs ({c.usable_cpus} usable); load average (1/5/15 min) "
        f"{load[0]} before the run, {load[1]} after",
        "versions: " + ", ".join(f"{k} {v}" for k, v in c.versions.items()),
        "inputs: " + ("generated in this run" if r.inputs.generated
                      else "reused from an earlier run") + f" ({r.inputs.root})",
        "wall s: median and min-max over runs; peak RSS: the stage's own process, largest run; "
        "x floor: median of run i over the floor's run i"]


def _table(stages: list[st.Stage]) -> list[str]:
    width = max(len(s.name) for s in stages)
    floor = next((s for s in stages if s.name == FLOOR), None)
    head = (f"{'stage':<{width}} {'wall s':>8} {'min-max':>13} {'throughput':>20} "
            f"{'peak RSS MB':>12} {'x floor':>8}")
    lines = [head, "-" * len(head)]
    for s in stages:
        lo, hi = s.seconds_range
        ratio = (f"{statistics.median(s.ratios_to(floor)):.2f}"
                 if floor and s.name.startswith("build layout file") else "")
        lines.append(f"{s.name:<{width}} {s.seconds:>8.2f} {f'{lo:.2f}-{hi:.2f}':>13} "
                     f"{s.throughput:>20} {s.peak_rss_mb:>12.0f} {ratio:>8}")
    return lines


def _units_lines(u: pj.UnitCosts) -> list[str]:
    def fmt(d: dict) -> str:
        return ", ".join(f"{k} {v:.3g}" for k, v in d.items() if not isinstance(v, dict))
    units = asdict(u)
    return [f"unit costs (s per unit, MB; models/bench/projection.UnitCosts): {fmt(units)}",
            *(f"  {name} ({collection}): {fmt(units[name])}"
              for name, collection in pj.TRAINED.items())]
