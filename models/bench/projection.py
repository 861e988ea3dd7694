"""Projected time and memory of `build-features`, `train` and `submit` on the full download.

`bench` measures what a unit of work costs on this machine (UnitCosts: a configurable node of
one config read, featurized; a node of a graph; a tile file; a training row, round and column).
`project` multiplies them by counts: the download's published ones (DOWNLOAD), or those of any
data directory (`counts_of`), so the same model can be checked against a measured run.

Default settings throughout: train rows capped per graph, layout validation at 1,000 configs,
one seed, early stopping on held-out train families followed by a refit on every train graph.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from features import FeatureConfig, uses_pool
from features.io import array_shapes, list_npz
from features.schema import COLLECTIONS, is_tile
from features.per_config import STAT_CONFIGS

from models.training.lgbm import LAMBDARANK_DEFAULTS
from models.training.selection import EARLY_STOP_FRACTION

SPLIT_NAMES = ("train", "valid", "test")
TIME_TARGET_S = 30 * 60      # issue 11: build + train + submit on 2 cores
MEMORY_TARGET_MB = 8 * 1024


@dataclass(frozen=True)
class Counts:
    """One collection: files per split, mean configs per file per split (distinct ones for tile
    train files, whose rows are deduplicated before the cap), mean nodes and configurable nodes
    per graph (0 for tile), and the bytes of the files per split (whether a build starts worker
    processes: features.uses_pool)."""
    files: tuple[int, int, int]
    configs: tuple[float, float, float]
    nodes: float
    config_nodes: float
    input_bytes: tuple[float, float, float] = (math.inf,) * 3


# The real download, from shared/tpugraphs_format.md (section numbers there):
# - files per split: 1.2 (2nd-place EDA and Bobksl print the same table);
# - tile configs: 1,042,735 in 676 valid files, 1,543 a file (6.1), taken for every split
#   (how many are distinct is not published: none are taken to repeat, an upper bound);
#   tile nodes: "tens" (6.1), 40 taken;
# - layout test files hold 1,000 configs (6.4); validation files are not sub-sampled (6.4);
# - layout:xla: mean 13,894 nodes (9th place, 6.2); configs per file: median 7,572 (1st-place
#   EDA, 6.2), taken as the mean; configurable nodes: 2,251 in a 40,332-node graph (6.2), the
#   same 5.6% of 13,894 = 780;
# - layout:nlp: mean 5,711 nodes (6.3); configs per file: 71,600 [derived: issue 11's ~30 M
#   layout train rows less the xla files' 130 x 7,572, over the 405 nlp train files];
#   configurable nodes: 56-848 in test graphs (6.3), the dev set's nlp median is 587, but a file
#   holds at most 2.6 GB of float32 node_config_feat (6.5), MAX_CONFIG_NODE_UNITS configs x
#   configurable nodes, and a mean cannot exceed the maximum: at 71,600 configs that allows 504
#   (the largest file, 100,040 configs, has 121: 6.5), still an upper bound.
# - bytes per split: not published per split (the tar is "~6 GB", unverified: 6.5); every split
#   holds tens to thousands of files of up to 0.3 MB (tile) or 25 MB (layout), so every build is
#   taken to start its workers, an upper bound.
MAX_CONFIG_NODE_UNITS = 2.6e9 / (18 * 4)
DOWNLOAD = {
    "tile:xla": Counts((5709, 676, 844), (1543, 1543, 1543), 40, 0),
    "layout:xla:default": Counts((61, 7, 8), (7572, 7572, 1000), 13894, 780),
    "layout:xla:random": Counts((69, 7, 8), (7572, 7572, 1000), 13894, 780),
    "layout:nlp:default": Counts((198, 20, 17), (71600, 71600, 1000), 5711, 504),
    "layout:nlp:random": Counts((207, 20, 17), (71600, 71600, 1000), 5711, 504),
}


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per unit of work on one core, measured by `bench`."""
    read: float          # per (config x configurable node): decompress, int8, dedup hash
    featurize: float     # per (featurized config x configurable node)
    graph: float         # per node of a layout graph: per-graph features
    static: float        # per configurable node: its graph-static tables (layout_static)
    tile_file: float     # per tile file, all of it
    entry: float         # per tile entry (collection x split): listing, assembly, metadata
                         # (one tile file built in a fresh process, loading its kernels)
    train_round: float   # per boosting round of LightGBM LambdaRank
    train: float         # per (row x round x column)
    pair: float          # per (row pair LambdaRank weighs x round), tile
    layout_row: float    # per (layout row x round), layout defaults, measured on layout rows
    watched: float       # per (watched row x round) while early stopping watches
    predict: float       # per (row x round): a tree's walk does not grow with the columns
    tile_columns: int
    layout_columns: int
    workers: int         # build processes the projection assumes
    pool: float = 0.0    # per entry built by worker processes: starting and stopping them
    load: float = 0.0    # per (row x column) read back from a cache entry
    baseline_mb: float = 0.0   # `train`'s process before it loads rows (bench: its train stage's)
    load_memory: float = 1.0     # peak MB while a float32 matrix loads, per MB of it
    matrix_memory: float = 1.0   # MB resident per MB of a loaded float32 matrix
    fit_extra: float = 0.25      # MB a fit adds per MB of its train matrix (LightGBM's byte
                                 # per value) ...
    fit_fixed_mb: float = 0.0    # ... and whatever its size (bench: train_bench.memory_costs)
    command: float = 0.0  # starting one command: interpreter and imports
    layout_entry: float = 0.0  # per layout entry, as `entry` (0 in bench.json of older runs:
                               # `entry` is taken)
    layout_round: float | None = None  # per boosting round on layout rows (650 columns,
                                       # feature_fraction 0.7, 64 grades: more than a tile
                                       # round); None (older bench.json): train_round
    entry_load: float = 0.0    # per cache entry read back, whatever its size (parts, metadata)


@dataclass(frozen=True)
class Projection:
    collection: str
    build_s: float
    train_s: float
    submit_s: float
    train_rows: int
    peak_mb: float       # over the process baseline while `train` holds this collection

    @property
    def total_s(self) -> float:
        return self.build_s + self.train_s + self.submit_s


def featurized(c: float, selected: float) -> float:
    """Expected configs featurized in a file of c: the selected rows and the stats sample, two
    independent uniform draws (their expected union)."""
    sample = min(c, STAT_CONFIGS)
    return selected + sample - selected * sample / max(c, 1.0)


def configs_read(c: float, cfg: FeatureConfig, split: str = "train") -> float:
    """Configs read of a layout file of c: train files stop at max_read_configs_layout."""
    cap = cfg.max_read_configs_layout if split == "train" else 0
    return min(c, cap) if cap else c


def _layout_file(u: UnitCosts, n: Counts, c: float, selected: float) -> float:
    nc = max(n.config_nodes, 1.0)
    return (c * nc * u.read + featurized(c, selected) * nc * u.featurize + n.nodes * u.graph
            + nc * u.static)


def project(collection: str, n: Counts, u: UnitCosts, cfg: FeatureConfig = FeatureConfig(),
            rounds: int | None = None) -> Projection:
    """Time of one collection with default settings; `rounds`: the boosting rounds of the final
    fit (default: the ranker's n_estimators, an upper bound: early stopping ends sooner)."""
    kind = "tile" if is_tile(collection) else "layout"
    params = LAMBDARANK_DEFAULTS[kind]
    rounds = params.n_estimators if rounds is None else rounds
    cap = cfg.max_train_configs_tile if kind == "tile" else cfg.max_train_configs_layout
    keep = {"train": cap, "valid": cfg.max_valid_configs if kind == "layout" else 0, "test": 0}
    per_split = []
    rows = {}
    for split, files, c in zip(SPLIT_NAMES, n.files, n.configs):
        c = c if kind == "tile" else configs_read(c, cfg, split)
        selected = min(c, keep[split]) if keep[split] else c
        rows[split] = files * selected
        per_split.append(files * (u.tile_file if kind == "tile"
                                  else _layout_file(u, n, c, selected)))
    columns = u.tile_columns if kind == "tile" else u.layout_columns
    # The probe fits the unwatched train families for early_stopping rounds past the best and
    # scores the watched ones every round; the refit fits every train row for the best rounds
    probe = min(rounds + params.early_stopping, params.n_estimators)
    fit_rows = (1 - EARLY_STOP_FRACTION) * rows["train"]
    group = min(n.configs[0], keep["train"] or n.configs[0], params.max_group_size)
    per_row = (columns * u.train + min(group, params.truncation_level) * u.pair if kind == "tile"
               else u.layout_row)
    per_round = (u.train_round if kind == "tile" or u.layout_round is None
                 else u.layout_round)
    train_s = (probe * (per_round + per_row * fit_rows + u.watched * (rows["train"] - fit_rows))
               + rounds * (per_round + per_row * rows["train"])
               + VALID_PASSES * rows["valid"] * rounds * u.predict
               + (rows["train"] + rows["valid"]) * columns * u.load
               + TRAIN_LOADS * u.entry_load)
    predict_s = (rows["test"] * rounds * u.predict + rows["test"] * columns * u.load
                 + u.entry_load)
    train_mb, valid_mb = (rows[k] * columns * 4 / 2**20 for k in ("train", "valid"))
    # train loads the valid rows once the fitted train rows are let go
    # (models/runs.train_collection)
    peak_mb = max(u.load_memory * train_mb, u.load_memory * valid_mb,
                  (u.matrix_memory + u.fit_extra) * train_mb + u.fit_fixed_mb)
    entry = u.layout_entry if kind == "layout" and u.layout_entry else u.entry
    build = [p / u.workers + (entry if files else 0.0)
             + (u.pool if uses_pool(files, size, u.workers) else 0.0)
             for p, files, size in zip(per_split, n.files, n.input_bytes)]
    return Projection(collection, build[0] + build[1], train_s, build[2] + predict_s,
                      int(rows["train"]), peak_mb)


def counts_of(npz_root: Path) -> dict[str, Counts]:
    """The Counts of a TpuGraphs tree, from array headers, except tile train files, whose
    config_feat is read to count distinct configs."""
    out = {}
    for collection in COLLECTIONS:
        files, configs, nodes, config_nodes, sizes = [], [], [], [], []
        for split in SPLIT_NAMES:
            paths = list_npz(npz_root, collection, split)
            files.append(len(paths))
            sizes.append(float(sum(p.stat().st_size for p in paths)))
            shapes = [array_shapes(p, ("config_runtime", "node_feat", "node_config_ids"))
                      for p in paths]
            if is_tile(collection) and split == "train":
                configs.append(float(np.mean([_distinct_tile_configs(p) for p in paths]))
                               if paths else 0.0)
            else:
                configs.append(float(np.mean([s["config_runtime"][0] for s in shapes]))
                               if shapes else 0.0)
            nodes += [s["node_feat"][0] for s in shapes]
            config_nodes += [s.get("node_config_ids", (0,))[0] for s in shapes]
        if sum(files):
            out[collection] = Counts(tuple(files), tuple(configs), float(np.mean(nodes)),
                                     float(np.mean(config_nodes)), tuple(sizes))
    return out


def _distinct_tile_configs(path: Path) -> int:
    with np.load(path) as z:
        return int(np.unique(z["config_feat"], axis=0).shape[0])


COMMANDS = 3   # build-features, train, submit
TRAIN_LOADS = 4   # `train` reads the train and valid entries' targets for its checks, then
                  # each entry whole (models/training/runs.py)
VALID_PASSES = 2   # `train` predicts the valid rows for the score, then round by round for the
                   # report (models/training/diagnostics.py)


def end_to_end_s(projections: list[Projection], command_s: float) -> float:
    """Every collection's build, train and submit, and starting the three commands."""
    return sum(p.total_s for p in projections) + COMMANDS * command_s


def train_peak_mb(projections: list[Projection], baseline_mb: float) -> float:
    """`train` holds one collection's rows at a time (models/runs.train_collection)."""
    return baseline_mb + max(p.peak_mb for p in projections)


def format_projection(projections: list[Projection], title: str, judged: bool,
                      command_s: float = 0.0, baseline_mb: float = 0.0) -> list[str]:
    head = (f"{'collection':<20} {'build s':>9} {'train s':>9} {'submit s':>9} "
            f"{'train rows':>11} {'peak MB':>9}")
    lines = [title, head, "-" * len(head)]
    for p in projections:
        lines.append(f"{p.collection:<20} {p.build_s:>9.0f} {p.train_s:>9.0f} {p.submit_s:>9.0f} "
                     f"{p.train_rows:>11,} {p.peak_mb:>9.0f}")
    total = end_to_end_s(projections, command_s)
    peak = train_peak_mb(projections, baseline_mb)
    line = (f"end to end {total / 60:.1f} min with {COMMANDS} command starts of {command_s:.1f} s, "
            f"peak {peak:,.0f} MB (`train`: one collection at a time, the highest of its load "
            f"and its fit)")
    if judged:
        line += (f"; {TIME_TARGET_S // 60}-minute target "
                 f"{'met' if total <= TIME_TARGET_S else 'MISSED'}, {MEMORY_TARGET_MB:,} MB "
                 f"target {'met' if peak <= MEMORY_TARGET_MB else 'MISSED'}")
    return lines + [line]
