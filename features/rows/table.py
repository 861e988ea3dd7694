"""FeatureConfig (settings) and the row code's root: one input file -> its rows, one per config.

This module and what it imports are the feature signature (signature.py). Rows are stored as
parquet parts plus JSON, never pickles, and read back as a FeatureSet (feature_set.py).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from features.npz.graph import DEFAULT_CHUNK_MB, Graph
from features.npz.read import read_graph
from features.schema import collection_kind, is_tile
from features.rows.node_rows import NODE_ROW_COLLECTIONS, NodeRows, graph_node_rows
from features.rows.extractors import extractor_of, feature_sets
from features.rows.per_config import (LayoutReference, layout_reference, layout_static,
                                      with_stat_sample)
from features.graph.layout_space import drawn_reference
from features.graph.per_graph import graph_features
from features.rows.row_selection import Rows, picked_configs, select_rows

REFERENCES = ("file", "drawn")


@dataclass(frozen=True)
class FeatureConfig:
    """Settings of a feature build; all of them are part of the cache key."""

    feature_set: str = "full"            # "basic" = the foundation's reference features
    # Tile: rows per train kernel after merging duplicates; 100 scored as 500 did on the dev
    # kernels' valid split and family CV at a fifth of the rows (docs/records/tile_rows.md)
    max_train_configs_tile: int = 100
    # Layout: 500 rows scored as well as all of a dev graph's configs (docs/records/); 1,000
    # keeps a margin at half the training of 2,000 on real files
    max_train_configs_layout: int = 1000
    # Layout train files: only their first N configs are read (0 = all). Configs sit in search
    # order, so this trains on the start of each search, and saves inflating the rest
    max_read_configs_layout: int = 0
    fastest_fraction: float = 0.1        # share of the cap reserved for the fastest configs
    max_valid_configs: int = 1000        # layout: like the test's 1000-config subsets
    chunk_mb: float = DEFAULT_CHUNK_MB   # node_config_feat featurized at a time
    seed: int = 0
    # Layout: the configs a graph's within-graph statistics (z-scores, value shares, the models'
    # scale) come from. "file": a sample of the file's own (what a Kaggle test file holds);
    # "drawn": layout_space.drawn_reference, a function of the graph alone, so a config's row is
    # the same whatever configs a file, a pool or a search holds (the tuner's model, issue 70)
    reference: str = "file"

    def __post_init__(self):
        if self.feature_set not in feature_sets():
            raise ValueError(f"feature_set must be one of {feature_sets()}, "
                             f"got {self.feature_set!r}")
        if not self.chunk_mb > 0:
            raise ValueError(f"chunk_mb must be positive, got {self.chunk_mb}")
        for name in ("max_train_configs_tile", "max_train_configs_layout",
                     "max_read_configs_layout", "max_valid_configs", "seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = no cap), got {getattr(self, name)}")
        if self.reference not in REFERENCES:
            raise ValueError(f"reference must be one of {REFERENCES}, got {self.reference!r}")
        if not 0 <= self.fastest_fraction <= 1:
            raise ValueError(f"fastest_fraction must be in [0, 1], got {self.fastest_fraction}")


class GraphStatic(NamedTuple):
    """What every row of a graph shares, whichever configs are ranked: the per-graph features
    and, for 'full' layout features, per_config.layout_static's per-configurable-node tables."""
    values: np.ndarray     # (d,) float32
    names: list[str]
    layout: object | None


def has_tables(g: Graph, cfg: FeatureConfig) -> bool:
    """Whether g's rows under cfg have per-configurable-node tables, and so a reference."""
    return not is_tile(g.collection) and cfg.feature_set == "full" and g.node_config_ids.size > 0


def graph_static(g: Graph, cfg: FeatureConfig) -> GraphStatic:
    gv, gnames = graph_features(g, cfg.feature_set)
    return GraphStatic(gv, gnames, layout_static(g) if has_tables(g, cfg) else None)


def fixed_reference(g: Graph, cfg: FeatureConfig) -> Graph | None:
    """g holding the configs of its reference when cfg fixes one whatever configs g holds
    (cfg.reference = "drawn"), else None: the rows' statistics are then the file's own."""
    if cfg.reference == "file" or not has_tables(g, cfg):
        return None
    return g.with_configs(drawn_reference(g))


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
    nodes: NodeRows | None = None   # node rows of the rows' configs (NODE_ROW_COLLECTIONS)
    n_configs: int = 0              # configs in the file (file_table), so none is read again

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


def graph_reference(ref: Graph, cfg: FeatureConfig, static: GraphStatic) -> LayoutReference | None:
    """The within-graph statistics of the configs `ref` holds, for graph_parts' `reference`
    (None where the features have none: tile and 'basic')."""
    if static.layout is None:
        return None
    return layout_reference(ref, static.layout, ref.chunk_configs(cfg.chunk_mb))


def graph_parts(g: Graph, cfg: FeatureConfig, static: GraphStatic | None = None,
                reference: LayoutReference | None = None) -> GraphTable:
    """The rows of one graph. `static`: graph_static(g, cfg) computed earlier for the same graph
    (see static_key); `reference`: graph_reference of the configs whose statistics the rows are
    set against, by default the file's own sample (per_config.stat_rows)."""
    chunk = g.chunk_configs(cfg.chunk_mb)
    rows = select_rows(g, chunk=chunk, **_caps(g.collection, cfg))
    if static is None:
        static = graph_static(g, cfg)
    kind = collection_kind(g.collection)
    extra = {} if static.layout is None else {"static": static.layout, "reference": reference}
    cv, cnames = extractor_of(kind, cfg.feature_set)(g, rows.config_idx, chunk=chunk,
                                                     seed=cfg.seed, **extra)
    return GraphTable(np.asarray(static.values, np.float32), np.asarray(cv, np.float32),
                      static.names + cnames, rows)


def graph_table(g: Graph, cfg: FeatureConfig, static: GraphStatic | None = None,
                reference: LayoutReference | None = None) -> tuple[np.ndarray, list[str], Rows]:
    """(r, d) float32 feature rows of one graph, their column names and the selected rows."""
    t = graph_parts(g, cfg, static, reference)
    return t.X, t.columns, t.rows


def file_table(path: Path, collection: str, split: str, cfg: FeatureConfig, *,
               packed_dir: Path | None = None) -> GraphTable:
    """The rows of one input file, read and validated, and on NODE_ROW_COLLECTIONS their node
    rows, so that nothing after the build reads the file again. Layout train and valid files
    with a cap keep only the configs their rows and statistics use (configs_needed), and leave
    no int8 copy: their reading is then about the inflating alone."""
    capped = (not is_tile(collection) and split in ("train", "valid")
              and (cfg.max_train_configs_layout if split == "train" else cfg.max_valid_configs))
    g = read_graph(path, collection, split, packed_dir=packed_dir,
                   max_configs=cfg.max_read_configs_layout if split == "train" else 0,
                   keep=configs_needed(collection, split, Path(path).stem, cfg) if capped else None)
    ref = fixed_reference(g, cfg)
    static = graph_static(g if ref is None else ref, cfg)
    reference = None if ref is None else graph_reference(ref, cfg, static)
    table = graph_parts(g, cfg, static, reference)._replace(n_configs=g.n_configs)
    if collection not in NODE_ROW_COLLECTIONS or static.layout is None:
        return table
    return table._replace(nodes=graph_node_rows(g, table.rows.config_idx, cfg.seed,
                                                static.layout,
                                                None if reference is None else reference.table))


def configs_needed(collection: str, split: str, graph_id: str, cfg: FeatureConfig):
    """keep(config_runtime) for io.read_graph: the configs that can become rows and those the
    within-graph statistics sample, as sorted file positions."""
    def keep(runtime: np.ndarray) -> np.ndarray:
        target = np.asarray(runtime, np.float64)
        picked = picked_configs(target, collection, split, graph_id, **_caps(collection, cfg))
        return with_stat_sample(picked, target.size, cfg.seed)
    return keep


def write_part(path: Path, tables: list[tuple[str, np.ndarray, Rows, int]],
               columns: list[str]) -> None:
    """One parquet file of several graphs (id, rows X, Rows, configs in its file), then its
    JSON (graph ids, rows and configs per graph) written last."""
    X = np.concatenate([t[1] for t in tables])
    frame = pl.DataFrame(X, schema=columns, orient="row") if X.size else \
        pl.DataFrame(schema={c: pl.Float32 for c in columns})
    extra = {name: np.concatenate([getattr(t[2], name) for t in tables])
             for name in Rows._fields}
    frame = frame.with_columns(pl.Series(k, v) for k, v in extra.items())
    tmp = path.with_name(path.name + ".tmp")
    frame.write_parquet(tmp)
    tmp.replace(path)
    info = {"graph_ids": [t[0] for t in tables], "sizes": [int(t[1].shape[0]) for t in tables],
            "configs": [int(t[3]) for t in tables]}
    tmp_json = path.with_suffix(".json.tmp")
    tmp_json.write_text(json.dumps(info))
    tmp_json.replace(path.with_suffix(".json"))
