"""Node rows: what each configurable node pays under each config, for a learner that scores nodes.

A config's score under such a learner is the sum of its nodes' row scores, so the learner learns
what each kind of node costs from whole-graph runtimes (what lets a GNN carry over to new
architectures, without one). Rows are each node's distinct (own value, what it reads of other
nodes) among the configs (row_kernels.node_rows): far fewer than configs x nodes, since a search
revisits a node's few good layouts. Columns: the node quantities of per_config.NODE_QUANTITIES
(bytes as signed logs), then what no config changes (NODE_STATIC).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from features.rows import row_kernels as K
from features.npz.graph import Graph
from features.npz.read_kernels import row_hash
from features.rows.per_config import (BYTE_QUANTITIES, CONTEXTS, NODE_QUANTITIES, LayoutStatic,
                                      ValueCounts, config_codes, layout_static, stat_rows,
                                      value_counts)
from features.graph.per_graph import signed_log

# The collections whose builds make node rows (the node learner's, models/training/node_learner).
# A genetic search revisits a node's few good layouts, so a default-collection graph of 200
# configs makes ~1,000 node rows (xla 35,000 over 30 graphs); a random search makes ~1.2-1.4
# million over the same graphs, 40 times the training, and with 50 configs per graph it lowered
# nlp random's family CV (docs/records/README.md).
NODE_ROW_COLLECTIONS = ("layout:xla:default", "layout:nlp:default")
NODE_STATIC = ("group", "context", "rank_out", "rank_in", "rank_ker", "plain_users", "to_output",
               "has_kernel", "log_out_bytes", "log_in_bytes", "log_ker_bytes", "log_chain_bytes",
               "log2_configurable_nodes")
NODE_COLUMNS = tuple(f"node.{q}" for q in NODE_QUANTITIES) + tuple(f"node.{s}"
                                                                   for s in NODE_STATIC)


class NodeRows(NamedTuple):
    """One graph's node rows for r configs: X (u, len(NODE_COLUMNS)) float32; which (r, nc)
    int64 the row of each config's each node; bucket (u,) the number of configurable nodes of
    the graph that share the row's node group and context (a learner's step size per row);
    key (u,) uint64 a hash of what makes the row (node, its value, what it reads): equal keys,
    equal rows, under one reference (a scorer's cache of row scores)."""
    X: np.ndarray
    which: np.ndarray
    bucket: np.ndarray
    key: np.ndarray

    def config_scores(self, row_scores: np.ndarray) -> np.ndarray:
        """(r,) each config's sum of its nodes' row scores."""
        return row_scores[self.which].sum(axis=1)


def node_rows(g: Graph, rows: np.ndarray, static: LayoutStatic, table: ValueCounts) -> NodeRows:
    """The node rows of g's configs `rows`; static = per_config.layout_static(g); table = the
    value shares of the graph's reference configs (per_config.value_counts), as its config
    rows use."""
    si, sf = static.si, static.sf
    codes = config_codes(g, rows)
    vecs, key, which = K.node_rows(codes, si, sf, static.shapes, static.pad, static.defaults,
                                   static.fixed, static.roles, *table)
    node = key[:, 0]
    byte_cols = list(BYTE_QUANTITIES)
    vecs[:, byte_cols] = signed_log(vecs[:, byte_cols])
    n, s = si[node], sf[node]
    fixed = [n[:, K.S_GROUP], n[:, K.S_CONTEXT], n[:, K.S_RANK_OUT], n[:, K.S_RANK_IN],
             n[:, K.S_RANK_KER], n[:, K.S_PLAIN_USERS], n[:, K.S_TO_OUTPUT], n[:, K.S_HAS_KER],
             *(signed_log(s[:, v] * s[:, K.F_BYTES]) for v in (K.F_VOL_OUT, K.F_VOL_IN,
                                                                 K.F_VOL_KER)),
             signed_log(s[:, K.F_CHAIN_BYTES]), np.full(node.size, np.log2(max(si.shape[0], 1)))]
    bucket_of = si[:, K.S_GROUP] * (len(CONTEXTS) + 1) + si[:, K.S_CONTEXT] + 1
    _, inverse, counts = np.unique(bucket_of, return_inverse=True, return_counts=True)
    X = np.hstack([vecs, np.column_stack(fixed)]).astype(np.float32)
    return NodeRows(X, np.ascontiguousarray(which.T), counts[inverse][node].astype(np.float64),
                    row_hash(np.ascontiguousarray(key).view(np.uint8).reshape(-1, 24)))


class NodeSet(NamedTuple):
    """Node rows of several graphs stacked: X (u, d); pair_row / pair_config (p,) every (row,
    config) pair, configs numbered across graphs in graph order; ptr (graphs + 1,) the configs
    of each graph; runtime (configs,) their runtimes (zeros when unknown); bucket (u,)."""
    X: np.ndarray
    pair_row: np.ndarray
    pair_config: np.ndarray
    ptr: np.ndarray
    runtime: np.ndarray
    bucket: np.ndarray

    @property
    def n_configs(self) -> int:
        return int(self.ptr[-1])


def stack(graphs: list[NodeRows], runtimes: list[np.ndarray]) -> NodeSet:
    """One NodeSet of several graphs' node rows and their configs' runtimes."""
    row_at = np.cumsum([0] + [g.X.shape[0] for g in graphs])
    config_at = np.cumsum([0] + [g.which.shape[0] for g in graphs])
    empty = np.zeros(0, np.int64)
    return NodeSet(
        X=np.vstack([g.X for g in graphs]) if graphs else np.zeros((0, len(NODE_COLUMNS)),
                                                                    np.float32),
        pair_row=np.concatenate([(g.which + r).ravel() for g, r in zip(graphs, row_at)]
                                + [empty]),
        pair_config=np.concatenate([np.repeat(np.arange(g.which.shape[0]) + c, g.which.shape[1])
                                    for g, c in zip(graphs, config_at)] + [empty]),
        ptr=config_at.astype(np.int64),
        runtime=np.concatenate([np.asarray(r, np.float64) for r in runtimes] + [np.zeros(0)]),
        bucket=np.concatenate([g.bucket for g in graphs] + [np.zeros(0)]))


def graph_node_rows(g: Graph, rows: np.ndarray, seed: int, static: LayoutStatic | None = None,
                    table: ValueCounts | None = None) -> NodeRows:
    """node_rows of g's configs `rows`, by default with the value shares of the file's own
    sample (per_config.stat_rows), as its config rows have them."""
    static = layout_static(g) if static is None else static
    table = value_counts(config_codes(g, stat_rows(g, seed))) if table is None else table
    return node_rows(g, rows, static, table)


def sample_configs(nodes: NodeRows, n: int, rng: np.random.Generator
                   ) -> tuple[NodeRows, np.ndarray]:
    """At most n of the graph's configs, drawn uniformly, with only the node rows they use;
    and which configs they are."""
    picked = np.arange(nodes.which.shape[0])
    if picked.size > n:
        picked = np.sort(rng.choice(picked.size, n, replace=False))
    used, inverse = np.unique(nodes.which[picked], return_inverse=True)
    return NodeRows(nodes.X[used], inverse.reshape(picked.size, -1), nodes.bucket[used],
                    nodes.key[used]), picked
