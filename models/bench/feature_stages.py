"""Benchmark of the feature stages on real-size generated files.

Each stage runs in a fresh `spawn` child so its peak RSS is its own; the wall time is taken
inside the child around the work alone. The floor is what `numpy.load` needs just to
decompress the same node_config_feat; a second floor is the inflating alone that the loader
does (features/inflate.py), which is faster. Every stage runs once per round, and rounds repeat,
so a stage's run i is compared with the floor's run i, taken in the same round.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import platform
import statistics
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path

import numpy as np

from features import sample, synth_graph
from features.inflate import PIECE_BYTES, MemberReader
from features.io import read_graph
from features.per_config import layout_full, layout_static
from features.per_graph import graph_features
from features.rows import select_rows
from features.table import FeatureConfig


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
LIBRARIES = ("numpy", "numba", "lightgbm", "xgboost", "polars")


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_rss_mb: float


@dataclass
class Stage:
    """One stage and its runs, one per round."""
    name: str
    runs: list[Run] = field(default_factory=list)
    items: int = 0
    unit: str = ""

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def seconds_range(self) -> tuple[float, float]:
        return min(r.seconds for r in self.runs), max(r.seconds for r in self.runs)

    @property
    def peak_rss_mb(self) -> float:
        """The largest of the runs: a memory target is about the worst case."""
        return max(r.peak_rss_mb for r in self.runs)

    @property
    def throughput(self) -> str:
        return f"{self.items / self.seconds:,.0f} {self.unit}/s" if self.items and self.seconds \
            else ""

    def ratios_to(self, floor: Stage) -> list[float]:
        """Run i against the floor's run i, so a drift of the machine's speed cancels out."""
        if len(self.runs) != len(floor.runs):
            raise ValueError(f"{self.name!r} has {len(self.runs)} runs, {floor.name!r} "
                             f"{len(floor.runs)}: ratios need one pair per round")
        return [r.seconds / f.seconds for r, f in zip(self.runs, floor.runs)]


def peak_rss_mb() -> float:
    """This process's own peak RSS (VmHWM of its address space).

    Not ru_maxrss: Linux carries the parent's peak across fork + exec into a spawned child's
    ru_maxrss (and into what wait4 reports for it), so every stage would show the peak of the
    input generation that ran first in the parent."""
    return _status_mb("VmHWM")


def reset_peak_rss() -> float:
    """Restart this process's peak RSS from its current RSS (Linux 4.0+, proc(5) clear_refs),
    so the peak of one step can be read; returns the current RSS in MB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mb("VmRSS")


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0  # kB
    raise RuntimeError(f"/proc/self/status has no {key} line: the bench needs Linux")


def _timed_call(fn, args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start, peak_rss_mb()


def measure(fn, *args) -> tuple[Run, object]:
    """Run fn(*args) in a fresh spawned process; its own wall time and peak RSS.

    Pending writes of earlier stages (e.g. a 720 MB int8 copy) are flushed first, so their
    writeback is not billed to this stage."""
    os.sync()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        result, seconds, rss = pool.submit(_timed_call, fn, args).result()
    return Run(seconds, rss), result


class Recorder:
    """Collects the runs of every stage, in the order the stages first ran."""

    def __init__(self, log=print):
        self.stages: dict[str, Stage] = {}
        self.log = log

    def __call__(self, name: str, fn, *args, items: int = 0, unit: str = ""):
        """Measure one run of the stage `name`; returns what fn returned."""
        self.log(f"  {name} ...")
        run, result = measure(fn, *args)
        self.stages.setdefault(name, Stage(name, items=items, unit=unit)).runs.append(run)
        return result


def median_notes(rounds: list[dict]) -> dict:
    """Per key, the median over rounds of what the stages returned (nested dicts key by key)."""
    out = {}
    for key, first in rounds[0].items():
        values = [r[key] for r in rounds]
        out[key] = median_notes(values) if isinstance(first, dict) else statistics.median(values)
    return out


@dataclass(frozen=True)
class Conditions:
    """What the figures depend on besides the code."""
    cpus: int
    usable_cpus: int
    load_average: tuple[float, float, float]  # 1, 5, 15 minutes
    versions: dict[str, str]


def conditions() -> Conditions:
    return Conditions(os.cpu_count(), len(os.sched_getaffinity(0)), os.getloadavg(),
                      {"python": platform.python_version(),
                       **{name: metadata.version(name) for name in LIBRARIES}})


# ---------------------------------------------------------------- generated inputs

def bench_root(cache_root: Path, spec: BenchSpec) -> Path:
    key = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()[:12]
    return Path(cache_root) / "bench" / key


@dataclass(frozen=True)
class Inputs:
    layout_file: Path
    npz_root: Path  # holds the layout file and the tile collection
    generated: bool  # False: everything was already there from an earlier run
    one_file_root: Path | None = None  # a tree of one tile file: what an entry costs by itself
    # a tree of the layout file's graph with FEW_CONFIGS configs: what a layout file and its
    # entry cost besides the configs (kernels loaded, graph tables, assembly)
    few_configs_root: Path | None = None


FEW_CONFIGS = 2


def ensure_inputs(root: Path, spec: BenchSpec) -> Inputs:
    big, made_layout = ensure_layout_file(root, spec)
    npz_root, made_tile = ensure_tile_collection(root, spec)
    one, made_one = ensure_tile_collection(root / "one_file", replace(spec, tile_kernels=1))
    few_root = root / "few_configs"
    _, made_few = ensure_layout_file(few_root, replace(spec, layout_configs=FEW_CONFIGS),
                                     "few.npz")
    return Inputs(big, npz_root, made_layout or made_tile or made_one or made_few, one,
                  few_root / "npz_all" / "npz")


def ensure_layout_file(root: Path, spec: BenchSpec, name: str = "big.npz") -> tuple[Path, bool]:
    """One layout:xla:random train file of the requested size (kept for reruns); the path and
    whether it was generated now. The graph depends on the seed and sizes, not on the number
    of configs."""
    path = root / "npz_all" / "npz" / "layout" / "xla" / "random" / "train" / name
    if path.exists():
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    graph = synth_graph.build_graph(rng, spec.layout_nodes, "xla")
    ids = sample.choose_config_nodes(rng, graph, spec.layout_config_nodes)
    cfg = sample.layout_configs(rng, graph, ids, spec.layout_configs, "random")
    runtime = sample.layout_runtime(graph, ids, cfg, rng, 0.003)
    sample.write_npz(path, sample.layout_arrays(graph, ids, cfg, runtime))
    return path, True


def ensure_tile_collection(root: Path, spec: BenchSpec) -> tuple[Path, bool]:
    out = root / "npz_all" / "npz" / "tile" / "xla" / "train"
    if out.exists() and len(list(out.glob("*.npz"))) == spec.tile_kernels:
        return root / "npz_all" / "npz", False
    out.mkdir(parents=True, exist_ok=True)
    for i in range(spec.tile_kernels):
        rng = np.random.default_rng([spec.seed, 1, i])
        graph = synth_graph.build_graph(rng, int(rng.integers(4, 40)), ["xla", "nlp"][i % 2])
        n = int(rng.integers(100, 3000))
        sample.write_npz(out / f"kernel_{i:05d}.npz",
                         sample.tile_arrays(rng, graph, n, "train", 0.003))
    return root / "npz_all" / "npz", True


# ---------------------------------------------------------------- stage bodies (run in children)

def baseline(_: int) -> int:
    """Nothing: the child's RSS after imports, the floor under every other stage's figure."""
    return 0


def decompress_floor(path: Path) -> int:
    with np.load(path) as z:
        return int(z["node_config_feat"].shape[0])


def inflate_floor(path: Path) -> int:
    """Inflate node_config_feat the way the loader does, keeping nothing."""
    with zipfile.ZipFile(path) as zf, MemberReader(path, zf, "node_config_feat.npy") as fp:
        n = 0
        while piece := fp.read(PIECE_BYTES):
            n += len(piece)
    return n


def _read(path: Path, packed_dir: Path | None):
    return read_graph(path, "layout:xla:random", "train", packed_dir=packed_dir)


def read_stage(path: Path, packed_dir: Path | None) -> int:
    g = _read(path, packed_dir)
    return int(np.asarray(g.node_config_feat[-1]).sum())  # touch the data


def warm_kernels(g) -> None:
    """Load every Numba kernel from its cache (featurizing two configs of g), so a stage's time
    is its work, not first-call dispatch."""
    from features import kernels

    kernels.longest_path(2, np.array([[1, 0]], np.int64))
    kernels.row_hash(np.zeros((1, 1), np.uint8))
    layout_full(first_configs(g, 2), np.arange(2), chunk=2)


def first_configs(g, n: int):
    """g cut to its first n configs, every per-config array alike."""
    return g._replace(node_config_feat=g.node_config_feat[:n], config_runtime=g.config_runtime[:n])


def split_stage(path: Path, packed_dir: Path, chunk_mb: float) -> dict:
    """Reading (memory-mapped), per-graph, row selection, slots, static and per-config time of one
    file."""
    warm_kernels(_read(path, packed_dir))
    t0 = time.perf_counter()
    g = _read(path, packed_dir)
    t1 = time.perf_counter()
    graph_features(g, "full")
    t2 = time.perf_counter()
    chunk = g.chunk_configs(chunk_mb)
    rows = select_rows(g, max_train_configs=0, fastest_fraction=0.0, max_valid_configs=0,
                       seed=0, chunk=chunk)
    t3 = time.perf_counter()
    # A default build counts every node's slots as it streams the file (io._kept_configs): part
    # of its read, so timed apart from the static tables, which then only look them up
    g = g._replace(config_slots=g.slots())
    t4 = time.perf_counter()
    static = layout_static(g)
    t5 = time.perf_counter()
    layout_full(g, rows.config_idx, chunk=chunk, static=static)
    t6 = time.perf_counter()
    return {"read": t1 - t0, "per_graph": t2 - t1, "rows": t3 - t2, "slots": t4 - t3,
            "static": t5 - t4, "per_config": t6 - t5, "configs": int(rows.config_idx.size)}


def per_config_stage(path: Path, packed_dir: Path, n_configs: int, chunk_mb: float) -> float:
    g = first_configs(_read(path, packed_dir), n_configs)
    warm_kernels(g)
    start = time.perf_counter()
    layout_full(g, np.arange(n_configs), chunk=g.chunk_configs(chunk_mb))
    return time.perf_counter() - start


ALL_CONFIGS = FeatureConfig(max_train_configs_layout=0, max_train_configs_tile=0,
                            max_read_configs_layout=0)


def build_stage(npz_root: Path, collection: str, cache_root: Path, workers: int,
                cfg: FeatureConfig = ALL_CONFIGS) -> int:
    from features import build_entry, read_meta  # the package imports this module

    entry, _ = build_entry(npz_root, collection, "train", cfg, cache_root, force=True,
                           workers=workers)
    return int(read_meta(entry)["n_rows"])


def pool_start_stage(workers: int) -> int:
    """Start a build's worker processes, have each answer once, stop them: what an entry built
    in a pool pays besides its files (each worker imports this program again, as spawned
    processes do)."""
    from features.workers import process_pool

    with process_pool(workers) as pool:
        pids = {job.result() for job in [pool.submit(os.getpid) for _ in range(workers)]}
    return len(pids)
