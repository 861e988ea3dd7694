"""What `bench` times: real-size generated inputs, and the stages that read them, each run in a
fresh `spawn` child so its peak RSS is its own (the wall time is taken inside the child around
the work alone). Every stage runs once per round, so a stage's run i pairs with the floor's."""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from features import FeatureConfig, build_entry, load_entry, read_meta
from models.sample import generate as sample
from models.sample import synth_graph, synth_hlo
from features.cache.entries import entry_parts
from features.cache.store import writing
from features.versions import library_versions
from features.hlo import read_hlo
from features.npz.read import read_graph
from features.rows.table import graph_static
from features.cache.workers import WorkerPool, process_pool
from models.training.memory import peak_rss_mb
from models.training.runs import TrainConfig, train_collection
from models.training.family_split import fit_all

LIBRARIES = ("numpy", "numba", "lightgbm", "xgboost", "polars")
FEW_CONFIGS = 2   # the layout graph with this many configs: what a file costs besides them
# train_collection's stages (diagnostics.Stopwatch) while the train rows are held, and after
FIT_STAGES = ("load", "fit", "cross-validate")
HELD_STAGE = "load valid"     # the valid split's targets alone: what the fit left held
CHECK_STAGES = ("validate", "report data")
ALL_CONFIGS = FeatureConfig(max_train_configs_layout=0, max_train_configs_tile=0,
                            max_read_configs_layout=0)


@dataclass(frozen=True)
class BenchSpec:
    layout_configs: int = 100_000
    layout_config_nodes: int = 400
    layout_nodes: int = 12_000
    tile_kernels: int = 1_000
    # the HLO reader's module: 18,003 instructions (the largest dev program has 17,960)
    hlo_blocks: int = 1_500
    train_rounds: int = 100      # every fit of the training stages runs all of them
    layout_train_rows: int = 50_000
    seed: int = 0


QUICK = BenchSpec(layout_configs=3_000, layout_config_nodes=40, layout_nodes=600,
                  tile_kernels=40, hlo_blocks=50, train_rounds=20, layout_train_rows=3_000)


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
    def fastest(self) -> float:
        """The least of the runs: the stage's time with the least load the run saw."""
        return min(r.seconds for r in self.runs)

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


def _timed_call(fn, args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start, peak_rss_mb()


def measure(fn, *args) -> tuple[Run, object]:
    """fn(*args) in a fresh spawned process: its own wall time and peak RSS, and its result.
    Earlier stages' pending writes are flushed first, so their writeback is not billed here."""
    os.sync()
    with WorkerPool(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            result, seconds, rss = pool.submit(_timed_call, fn, args).result()
        except BaseException:
            pool.stop()    # Ctrl-C: the stage in flight may run for minutes
            raise
    return Run(seconds, rss), result


class Recorder:
    """Collects the runs of every stage, in the order the stages first ran."""

    def __init__(self, log=print):
        self.stages: dict[str, Stage] = {}
        self.log = log

    def __call__(self, name: str, fn, *args, items: int = 0, unit: str = ""):
        """Measure one run of the stage `name` (fn importable by name); returns fn's result."""
        self.log(f"  {name} ...")
        run, result = measure(fn, *args)
        self.stages.setdefault(name, Stage(name, items=items, unit=unit)).runs.append(run)
        return result


def round_notes(rounds: list[dict], *, fastest: bool = False) -> dict:
    """Per key, the median over rounds of what the stages returned (nested dicts key by key);
    fastest: the least instead, but for memory (keys ending in _mb), still the median, so a
    projection from the fastest runs differs from the median's in its times alone."""
    out = {}
    for key, first in rounds[0].items():
        values = [r[key] for r in rounds]
        if isinstance(first, dict):
            out[key] = round_notes(values, fastest=fastest)
        else:
            least = fastest and not key.endswith("_mb")
            out[key] = min(values) if least else statistics.median(values)
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
                      library_versions(*LIBRARIES))


# ---------------------------------------------------------------- generated inputs

@dataclass(frozen=True)
class Inputs:
    root: Path
    generated: bool   # False: everything was already there from an earlier run

    @property
    def npz_root(self) -> Path:   # the layout file and the tile collection
        return self.root / "full" / "npz_all" / "npz"

    @property
    def few_configs_root(self) -> Path:   # the layout file's graph with FEW_CONFIGS configs
        return self.root / "few" / "npz_all" / "npz"

    @property
    def hlo_path(self) -> Path:           # a program's HLO text (models/sample/synth_hlo.py)
        return self.root / "program.hlo"


def layout_path(npz_root: Path, collection: str = "layout:xla:random") -> Path:
    return npz_root.joinpath(*collection.split(":"), "train", "big.npz")


def ensure_inputs(cache_root: Path, spec: BenchSpec) -> Inputs:
    """The inputs of this spec under <cache_root>/bench/<key of the spec>, generated once."""
    key = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()[:12]
    root = Path(cache_root) / "bench" / key
    inputs = Inputs(root, False)
    with writing("the bench's generated inputs", root):
        made = [_layout_file(inputs.npz_root, spec), _nlp_twin(inputs.npz_root),
                _layout_file(inputs.few_configs_root, replace(spec, layout_configs=FEW_CONFIGS)),
                _tile_collection(inputs.npz_root, spec), _hlo_file(inputs.hlo_path, spec)]
    return replace(inputs, generated=any(made))


def _hlo_file(path: Path, spec: BenchSpec) -> bool:
    if path.exists():
        return False
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(synth_hlo.synthetic_hlo(spec.hlo_blocks))
    tmp.replace(path)
    return True


def layout_arrays(rng, nodes: int, config_nodes: int, configs: int, runtime: bool = True):
    """A generated layout:xla:random graph: (graph, configurable node ids, the file's arrays)."""
    graph = synth_graph.build_graph(rng, nodes, "xla")
    ids = sample.choose_config_nodes(rng, graph, config_nodes)
    cfg = sample.layout_configs(rng, graph, ids, configs, "random")
    rt = sample.layout_runtime(graph, ids, cfg, rng, 0.003) if runtime else None
    return graph, ids, sample.layout_arrays(graph, ids, cfg, rt)


def _layout_file(npz_root: Path, spec: BenchSpec) -> bool:
    """The layout train file (its graph depends on the seed and sizes, not on the number of
    configs); whether it was generated now."""
    path = layout_path(npz_root)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        sample.write_npz(path, layout_arrays(np.random.default_rng(spec.seed), spec.layout_nodes,
                                             spec.layout_config_nodes, spec.layout_configs)[2])
        return True
    return False


def _nlp_twin(npz_root: Path) -> bool:
    """The layout file under layout:nlp:random too (a hard link where the disk allows), so that
    the bench trains on the nlp collections' columns as well."""
    path = layout_path(npz_root, "layout:nlp:random")
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        os.link(layout_path(npz_root), tmp)
    except OSError:
        shutil.copyfile(layout_path(npz_root), tmp)
    tmp.replace(path)
    return True


def _tile_collection(npz_root: Path, spec: BenchSpec) -> bool:
    out = npz_root / "tile" / "xla" / "train"
    if out.exists() and len(list(out.glob("*.npz"))) == spec.tile_kernels:
        return False
    out.mkdir(parents=True, exist_ok=True)
    for i in range(spec.tile_kernels):
        rng = np.random.default_rng([spec.seed, 1, i])
        graph = synth_graph.build_graph(rng, int(rng.integers(4, 40)), ["xla", "nlp"][i % 2])
        sample.write_npz(out / f"kernel_{i:05d}.npz", sample.tile_arrays(
            rng, graph, int(rng.integers(100, 3000)), "train", 0.003))
    return True


# ---------------------------------------------------------------- stage bodies (run in children)

def baseline(_: int) -> int:
    """Nothing: the child's RSS after imports, the floor under every other stage's figure."""
    return 0


def decompress_floor(path: Path) -> int:
    """What numpy.load needs just to decompress node_config_feat."""
    with np.load(path) as z:
        return int(z["node_config_feat"].shape[0])


def build_stage(npz_root: Path, collection: str, cache_root: Path, workers: int,
                cfg: FeatureConfig = FeatureConfig()) -> int:
    entry, _ = build_entry(npz_root, collection, "train", cfg, cache_root, force=True,
                           workers=workers)
    return int(read_meta(entry)["n_rows"])


def graph_tables_stage(npz_root: Path) -> float:
    """Seconds of the layout graph's per-graph features and static tables (the second call:
    the first loads the kernels)."""
    g = read_graph(layout_path(npz_root), "layout:xla:random", "train")
    graph_static(g, FeatureConfig())
    start = time.perf_counter()
    graph_static(g, FeatureConfig())
    return time.perf_counter() - start


def hlo_read_stage(path: Path) -> int:
    """Read a program's HLO text into graph arrays (features.hlo), as `encode` does; its nodes."""
    return int(read_hlo(path)["node_opcode"].size)


def pool_start_stage(workers: int) -> int:
    """Start a build's worker processes, have each answer once, stop them."""
    with process_pool(workers) as pool:
        return len({job.result() for job in [pool.submit(os.getpid) for _ in range(workers)]})


def train_stage(entry: Path, rounds: int, graph_rows: int = 0, max_rows: int = 0,
                valid_entry: Path | None = None) -> dict:
    """`train`'s own code on one collection (models/training/runs.train_collection), the train
    rows doubling as valid rows unless valid_entry (uncut tile kernels, as the valid and test
    splits are) is given, the probe and the refit both at `rounds` rounds; the peak RSS while
    fitting and while checking. The train rows are streamed from the entry into their bins, as
    `train` does; graph_rows: a one-graph layout entry's first max_rows rows split into graphs
    of that many rows, held in memory (so the fit's peak holds them too: an upper bound)."""
    start = time.perf_counter()
    data = load_entry(entry)
    load_s, loaded = time.perf_counter() - start, data.X.size
    if graph_rows:
        data = as_graphs(data, graph_rows, max_rows)
    shape, x_mb = data.X.shape, data.X.nbytes / 2**20
    train = valid = data if graph_rows else entry
    valid = valid_entry or valid
    parts = [shape[0]] if graph_rows else [rows for _, rows in entry_parts(valid)]
    del data
    cfg = TrainConfig(overrides={"n_estimators": rounds, "early_stopping": rounds + 1})

    def every_round(model, train):   # the refit runs every round too, not the probe's best
        return fit_all(type(model)(replace(model.params, n_estimators=rounds)), train)
    with tempfile.TemporaryDirectory() as out:
        result = train_collection(cfg, train, valid, Path(out), fit_final=every_round,
                                  log=lambda _: None)
    peaks = result.stage_peak_mb
    return {"rows": shape[0], "columns": shape[1], "x_mb": x_mb, "rounds": rounds,
            "valid_rows": sum(parts), "part_mb": max(parts) * shape[1] * 4 / 2**20,
            "load_s": load_s, "loaded_values": loaded, **result.stages,
            "bin_peak_mb": peaks.get("bin", 0.0),
            "fit_peak_mb": max(peaks.get(k, 0.0) for k in FIT_STAGES),
            "held_peak_mb": peaks.get(HELD_STAGE, 0.0),
            "check_peak_mb": max(peaks.get(k, 0.0) for k in CHECK_STAGES)}


def as_graphs(data, graph_rows: int, max_rows: int):
    """The first max_rows rows (whole graphs of graph_rows, at least one) as separate graphs."""
    n = max(min(max_rows, data.X.shape[0]) // graph_rows, 1) * graph_rows
    n = min(n, data.X.shape[0])
    ptr = np.unique(np.append(np.arange(0, n, graph_rows), n)).astype(np.int64)
    return replace(data, X=data.X[:n], runtime=data.runtime[:n], config_idx=data.config_idx[:n],
                   dup_count=data.dup_count[:n], ptr=ptr,
                   graph_ids=tuple(f"graph{i}" for i in range(ptr.size - 1)))
