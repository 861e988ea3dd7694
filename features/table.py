"""FeatureConfig (settings) and FeatureSet (the contract with models/): one row per (graph, config).

Rows of a graph are contiguous and graphs keep the sorted file order; graph g owns rows
ptr[g]:ptr[g+1]. Stored as parquet parts plus JSON, never pickles.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from .io import DEFAULT_CHUNK_MB, Graph, read_graph
from .schema import collection_kind, is_tile
from .per_config import EXTRACTORS, layout_static, stat_sample
from .per_graph import graph_features
from .rows import Rows, picked_configs, select_rows

FEATURE_SETS = ("basic", "full")
# Feature families, for ablation (`train --without FAMILY`): a column belongs to a family when
# the pattern matches its name ("name") or its quantity, the last dotted part ("quantity").
FEATURE_FAMILIES = {
    "graph": ("name", r"^graph\."),
    "within_graph_z": ("name", r"^z\."),
    "padding": ("quantity", r"^(out_log2_pad|out_pad_bytes|in_log2_pad|in_pad_bytes"
                            r"|ker_pad_bytes|tiled_bytes|out_log2_minor|out_log2_second_minor"
                            r"|in_log2_minor|out_minor_mult128)$"),
    "conversions": ("quantity", r"^(in_copy|in_copy_bytes|ker_copy|ker_copy_bytes|user_copy"
                                r"|user_copy_bytes|output_copy_bytes|sibling_mismatch"
                                r"|sibling_bytes|merge_conversions|merge_conversion_bytes)$"),
    "reshape_bitcast": ("quantity", r"^reshape_copy(_bytes)?$"),
    "dim_roles": ("quantity", r"^(out|in|ker)_(minor|second)_is_\w+$"),
    "default_distance": ("quantity", r"^(out_is_default|in_is_default|ker_is_default"
                                     r"|out_changed|out_changed_bytes|out_row_major|out_eq_in"
                                     r"|value_freq|differs_from_modal)$"),
    "traffic": ("quantity", r"^est_traffic_bytes$"),
    "chain_padding": ("quantity", r"^(chain_pad_bytes|chain_tiled_bytes|est_chain_traffic_bytes)$"),
}


def in_family(column: str, family: str) -> bool:
    scope, pattern = FEATURE_FAMILIES[family]
    return bool(re.search(pattern, column if scope == "name" else column.split(".")[-1]))


@dataclass(frozen=True)
class FeatureConfig:
    """Settings of a feature build; all of them are part of the cache key."""

    feature_set: str = "full"            # "basic" = the foundation's reference features
    max_train_configs_tile: int = 500    # rows per train graph after merging duplicates
    # Layout: a cap of 500 of a dev graph's ~840 distinct configs scored as well as all of them in
    # family CV (models/defaults_cv.json, r07 against r06); 1,000 keeps a margin and halves
    # training on real files (up to 100k configs) against the earlier 2,000
    max_train_configs_layout: int = 1000
    # Layout train files: only their first N configs are read (0 = all). Configs sit in search
    # order, so this trains on the start of each search, and saves inflating the rest
    max_read_configs_layout: int = 0
    fastest_fraction: float = 0.1        # share of the cap reserved for the fastest configs
    max_valid_configs: int = 1000        # layout: like the test's 1000-config subsets
    chunk_mb: float = DEFAULT_CHUNK_MB   # node_config_feat featurized at a time
    seed: int = 0

    def __post_init__(self):
        if self.feature_set not in FEATURE_SETS:
            raise ValueError(f"feature_set must be one of {FEATURE_SETS}, got {self.feature_set!r}")
        if not self.chunk_mb > 0:
            raise ValueError(f"chunk_mb must be positive, got {self.chunk_mb}")
        for name in ("max_train_configs_tile", "max_train_configs_layout",
                     "max_read_configs_layout", "max_valid_configs", "seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = no cap), got {getattr(self, name)}")
        if not 0 <= self.fastest_fraction <= 1:
            raise ValueError(f"fastest_fraction must be in [0, 1], got {self.fastest_fraction}")


@dataclass(frozen=True)
class FeatureSet:
    X: np.ndarray              # (n_rows, n_cols) float32
    runtime: np.ndarray        # (n_rows,) float64 target; NaN in test
    config_idx: np.ndarray     # (n_rows,) int64 position of the config in its file
    dup_count: np.ndarray      # (n_rows,) int32 identical configs merged into the row
    ptr: np.ndarray            # (n_graphs + 1,) int64
    graph_ids: tuple[str, ...]
    collection: str
    columns: tuple[str, ...]
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        n = self.X.shape[0]
        if self.ptr[0] != 0 or self.ptr[-1] != n or np.any(np.diff(self.ptr) < 0):
            raise ValueError(f"ptr must run from 0 to n_rows={n} without decreasing")
        if len(self.graph_ids) != self.ptr.size - 1 or len(self.columns) != self.X.shape[1]:
            raise ValueError("graph_ids / columns do not match ptr / X")

    @property
    def group_sizes(self) -> np.ndarray:
        return np.diff(self.ptr)

    @property
    def n_graphs(self) -> int:
        return self.ptr.size - 1

    def without(self, families) -> "FeatureSet":
        """The same rows without the columns of the given feature families."""
        unknown = sorted(set(families) - set(FEATURE_FAMILIES))
        if unknown:
            raise ValueError(f"unknown feature families {unknown}; known: {sorted(FEATURE_FAMILIES)}")
        keep = [i for i, c in enumerate(self.columns)
                if not any(in_family(c, f) for f in families)]
        if len(keep) == len(self.columns):
            return self
        return FeatureSet(X=self.X[:, keep], runtime=self.runtime, config_idx=self.config_idx,
                          dup_count=self.dup_count, ptr=self.ptr, graph_ids=self.graph_ids,
                          collection=self.collection,
                          columns=tuple(self.columns[i] for i in keep), meta=self.meta)

    def take_graphs(self, graphs: np.ndarray) -> "FeatureSet":
        """A FeatureSet of the given graph positions, in that order."""
        graphs = np.asarray(graphs, np.int64)
        rows = np.concatenate([np.arange(self.ptr[g], self.ptr[g + 1]) for g in graphs]) \
            if graphs.size else np.zeros(0, np.int64)
        sizes = self.group_sizes[graphs]
        return FeatureSet(X=self.X[rows], runtime=self.runtime[rows],
                          config_idx=self.config_idx[rows], dup_count=self.dup_count[rows],
                          ptr=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                          graph_ids=tuple(self.graph_ids[g] for g in graphs),
                          collection=self.collection, columns=self.columns, meta=self.meta)


class GraphStatic(NamedTuple):
    """What every row of a graph shares, whichever configs are ranked: the per-graph features
    and, for 'full' layout features, per_config.layout_static's per-configurable-node tables."""
    values: np.ndarray     # (d,) float32
    names: list[str]
    layout: object | None


def graph_static(g: Graph, cfg: FeatureConfig) -> GraphStatic:
    gv, gnames = graph_features(g, cfg.feature_set)
    needs_tables = (not is_tile(g.collection) and cfg.feature_set == "full"
                    and g.node_config_ids.size > 0)
    return GraphStatic(gv, gnames, layout_static(g) if needs_tables else None)


def static_key(g: Graph) -> str:
    """Content hash of what graph_static reads: the collection, the graph's arrays and, of the
    configs, only the most layout slots any of them sets per node and section (layout_static
    picks each node's operands by it)."""
    h = hashlib.blake2b(g.collection.encode(), digest_size=16)
    slots = None if g.node_config_feat is None else g.slots()
    for arr in (g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, g.node_splits,
                slots):
        if arr is not None:
            h.update(repr((arr.dtype.str, arr.shape)).encode())
            h.update(np.ascontiguousarray(arr).data)
    return h.hexdigest()


class GraphTable(NamedTuple):
    """The rows of one graph, kept as its per-graph vector plus per-config columns."""

    graph: np.ndarray      # (g,) float32, the same in every row
    configs: np.ndarray    # (r, d - g) float32
    columns: list[str]     # d names: the graph's, then the configs'
    rows: Rows

    @property
    def X(self) -> np.ndarray:
        X = np.empty((self.configs.shape[0], self.graph.size + self.configs.shape[1]), np.float32)
        X[:, :self.graph.size] = self.graph
        X[:, self.graph.size:] = self.configs
        return X


def _caps(collection: str, cfg: FeatureConfig) -> dict:
    limit = cfg.max_train_configs_tile if is_tile(collection) else cfg.max_train_configs_layout
    return dict(max_train_configs=limit, fastest_fraction=cfg.fastest_fraction,
                max_valid_configs=cfg.max_valid_configs, seed=cfg.seed)


def graph_parts(g: Graph, cfg: FeatureConfig, static: GraphStatic | None = None) -> GraphTable:
    """The rows of one graph. `static`: graph_static(g, cfg) computed earlier for the same graph
    (see static_key)."""
    chunk = g.chunk_configs(cfg.chunk_mb)
    rows = select_rows(g, chunk=chunk, **_caps(g.collection, cfg))
    if static is None:
        static = graph_static(g, cfg)
    kind = collection_kind(g.collection)
    extra = {} if static.layout is None else {"static": static.layout}
    cv, cnames = EXTRACTORS[(kind, cfg.feature_set)](g, rows.config_idx, chunk=chunk,
                                                     seed=cfg.seed, **extra)
    return GraphTable(np.asarray(static.values, np.float32), np.asarray(cv, np.float32),
                      static.names + cnames, rows)


def graph_table(g: Graph, cfg: FeatureConfig, static: GraphStatic | None = None,
                ) -> tuple[np.ndarray, list[str], Rows]:
    """(r, d) float32 feature rows of one graph, their column names and the selected rows."""
    t = graph_parts(g, cfg, static)
    return t.X, t.columns, t.rows


def graph_feature_set(g: Graph, cfg: FeatureConfig, static: GraphStatic | None = None,
                      ) -> FeatureSet:
    """One graph's rows as a FeatureSet in memory, as a cache entry would hold them."""
    X, columns, rows = graph_table(g, cfg, static)
    return FeatureSet(X=X, runtime=rows.runtime, config_idx=rows.config_idx,
                      dup_count=rows.dup_count, ptr=np.array([0, X.shape[0]], np.int64),
                      graph_ids=(g.graph_id,), collection=g.collection, columns=tuple(columns))


def file_table(path: Path, collection: str, split: str, cfg: FeatureConfig, *,
               packed_dir: Path | None = None) -> GraphTable:
    """The rows of one input file, read and validated. Layout train and valid files with a cap
    keep only the configs their rows and statistics use (configs_needed), and leave no int8
    copy: their reading is then about the inflating alone."""
    capped = (not is_tile(collection) and split in ("train", "valid")
              and (cfg.max_train_configs_layout if split == "train" else cfg.max_valid_configs))
    g = read_graph(path, collection, split, packed_dir=packed_dir,
                   max_configs=cfg.max_read_configs_layout if split == "train" else 0,
                   keep=configs_needed(collection, split, Path(path).stem, cfg) if capped else None)
    return graph_parts(g, cfg)


def configs_needed(collection: str, split: str, graph_id: str, cfg: FeatureConfig):
    """keep(config_runtime) for io.read_graph: the configs that can become rows and those the
    within-graph statistics sample, as sorted file positions."""
    def keep(runtime: np.ndarray) -> np.ndarray:
        target = np.asarray(runtime, np.float64)
        picked = picked_configs(target, collection, split, graph_id, **_caps(collection, cfg))
        return np.union1d(picked, stat_sample(target.size, cfg.seed, graph_id))
    return keep


def write_part(path: Path, tables: list[tuple[str, np.ndarray, Rows]], columns: list[str]) -> None:
    """One parquet file of several graphs, then its JSON (graph ids, sizes) written last."""
    X = np.concatenate([t[1] for t in tables])
    frame = pl.DataFrame(X, schema=columns, orient="row") if X.size else \
        pl.DataFrame(schema={c: pl.Float32 for c in columns})
    extra = {name: np.concatenate([getattr(t[2], name) for t in tables])
             for name in Rows._fields}
    frame = frame.with_columns(pl.Series(k, v) for k, v in extra.items())
    tmp = path.with_name(path.name + ".tmp")
    frame.write_parquet(tmp)
    tmp.replace(path)
    info = {"graph_ids": [t[0] for t in tables], "sizes": [int(t[1].shape[0]) for t in tables]}
    tmp_json = path.with_suffix(".json.tmp")
    tmp_json.write_text(json.dumps(info))
    tmp_json.replace(path.with_suffix(".json"))
