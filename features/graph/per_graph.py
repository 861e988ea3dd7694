"""Per-graph features: one vector per file, broadcast to all of its config rows.

Each function returns (values, names) so column names come from the code that makes the values.
"""
from __future__ import annotations

import numpy as np

from features.graph import longest_paths
from features.npz.graph import Graph
from features.schema import CONFIGURABLE_OPCODES, MAX_OPCODE, OPCODE_IDS
from features.schema import (ELEMENT_TYPE, SHAPE_DIMS, SHAPE_PRODUCT, SHAPE_SUM, TUPLE_SIZE,
                             WINDOW_SIZE_PRODUCT, WINDOW_STRIDE_PRODUCT)

# Opcode groups, by the names of shared/tpugraphs_format.md section 5 (schema.OPCODE_NAMES).
OPCODE_GROUPS = {name: tuple(OPCODE_IDS[op] for op in ops) for name, ops in {
    "conv": ("convolution",),
    "dot": ("dot",),
    "reshape": ("reshape",),
    "elementwise": ("abs", "add", "atan2", "ceil", "clamp", "compare", "cosine", "divide",
        "exponential", "exponential-minus-one", "floor", "is-finite", "log", "log-plus-one",
        "and", "not", "or", "xor", "maximum", "minimum", "multiply", "negate", "popcnt",
        "power", "remainder", "round-nearest-afz", "rsqrt", "select", "shift-left",
        "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sqrt", "subtract",
        "tanh", "cbrt", "logistic", "round-nearest-even", "tan"),
    "reduce": ("reduce", "reduce-window", "select-and-scatter"),
    "data_movement": ("bitcast", "bitcast-convert", "broadcast", "concatenate", "convert",
        "copy", "dynamic-slice", "dynamic-update-slice", "gather", "pad", "reverse",
        "scatter", "slice", "transpose", "dynamic-reshape"),
    "control": ("call", "conditional", "fusion", "get-tuple-element", "tuple", "while"),
    "source": ("constant", "iota", "parameter"),
}.items()}
# node_feat columns summarised in log scale: shape product/sum, tuple size, window size/stride.
LOG_COLUMNS = {"shape_product": SHAPE_PRODUCT, "shape_sum": SHAPE_SUM,
               "tuple_size": TUPLE_SIZE, "window_size_product": WINDOW_SIZE_PRODUCT,
               "window_stride_product": WINDOW_STRIDE_PRODUCT}
# element bytes per column of the node_feat one-hot ELEMENT_TYPE (invalid..token); 4 where
# undefined.
ELEMENT_BYTES = np.array([4, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2, 8, 16, 4, 4, 4], np.float64)


def signed_log(x: np.ndarray) -> np.ndarray:
    """sign(x) * log1p(|x|): tames the 1e9-scale sums and products, keeps negatives apart."""
    return np.sign(x) * np.log1p(np.abs(x))


def ranks(node_feat: np.ndarray) -> np.ndarray:
    """Tensor rank per node: the number of non-zero shape_dimensions_0..5 (0-padded slots)."""
    return (node_feat[:, SHAPE_DIMS] > 0).sum(axis=1)


def element_bytes(node_feat: np.ndarray) -> np.ndarray:
    onehot = node_feat[:, ELEMENT_TYPE]
    return np.where(onehot.any(axis=1), ELEMENT_BYTES[onehot.argmax(axis=1)], 4.0)


def counts(g: Graph) -> tuple[np.ndarray, list[str]]:
    """Sizes of the graph. Not the config count: it reflects how the file was sampled (test
    layout files hold 1,000 configs, train files up to 100,040), not the program."""
    n, m = g.node_feat.shape[0], g.edge_index.shape[0]
    nc = 0 if g.node_config_ids is None else g.node_config_ids.size
    n_comp = 1 if g.node_splits is None else max(1, g.node_splits.size - 1)
    vals = np.log1p([n, m, nc, n_comp])
    return vals, ["log_nodes", "log_edges", "log_config_nodes", "log_computations"]


def opcode_histogram(g: Graph, *, fractions: bool = True) -> tuple[np.ndarray, list[str]]:
    hist = np.bincount(g.node_opcode, minlength=MAX_OPCODE + 1)[1:].astype(np.float64)
    vals, names = [np.log1p(hist)], [f"op_count_{i}" for i in range(1, MAX_OPCODE + 1)]
    if fractions:
        n = max(1, g.node_opcode.size)
        group = np.array([hist[np.array(ids) - 1].sum() for ids in OPCODE_GROUPS.values()])
        vals += [hist / n, group / n]
        names += [f"op_frac_{i}" for i in range(1, MAX_OPCODE + 1)]
        names += [f"opgroup_frac_{k}" for k in OPCODE_GROUPS]
    return np.concatenate(vals), names


def _aggregate(x: np.ndarray) -> np.ndarray:
    """Signed-log sum, mean and max over the rows of x (nodes, cols); zeros for no rows."""
    if x.shape[0] == 0:
        return np.zeros(3 * x.shape[1])
    return np.concatenate([signed_log(x.sum(axis=0)), x.mean(axis=0), x.max(axis=0)])


def node_aggregates(g: Graph) -> tuple[np.ndarray, list[str]]:
    """Log-scaled size columns and rank summarised over all nodes and over configurable ones."""
    cols = np.array(list(LOG_COLUMNS.values()))
    x = np.column_stack([signed_log(g.node_feat[:, cols]), ranks(g.node_feat)])
    feat_names = list(LOG_COLUMNS) + ["rank"]
    mask = np.isin(g.node_opcode, CONFIGURABLE_OPCODES)
    if g.node_config_ids is not None:
        mask = np.zeros(g.node_opcode.size, bool)
        mask[g.node_config_ids] = True
    vals, names = [], []
    for scope, rows in (("all", x), ("cfg", x[mask])):
        vals.append(_aggregate(rows))
        names += [f"{scope}_{s}_{c}" for s in ("sum", "mean", "max") for c in feat_names]
    return np.concatenate(vals), names


def structure(g: Graph) -> tuple[np.ndarray, list[str]]:
    """Degrees, longest path and element-type mix: the graph's shape and a family hint."""
    n = g.node_feat.shape[0]
    indeg = np.bincount(g.edge_index[:, 0], minlength=n)
    outdeg = np.bincount(g.edge_index[:, 1], minlength=n)
    depth = longest_paths.longest_path(n, g.edge_index)
    bytes_ = element_bytes(g.node_feat)
    vals = [indeg.mean(), indeg.max(), outdeg.mean(), outdeg.max(), np.log1p(depth.max()),
            depth.max() / max(1.0, np.log2(n + 1)), (indeg == 0).mean(), (outdeg == 0).mean(),
            (bytes_ == 2).mean(), (bytes_ == 4).mean(), (ranks(g.node_feat) == 4).mean(),
            signed_log((g.node_feat[:, SHAPE_PRODUCT] * bytes_).sum())]
    names = ["indeg_mean", "indeg_max", "outdeg_mean", "outdeg_max", "log_longest_path",
             "longest_path_per_log_n", "frac_sources", "frac_sinks", "frac_2byte", "frac_4byte",
             "frac_rank4", "log_total_bytes"]
    return np.array(vals, np.float64), names


def graph_features(g: Graph, feature_set: str) -> tuple[np.ndarray, list[str]]:
    """The per-graph vector: counts + opcode histogram ('basic'), plus aggregates ('full')."""
    parts = [counts(g), opcode_histogram(g, fractions=feature_set == "full")]
    if feature_set == "full":
        parts += [node_aggregates(g), structure(g)]
    vals = np.concatenate([v for v, _ in parts]).astype(np.float32)
    names = [f"graph.{n}" for _, ns in parts for n in ns]
    return vals, names
