"""`pipeline.py bench`: every stage from decompression to prediction on real-size files."""
from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from features import FeatureConfig, build_entry, load_entry
from features import bench as fb
from features.io import packed_path

from .lgbm import LAMBDARANK_DEFAULTS, LambdaRank
from .rank_bench import QUICK_RANK, RankSpec, format_rank_notes, rank_stages


def train_predict_stage(entry: Path, n_estimators: int) -> tuple[float, float, int]:
    data = load_entry(entry)
    start = time.perf_counter()
    model = LambdaRank(replace(LAMBDARANK_DEFAULTS["tile"], n_estimators=n_estimators)).fit(data)
    mid = time.perf_counter()
    scores = model.predict(data)
    return mid - start, time.perf_counter() - mid, int(np.isfinite(scores).sum())


def run_bench(cache_root: Path, spec: fb.BenchSpec, *, workers: int = 2, log=print):
    """Generate (once) the real-size inputs, then measure each stage; returns (stages, notes)."""
    root = fb.bench_root(cache_root, spec)
    log(f"inputs under {root} (generated once, reused by later runs)")
    big = fb.ensure_layout_file(root, spec)
    tile_root = fb.ensure_tile_collection(root, spec)
    npz_root = root / "npz_all" / "npz"
    work = root / "cache"
    shutil.rmtree(work, ignore_errors=True)
    packed = work / "packed"
    c, chunk = spec.layout_configs, FeatureConfig().chunk_configs
    stages = []

    def run(name, fn, *args, items=0, unit=""):
        log(f"  {name} ...")
        stage, result = fb.measure(name, fn, *args, items=items, unit=unit)
        stages.append(stage)
        return result

    run("python + imports (baseline)", fb.baseline, 0)
    run("floor: numpy.load node_config_feat", fb.decompress_floor, big, items=c, unit="configs")
    run("read: stream -> int8 copy in cache", fb.read_stage, big, packed, chunk,
        items=c, unit="configs")
    run("read: memory-map the int8 copy", fb.read_stage, big, packed, chunk, items=c,
        unit="configs")
    for settings, cfg in (("default settings", FeatureConfig()), ("all configs", fb.ALL_CONFIGS)):
        packed_path(big, packed).unlink()
        rows = run(f"build layout file, {settings}, cold (npz)", fb.build_stage, npz_root,
                   "layout:xla:random", work, 1, cfg, items=c, unit="configs")
        run(f"build layout file, {settings}, warm (int8 copy)", fb.build_stage, npz_root,
            "layout:xla:random", work, 1, cfg, items=c, unit="configs")
    split = run("split: read / per-graph / rows / per-config", fb.split_stage, big, packed, chunk,
                items=c, unit="configs")
    per_config = {}
    for n in spec.config_steps:
        per_config[n] = run(f"per-config features, {n:,} configs", fb.per_config_stage, big,
                            packed, n, chunk, items=n, unit="configs")
    tile_rows = run(f"build tile collection ({spec.tile_kernels} kernels, {workers} workers)",
                    fb.build_stage, tile_root, "tile:xla", work, workers,
                    items=spec.tile_kernels, unit="files")
    entry, _ = build_entry(tile_root, "tile:xla", "train",
                           FeatureConfig(max_train_configs_layout=0, max_train_configs_tile=0),
                           work, workers=workers)
    fit_s, predict_s, n = run("train + predict lambdarank (tile)", train_predict_stage, entry, 200,
                              items=tile_rows, unit="rows")
    rank_rows, ranking = rank_stages(QUICK_RANK if spec == fb.QUICK else RankSpec(), log)
    stages += rank_rows
    notes = {"ranking": ranking, "layout_rows": rows, "split": split, "per_config_seconds": per_config,
             "tile_rows": tile_rows, "fit_seconds": fit_s, "predict_seconds": predict_s,
             "int8_mb": c * spec.layout_config_nodes * 18 / 2**20}
    return stages, notes


def format_bench(stages, notes) -> str:
    head = f"{'stage':<52} {'wall s':>8} {'throughput':>20} {'peak RSS MB':>12}"
    lines = [head, "-" * len(head)]
    for s in stages:
        lines.append(f"{s.name:<52} {s.seconds:>8.2f} {s.throughput:>20} {s.peak_rss_mb:>12.0f}")
    floor = next(s for s in stages if s.name.startswith("floor")).seconds
    sp = notes["split"]
    lines.append("")
    for s in stages:
        if "build layout file" in s.name:
            lines.append(f"{s.name[len('build layout file, '):]}: {s.seconds / floor:.2f}x the "
                         f"decompression floor (target 1.5x), peak RSS {s.peak_rss_mb:.0f} MB")
    lines += [f"peak RSS target: 3 x int8 ({notes['int8_mb']:.0f} MB) + 1024 = "
              f"{3 * notes['int8_mb'] + 1024:.0f} MB",
              "time split (memory-mapped read): " + ", ".join(
                  f"{k} {sp[k]:.2f}s" for k in ("read", "per_graph", "rows", "per_config")),
              "per-config cost: " + ", ".join(
                  f"{n:,} configs {t / n * 1e6:.1f} us/config"
                  for n, t in notes["per_config_seconds"].items()),
              f"train {notes['fit_seconds']:.1f}s + predict {notes['predict_seconds']:.2f}s "
              f"on {notes['tile_rows']:,} tile rows (fit/predict wall inside the stage)"]
    if "ranking" in notes:
        lines += format_rank_notes(notes["ranking"])
    return "\n".join(lines)
