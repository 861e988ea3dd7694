"""FeatureSet, the rows models/ reads: one row per (graph, config), graphs contiguous.

Graph g owns rows ptr[g]:ptr[g+1] (`graph_slices`), graphs in sorted file order. Kept outside
the row code (table.py and what it imports, hashed into the feature signature), so editing this
type leaves cached features valid.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

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


def graph_slices(ptr: np.ndarray) -> list[slice]:
    """The rows of every graph, in order: graph g owns ptr[g]:ptr[g+1]."""
    return [slice(int(lo), int(hi)) for lo, hi in zip(ptr[:-1], ptr[1:])]


def map_graphs(fn, values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """(n,) float64: fn applied to each graph's values, written back to its rows."""
    out = np.empty(len(values))
    for rows in graph_slices(ptr):
        out[rows] = fn(values[rows])
    return out


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
    # node_rows.NodeRows of each graph, its configs in the order of the graph's rows, for a
    # learner that scores nodes (built for NODE_ROW_COLLECTIONS); None elsewhere
    nodes: tuple | None = field(default=None, compare=False)

    def __post_init__(self):
        n = self.X.shape[0]
        if self.ptr[0] != 0 or self.ptr[-1] != n or np.any(np.diff(self.ptr) < 0):
            raise ValueError(f"ptr must run from 0 to n_rows={n} without decreasing")
        if len(self.graph_ids) != self.ptr.size - 1 or len(self.columns) != self.X.shape[1]:
            raise ValueError("graph_ids / columns do not match ptr / X")
        if self.nodes is not None and [n.which.shape[0] for n in self.nodes] != \
                self.group_sizes.tolist():
            raise ValueError("node rows do not match the graphs' rows")

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
            raise ValueError(f"unknown feature families {unknown}; "
                             f"known: {sorted(FEATURE_FAMILIES)}")
        keep = [i for i, c in enumerate(self.columns)
                if not any(in_family(c, f) for f in families)]
        if len(keep) == len(self.columns):
            return self
        return FeatureSet(X=self.X[:, keep], runtime=self.runtime, config_idx=self.config_idx,
                          dup_count=self.dup_count, ptr=self.ptr, graph_ids=self.graph_ids,
                          collection=self.collection,
                          columns=tuple(self.columns[i] for i in keep), meta=self.meta,
                          nodes=self.nodes)

    def graph_rows(self, graphs: np.ndarray) -> np.ndarray:
        """The row indices of the given graph positions, in that order."""
        slices = graph_slices(self.ptr)
        return np.concatenate([np.arange(slices[g].start, slices[g].stop) for g in graphs]
                              + [np.zeros(0, np.int64)])

    def joined(self, other: "FeatureSet") -> "FeatureSet":
        """This set's graphs, then other's (same collection and columns): one pool of graphs,
        as cross-validation over the train and valid splits together needs."""
        if (other.collection, other.columns) != (self.collection, self.columns):
            raise ValueError(f"cannot join {other.collection} rows of {len(other.columns)} "
                             f"columns to {self.collection} rows of {len(self.columns)}")
        both = lambda a, b: np.concatenate([a, b])      # noqa: E731
        nodes = (None if self.nodes is None or other.nodes is None
                 else tuple(self.nodes) + tuple(other.nodes))
        return FeatureSet(X=np.vstack([self.X, other.X]), runtime=both(self.runtime, other.runtime),
                          config_idx=both(self.config_idx, other.config_idx),
                          dup_count=both(self.dup_count, other.dup_count),
                          ptr=both(self.ptr, other.ptr[1:] + self.ptr[-1]),
                          graph_ids=tuple(self.graph_ids) + tuple(other.graph_ids),
                          collection=self.collection, columns=self.columns, meta=self.meta,
                          nodes=nodes)

    def take_graphs(self, graphs: np.ndarray, X: np.ndarray | None = None) -> "FeatureSet":
        """A FeatureSet of the given graph positions, in that order. X: their rows' features
        when the caller has already laid them out (a view, no copy), else copied from self.X."""
        graphs = np.asarray(graphs, np.int64)
        rows = self.graph_rows(graphs)
        ptr = np.concatenate([[0], np.cumsum(self.group_sizes[graphs])]).astype(np.int64)
        return FeatureSet(X=self.X[rows] if X is None else X, runtime=self.runtime[rows],
                          config_idx=self.config_idx[rows], dup_count=self.dup_count[rows], ptr=ptr,
                          graph_ids=tuple(self.graph_ids[g] for g in graphs),
                          collection=self.collection, columns=self.columns, meta=self.meta,
                          nodes=None if self.nodes is None else tuple(self.nodes[g]
                                                                      for g in graphs))
