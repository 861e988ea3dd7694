"""Benchmark of the feature stages on real-size generated files.

Each stage runs in a fresh `spawn` child so its peak RSS is its own; the wall time is taken
inside the child around the work alone. The floor is what `numpy.load` needs just to
decompress the same node_config_feat.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import sample, synth_graph
from .io import read_graph
from .per_config import layout_full
from .per_graph import graph_features
from .rows import select_rows
from .table import FeatureConfig


@dataclass(frozen=True)
class BenchSpec:
    layout_configs: int = 100_000
    layout_config_nodes: int = 400
    layout_nodes: int = 12_000
    tile_kernels: int = 1_000
    config_steps: tuple[int, ...] = (10_000, 30_000, 100_000)
    seed: int = 0


QUICK = BenchSpec(layout_configs=3_000, layout_config_nodes=40, layout_nodes=600,
                  tile_kernels=40, config_steps=(1_000, 3_000))


@dataclass
class Stage:
    name: str
    seconds: float
    peak_rss_mb: float
    items: int = 0
    unit: str = ""

    @property
    def throughput(self) -> str:
        return f"{self.items / self.seconds:,.0f} {self.unit}/s" if self.items and self.seconds \
            else ""


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def _timed_call(fn, args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start, _peak_rss_mb()


def measure(name: str, fn, *args, items: int = 0, unit: str = "") -> tuple[Stage, object]:
    """Run fn(*args) in a fresh spawned process; its own wall time and peak RSS.

    Pending writes of earlier stages (e.g. a 720 MB int8 copy) are flushed first, so their
    writeback is not billed to this stage."""
    os.sync()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        result, seconds, rss = pool.submit(_timed_call, fn, args).result()
    return Stage(name, seconds, rss, items, unit), result


# ---------------------------------------------------------------- generated inputs

def bench_root(cache_root: Path, spec: BenchSpec) -> Path:
    key = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()[:12]
    return Path(cache_root) / "bench" / key


def ensure_layout_file(root: Path, spec: BenchSpec) -> Path:
    """One layout:xla:random train file of the requested size (kept for reruns)."""
    path = root / "npz_all" / "npz" / "layout" / "xla" / "random" / "train" / "big.npz"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    graph = synth_graph.build_graph(rng, spec.layout_nodes, "xla")
    ids = sample.choose_config_nodes(rng, graph, spec.layout_config_nodes)
    cfg = sample.layout_configs(rng, graph, ids, spec.layout_configs, "random")
    runtime = sample.layout_runtime(graph, ids, cfg, rng, 0.003)
    sample.write_npz(path, sample.layout_arrays(graph, ids, cfg, runtime))
    return path


def ensure_tile_collection(root: Path, spec: BenchSpec) -> Path:
    out = root / "npz_all" / "npz" / "tile" / "xla" / "train"
    if out.exists() and len(list(out.glob("*.npz"))) == spec.tile_kernels:
        return root / "npz_all" / "npz"
    out.mkdir(parents=True, exist_ok=True)
    for i in range(spec.tile_kernels):
        rng = np.random.default_rng([spec.seed, 1, i])
        graph = synth_graph.build_graph(rng, int(rng.integers(4, 40)), ["xla", "nlp"][i % 2])
        n = int(rng.integers(100, 3000))
        sample.write_npz(out / f"kernel_{i:05d}.npz",
                         sample.tile_arrays(rng, graph, n, "train", 0.003))
    return root / "npz_all" / "npz"


# ---------------------------------------------------------------- stage bodies (run in children)

def baseline(_: int) -> int:
    """Nothing: the child's RSS after imports, the floor under every other stage's figure."""
    return 0


def decompress_floor(path: Path) -> int:
    with np.load(path) as z:
        return int(z["node_config_feat"].shape[0])


def read_stage(path: Path, packed_dir: Path | None, chunk: int) -> int:
    g = read_graph(path, "layout:xla:random", "train", chunk_configs=chunk, packed_dir=packed_dir)
    return int(np.asarray(g.node_config_feat[-1]).sum())  # touch the data


def warm_kernels(g, chunk: int) -> None:
    """Load every Numba kernel from its cache (featurizing two configs of g), so a stage's time
    is its work, not first-call dispatch."""
    from . import kernels

    kernels.longest_path(2, np.array([[1, 0]], np.int64))
    kernels.row_hash(np.zeros((1, 1), np.uint8))
    layout_full(g._replace(node_config_feat=g.node_config_feat[:2]), np.arange(2), chunk=chunk)


def split_stage(path: Path, packed_dir: Path, chunk: int) -> dict:
    """Reading (memory-mapped), per-graph, row selection and per-config time of one file."""
    warm_kernels(read_graph(path, "layout:xla:random", "train", chunk_configs=chunk,
                            packed_dir=packed_dir), chunk)
    t0 = time.perf_counter()
    g = read_graph(path, "layout:xla:random", "train", chunk_configs=chunk, packed_dir=packed_dir)
    t1 = time.perf_counter()
    graph_features(g, "full")
    t2 = time.perf_counter()
    rows = select_rows(g, max_train_configs=0, fastest_fraction=0.0, max_valid_configs=0,
                       seed=0, chunk=chunk)
    t3 = time.perf_counter()
    layout_full(g, rows.config_idx, chunk=chunk)
    t4 = time.perf_counter()
    return {"read": t1 - t0, "per_graph": t2 - t1, "rows": t3 - t2, "per_config": t4 - t3,
            "configs": int(rows.config_idx.size)}


def per_config_stage(path: Path, packed_dir: Path, n_configs: int, chunk: int) -> float:
    g = read_graph(path, "layout:xla:random", "train", chunk_configs=chunk, packed_dir=packed_dir)
    g = g._replace(node_config_feat=g.node_config_feat[:n_configs],
                   config_runtime=g.config_runtime[:n_configs])
    warm_kernels(g, chunk)
    start = time.perf_counter()
    layout_full(g, np.arange(n_configs), chunk=chunk)
    return time.perf_counter() - start


ALL_CONFIGS = FeatureConfig(max_train_configs_layout=0, max_train_configs_tile=0)


def build_stage(npz_root: Path, collection: str, cache_root: Path, workers: int,
                cfg: FeatureConfig = ALL_CONFIGS) -> int:
    from . import build_entry, read_meta  # the package imports this module

    entry, _ = build_entry(npz_root, collection, "train", cfg, cache_root, force=True,
                           workers=workers)
    return int(read_meta(entry)["n_rows"])
