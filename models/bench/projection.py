"""Will the full download run within 3 x the floor and 4 GiB, and which stage dominates: the unit
costs `bench` measures (UnitCosts) times the download's published counts (DOWNLOAD), default
settings. Training is priced from `train`'s own code run by the bench (stages.train_stage), so
what it reads, fits and predicts is measured, not restated here. The floor (project_floor) is
inflating every node_config_feat of the download once, measured in the same run: a ratio the
machine's speed and load mostly cancel out of, where minutes do not travel between machines."""
from __future__ import annotations

import math
from dataclasses import dataclass

from features import FeatureConfig, uses_pool
from features.cache.units import UNITS_PER_PART
from features.rows.per_config import STAT_CONFIGS
from features.schema import collection_kind, is_tile, program_family

from models.training.lgbm import LAMBDARANK_DEFAULTS

SPLIT_NAMES = ("train", "valid", "test")
# build + train + submit of the full download, three seeds, as a multiple of the floor measured in
# the same run (inflating every node_config_feat once): minutes do not travel between machines
RATIO_TARGET = 3.0
MEMORY_TARGET_MB = 4 * 1024


@dataclass(frozen=True)
class Counts:
    """One collection: files per split, mean configs per file per split, mean nodes and
    configurable nodes per graph (0 for tile)."""
    files: tuple[int, int, int]
    configs: tuple[float, float, float]
    nodes: float
    config_nodes: float


# The real download, from shared/tpugraphs_format.md (section numbers there):
# - files per split: 1.2 (2nd-place EDA and Bobksl print the same table);
# - tile configs: 1,042,735 in 676 valid files, 1,543 a file (6.1), taken for every split;
#   tile nodes: "tens" (6.1), 40 taken;
# - layout test files hold 1,000 configs (6.4); validation files are not sub-sampled (6.4);
# - layout:xla: mean 13,894 nodes (9th place, 6.2); configs per file: median 7,572 (1st-place
#   EDA, 6.2), taken as the mean; configurable nodes: 2,251 in a 40,332-node graph (6.2), the
#   same 5.6% of 13,894 = 780;
# - layout:nlp: mean 5,711 nodes (6.3); configs per file: 71,600 [derived: issue 11's ~30 M
#   layout train rows less the xla files' 130 x 7,572, over the 405 nlp train files];
#   configurable nodes: a file holds at most 2.6 GB of float32 node_config_feat (6.5),
#   MAX_CONFIG_NODE_UNITS configs x configurable nodes, so at 71,600 configs a mean of at most
#   504 (the dev set's nlp median is 587; the largest file, 100,040 configs, has 121: 6.5);
# - bytes per split: not published (the tar is "~6 GB", unverified: 6.5); every split holds
#   tens to thousands of files, so every build is taken to start its workers, an upper bound.
MAX_CONFIG_NODE_UNITS = 2.6e9 / (18 * 4)
# LightGBM sets its bin bounds from a sample of at most this many rows (bin_construct_sample_cnt),
# held while binning as float64 rows and a copy of their non-zero values: a cost that stops
# growing with the rows, so it is priced apart from the per-row ones.
SAMPLE_ROWS = 200_000
DOWNLOAD = {
    "tile:xla": Counts((5709, 676, 844), (1543, 1543, 1543), 40, 0),
    "layout:xla:default": Counts((61, 7, 8), (7572, 7572, 1000), 13894, 780),
    "layout:xla:random": Counts((69, 7, 8), (7572, 7572, 1000), 13894, 780),
    "layout:nlp:default": Counts((198, 20, 17), (71600, 71600, 1000), 5711, 504),
    "layout:nlp:random": Counts((207, 20, 17), (71600, 71600, 1000), 5711, 504),
}


# What `bench` trains for each set of training units: the xla and nlp layout rows differ in their
# columns (features/rows/per_config.Z_GROUP_COLLECTIONS), and a fit's cost grows with them
TRAINED = {"tile": "tile:xla", "layout_xla": "layout:xla:random",
           "layout_nlp": "layout:nlp:random"}


def units_name(collection: str) -> str:
    """The UnitCosts field that prices training on this collection (a key of TRAINED)."""
    return "tile" if is_tile(collection) else "layout_" + program_family(collection)


@dataclass(frozen=True)
class TrainUnits:
    """`train` and `submit` on one kind of collection, per unit, from stages.train_stage."""
    load: float      # s per (row x column) read back from a cache entry
    fit: float       # s per (train row x round): the early-stopping probe and the refit
    check: float     # s per (valid row x round): the validation score and the report's data
    predict: float   # s per (row x round)
    bin_memory: float    # MB over the baseline while the train rows are binned (streamed from
                         # the entry), per MB of their matrix, LightGBM's sample aside
    fit_memory: float    # MB over the baseline while the rows are fitted (their bins, a probe's
                         # subset of them), per MB of their matrix
    check_memory: float  # MB over what the fit left while valid (or test) rows are scored a
                         # part at a time (features.split_parts), per MB of the largest part
    held_memory: float   # MB over the baseline that the fit leaves held (the allocator keeps
                         # some of its pages), per MB of the train matrix
    columns: int


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per unit of work (one core unless said), measured by `bench`."""
    floor: float      # per (config x configurable node) numpy.load inflates of node_config_feat
    read: float       # per (config x configurable node) of a layout file
    featurize: float  # per (featurized config x configurable node)
    graph: float      # per node of a layout graph: per-graph features and static tables
    tile_file: float  # per tile file, all of it
    entry: float      # per entry built: loading the kernels, listing, assembly
    pool: float       # per build that starts worker processes (uses_pool)
    workers: int      # build processes
    baseline_mb: float   # a process after its imports
    tile: TrainUnits
    layout_xla: TrainUnits
    layout_nlp: TrainUnits


@dataclass(frozen=True)
class Projection:
    collection: str
    build_s: float     # build-features of the train and valid splits
    train_s: float
    submit_s: float    # the test split's build and prediction
    train_rows: int
    peak_mb: float     # over the baseline while `train` or `submit` holds this collection

    @property
    def stages(self) -> dict[str, float]:
        return {"build": self.build_s, "train": self.train_s, "submit": self.submit_s}


def featurized(c: float, selected: float) -> float:
    """Expected configs featurized in a file of c: the selected rows and the stats sample, two
    independent uniform draws (their expected union)."""
    sample = min(c, STAT_CONFIGS)
    return selected + sample - selected * sample / max(c, 1.0)


def configs_read(c: float, cfg: FeatureConfig, split: str = "train") -> float:
    """Configs read of a layout file of c: train files stop at max_read_configs_layout."""
    cap = cfg.max_read_configs_layout if split == "train" else 0
    return min(c, cap) if cap else c


def _rows_kept(kind: str, split: str, c: float, cfg: FeatureConfig) -> float:
    cap = {"train": cfg.max_train_configs_tile if kind == "tile" else cfg.max_train_configs_layout,
           "valid": cfg.max_valid_configs if kind == "layout" else 0, "test": 0}[split]
    return min(c, cap) if cap else c


def _file_s(u: UnitCosts, n: Counts, kind: str, c: float, rows: float) -> float:
    """One file's build on one core."""
    if kind == "tile":
        return u.tile_file
    return (c * n.config_nodes * u.read + featurized(c, rows) * n.config_nodes * u.featurize
            + n.nodes * u.graph)


def sample_mb(rows: float, columns: int) -> float:
    """What LightGBM's bin sample of `rows` rows holds (SAMPLE_ROWS)."""
    return min(rows, SAMPLE_ROWS) * columns * 16 / 2**20


def project(collection: str, n: Counts, u: UnitCosts,
            cfg: FeatureConfig = FeatureConfig()) -> Projection:
    """Build, train and submit of one collection, training every round of the defaults (early
    stopping ends sooner: an upper bound)."""
    kind = collection_kind(collection)
    t, rounds = getattr(u, units_name(collection)), LAMBDARANK_DEFAULTS[kind].n_estimators
    rows, build = {}, {}
    for split, files, c in zip(SPLIT_NAMES, n.files, n.configs):
        read = c if kind == "tile" else configs_read(c, cfg, split)
        rows[split] = files * _rows_kept(kind, split, read, cfg)
        build[split] = 0.0 if not files else (
            files * _file_s(u, n, kind, read, rows[split] / files) / u.workers + u.entry
            + (u.pool if uses_pool(files, math.inf, u.workers) else 0.0))
    loaded = {k: v * t.columns * t.load for k, v in rows.items()}
    train_s = (loaded["train"] + rows["train"] * rounds * t.fit
               + loaded["valid"] + rows["valid"] * rounds * t.check)
    submit_s = build["test"] + loaded["test"] + rows["test"] * rounds * t.predict
    matrix_mb = {k: v * t.columns * 4 / 2**20 for k, v in rows.items()}
    part_mb = max(matrix_mb[s] * min(1.0, UNITS_PER_PART[kind] / max(f, 1))
                  for s, f in zip(SPLIT_NAMES, n.files) if s != "train")
    peak_mb = max(t.bin_memory * matrix_mb["train"] + sample_mb(rows["train"], t.columns),
                  t.fit_memory * matrix_mb["train"],
                  t.held_memory * matrix_mb["train"] + t.check_memory * part_mb)
    return Projection(collection, build["train"] + build["valid"], train_s, submit_s,
                      int(rows["train"]), peak_mb)


def project_download(u: UnitCosts, cfg: FeatureConfig = FeatureConfig()) -> list[Projection]:
    return [project(c, n, u, cfg) for c, n in DOWNLOAD.items()]


def end_to_end_s(projections: list[Projection]) -> float:
    return sum(sum(p.stages.values()) for p in projections)


def project_floor(u: UnitCosts, download: dict[str, Counts] = DOWNLOAD) -> float:
    """Inflating every layout file's node_config_feat once, all its configs, every split, on
    u.workers processes as the build runs: less than any build of the download can do (tile
    files have none: config_nodes 0)."""
    units = sum(sum(f * c for f, c in zip(n.files, n.configs)) * n.config_nodes
                for n in download.values())
    return units * u.floor / u.workers


@dataclass(frozen=True)
class Summary:
    """The download's end to end, its floor and its peak, from one set of unit costs
    (run.unit_costs: the stages' medians, or each stage's fastest run)."""
    end_to_end_s: float
    floor_s: float     # project_floor
    peak_mb: float     # the baseline and the largest collection's peak

    @property
    def ratio(self) -> float:
        """The end to end as a multiple of the floor."""
        return self.end_to_end_s / self.floor_s if self.floor_s else math.inf

    def record(self) -> dict:
        """What bench.json keeps: the fields and the ratio."""
        return {"end_to_end_s": self.end_to_end_s, "floor_s": self.floor_s,
                "ratio": self.ratio, "peak_mb": self.peak_mb}


def summarize(projections: list[Projection], u: UnitCosts) -> Summary:
    # `train` holds one collection at a time (models/training/runs.train_collection)
    return Summary(end_to_end_s(projections), project_floor(u),
                   u.baseline_mb + max(p.peak_mb for p in projections))


def ratio_text(s: Summary) -> str:
    """`end to end T min = R x the floor (F min)`."""
    return (f"end to end {s.end_to_end_s / 60:.1f} min = {s.ratio:.1f} x the floor "
            f"({s.floor_s / 60:.1f} min)")


def format_projection(projections: list[Projection], summary: Summary,
                      judged: bool) -> list[str]:
    head = (f"{'collection':<20} {'build s':>9} {'train s':>9} {'submit s':>9} "
            f"{'train rows':>11} {'peak MB':>9}")
    lines = [head, "-" * len(head)]
    for p in projections:
        lines.append(f"{p.collection:<20} {p.build_s:>9.0f} {p.train_s:>9.0f} {p.submit_s:>9.0f} "
                     f"{p.train_rows:>11,} {p.peak_mb:>9.0f}")
    total, peak = summary.end_to_end_s, summary.peak_mb
    top, stage = max(((p, s) for p in projections for s in p.stages), key=lambda x:
                     x[0].stages[x[1]])
    line = f"{ratio_text(summary)}, peak {peak:,.0f} MB"
    if judged:
        line += (f"; {RATIO_TARGET:g} x floor target "
                 f"{'met' if summary.ratio <= RATIO_TARGET else 'MISSED'}, {MEMORY_TARGET_MB:,} MB "
                 f"target {'met' if peak <= MEMORY_TARGET_MB else 'MISSED'}")
    share = top.stages[stage] / total if total else 0.0
    return lines + [line, f"dominant: {stage} of {top.collection}, "
                          f"{top.stages[stage] / 60:.1f} min ({share:.0%} of the total)"]
