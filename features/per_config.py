"""Per-config features: one row per selected config of a graph.

Layout rows aggregate, over the configurable nodes, what a TPU compiler pays for under each
config: 8x128 padding of the effective layouts, copies where a consumer's layout differs from its
producer's, and whether dot/conv put their feature dimensions minor-most (solutions.md section 7).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from tqdm import tqdm

from . import kernels as K
from .io import Graph
from .per_graph import element_bytes, ranks, signed_log

NODE_QUANTITIES = (
    "out_is_default", "in_is_default", "ker_is_default", "out_row_major", "out_eq_in",
    "out_changed", "out_log2_pad", "out_pad_bytes", "in_log2_pad", "in_pad_bytes",
    "ker_pad_bytes", "in_copy", "in_copy_bytes", "ker_copy", "ker_copy_bytes", "user_copy",
    "user_copy_bytes", "sibling_mismatch", "sibling_bytes", "out_log2_minor",
    "out_log2_second_minor", "in_log2_minor", "out_minor_mult128", "in_feature_minor",
    "out_feature_minor", "ker_out_feature_minor", "in_batch_second_minor", "tiled_bytes",
    "log_value_freq", "differs_from_modal")
BYTE_QUANTITIES = tuple(i for i, n in enumerate(NODE_QUANTITIES) if n.endswith("bytes"))
# Estimated memory traffic of a config: padded tensors plus every copy a layout change implies.
TRAFFIC_QUANTITIES = tuple(NODE_QUANTITIES.index(n) for n in (
    "tiled_bytes", "in_copy_bytes", "ker_copy_bytes", "user_copy_bytes"))
GROUPS = ("all", "conv", "dot", "reshape")
GROUP_OF_OPCODE = {26: 0, 34: 1, 75: 2}
assert len(NODE_QUANTITIES) == K.N_QUANT and len(GROUPS) == K.N_GROUPS


# ---------------------------------------------------------------- layout

def default_layouts(node_feat: np.ndarray) -> np.ndarray:
    """(n, 6) int64 layout_minor_to_major with the 0-padding beyond each rank turned into -1."""
    layout = node_feat[:, 134:140].astype(np.int64)
    layout[np.arange(6)[None, :] >= ranks(node_feat)[:, None]] = -1
    return layout


def padded_shapes(node_feat: np.ndarray) -> np.ndarray:
    """(n, 7) float64 shape dims with absent dims (and the 7th, read by index -1) set to 1."""
    dims = np.ones((node_feat.shape[0], 7))
    dims[:, :6] = np.where(node_feat[:, 21:27] > 0, node_feat[:, 21:27], 1.0)
    return dims


def _operands(g: Graph) -> list[list[int]]:
    ops: list[list[int]] = [[] for _ in range(g.node_feat.shape[0])]
    for u, v in g.edge_index:
        ops[u].append(int(v))
    return ops


def _pick(operands: list[int], node_rank: np.ndarray, want_rank: int, skip: int) -> int:
    """The first operand of the wanted rank (the config section's rank), else the first one."""
    cands = [v for v in operands if v != skip]
    match = [v for v in cands if node_rank[v] == want_rank]
    return (match or cands or [-1])[0]


def layout_static(g: Graph):
    """Per-configurable-node tables the kernel reads: (si, sf, shapes, pad, defaults)."""
    ids, nf = g.node_config_ids, g.node_feat
    nc, rank = ids.size, ranks(nf)
    used = K.slots_used(g.node_config_feat)
    pos = {int(v): k for k, v in enumerate(ids)}
    ops, users = _operands(g), np.bincount(g.edge_index[:, 1], minlength=nf.shape[0])
    cfg_users = np.zeros(nf.shape[0], np.int64)
    for u, v in g.edge_index:
        cfg_users[v] += int(u) in pos
    si = np.full((nc, K.N_STATIC_INT), -1, np.int64)
    sf = np.zeros((nc, K.N_STATIC_F))
    nodes = np.full((nc, 3), -1, np.int64)
    first_reader: dict[int, int] = {}
    for k, v in enumerate(ids):
        v = int(v)
        x = _pick(ops[v], rank, int(used[k, 0]), -1)
        has_ker = used[k, 1] > 0 or (g.node_opcode[v] in (26, 34) and len(ops[v]) > 1)
        w = _pick(ops[v], rank, int(used[k, 1]), x) if has_ker else -1
        nodes[k] = (v, x, w)
        si[k, K.S_SIB_FIRST] = first_reader.setdefault(x, k) if x >= 0 else -1
        if si[k, K.S_SIB_FIRST] == k:
            si[k, K.S_SIB_FIRST] = -1
        si[k, K.S_IN_POS] = pos.get(x, -1)
        si[k, K.S_KER_POS] = pos.get(w, -1)
        si[k, K.S_HAS_KER] = int(w >= 0)
        si[k, K.S_PLAIN_USERS] = users[v] - cfg_users[v]
        _roles(si[k], nf[v], int(g.node_opcode[v]), rank[x] if x >= 0 else 0)
    si[:, K.S_GROUP] = [GROUP_OF_OPCODE.get(int(o), 3) for o in g.node_opcode[ids]]
    for t, col in enumerate((K.S_RANK_OUT, K.S_RANK_IN, K.S_RANK_KER)):
        si[:, col] = np.where(nodes[:, t] >= 0, rank[nodes[:, t]], 0)
    vol, eb = nf[:, 28].astype(np.float64), element_bytes(nf)
    for t, col in enumerate((K.F_VOL_OUT, K.F_VOL_IN, K.F_VOL_KER)):
        sf[:, col] = np.where(nodes[:, t] >= 0, vol[nodes[:, t]], 0.0)
    sf[:, K.F_BYTES] = eb[ids]
    dims = np.where((nodes >= 0)[:, :, None], padded_shapes(nf)[nodes], 1.0)
    shapes = np.ascontiguousarray(np.stack([dims, np.log2(dims)], axis=-1))
    defaults = np.where((nodes >= 0)[:, :, None], default_layouts(nf)[nodes], -1)
    return si, sf, shapes, pad_tables(dims), np.ascontiguousarray(defaults)


def pad_tables(dims: np.ndarray) -> np.ndarray:
    """(nc, 3, 7, 7) padded / true size for every (minor dim, 2nd-minor dim) choice: the minor
    dim rounded up to 128, the 2nd-minor to 8; 2nd-minor index 6 means none (rank 1)."""
    minor = np.ceil(dims / 128) * 128 / dims               # (nc, 3, 7)
    second = np.ceil(dims / 8) * 8 / dims
    second[..., 6] = 1.0
    return np.ascontiguousarray(minor[..., :, None] * second[..., None, :])


def _roles(si_row: np.ndarray, feat: np.ndarray, opcode: int, in_rank: int) -> None:
    """Which dimension plays which role: conv from its dimension numbers (node_feat 93-106);
    for dot, the last input dimension, the usual contracting one."""
    if opcode == 26:
        si_row[K.S_IN_BATCH], si_row[K.S_IN_FEATURE] = feat[93], feat[94]
        si_row[K.S_KER_OUT_FEATURE], si_row[K.S_OUT_FEATURE] = feat[100], feat[106]
    elif opcode == 34 and in_rank > 0:
        si_row[K.S_IN_FEATURE] = in_rank - 1


class ValueCounts(NamedTuple):
    """Per configurable node: its distinct 18-slot values (sorted codes) and how often each
    occurs among all of the file's configs, plus the most common one."""
    values: list[np.ndarray]
    counts: list[np.ndarray]
    modal: np.ndarray
    n_configs: int


def value_counts(ncf: np.ndarray, chunk: int, node_block: int = 32) -> ValueCounts:
    """Count every node's values over all configs, a block of nodes at a time, so memory stays
    at (configs x node_block) codes however many configurable nodes a graph has."""
    c, nc = ncf.shape[:2]
    values, counts = [], []
    for k0 in range(0, nc, node_block):
        block = np.concatenate([K.config_codes(ncf[s:s + chunk, k0:k0 + node_block])
                                for s in range(0, c, chunk)]) if c else \
            np.zeros((0, min(node_block, nc - k0)), np.int64)
        for k in range(block.shape[1]):
            v, n = np.unique(block[:, k], return_counts=True)
            values.append(v)
            counts.append(n)
    modal = np.array([v[np.argmax(n)] if v.size else -1 for v, n in zip(values, counts)],
                     np.int64)
    return ValueCounts(values, counts, modal, c)


def value_frequencies(ncf: np.ndarray, rows: np.ndarray, table: ValueCounts):
    """For the configs `rows`: (r, nc) float32 log share of configs giving each node the same
    value, and whether it differs from the node's most common value.

    A genetic search (the 'default' collections) revisits good choices, so frequent is fast."""
    codes = K.config_codes(ncf[rows]) if rows.size else np.zeros((0, len(table.values)), np.int64)
    logfreq = np.empty(codes.shape, np.float32)
    for k, (v, n) in enumerate(zip(table.values, table.counts)):
        logfreq[:, k] = np.log(n[np.searchsorted(v, codes[:, k])] / table.n_configs)
    return logfreq, (codes != table.modal).astype(np.float32)


def layout_full(g: Graph, rows: np.ndarray, *, chunk: int, static=None,
                ) -> tuple[np.ndarray, list[str]]:
    """(r, ~160) float32 for the selected configs, computed chunk by chunk; `static` is
    layout_static(g) when the caller already has it."""
    nc = g.node_config_ids.size
    names = [f"cfg.{grp}.{q}" for grp in GROUPS for q in NODE_QUANTITIES]
    names += [f"cfg.mean.{q}" for q in NODE_QUANTITIES] + ["cfg.all.est_traffic_bytes"]
    if nc == 0:
        return within_graph_z(np.zeros((rows.size, len(names)), np.float32), names)
    si, sf, shapes, pad, defaults = layout_static(g) if static is None else static
    table = value_counts(g.node_config_feat, chunk)
    parts = []
    starts = range(0, rows.size, chunk)
    # Only big files get a bar (4+ chunks); tqdm itself stays quiet off a terminal.
    for s in tqdm(starts, desc=f"{g.graph_id} configs", unit="chunk", disable=None
                  if len(starts) >= 4 else True, leave=False):
        r = rows[s:s + chunk]
        logfreq, modal_diff = value_frequencies(g.node_config_feat, r, table)
        sums = K.layout_config_features(g.node_config_feat, r, si, sf, shapes, pad, defaults,
                                        logfreq, modal_diff)
        means = sums[:, :K.N_QUANT] / nc
        traffic = signed_log(sums[:, list(TRAFFIC_QUANTITIES)].sum(axis=1, keepdims=True))
        for grp in range(K.N_GROUPS):
            cols = grp * K.N_QUANT + np.array(BYTE_QUANTITIES)
            sums[:, cols] = signed_log(sums[:, cols])
        parts.append(np.hstack([sums, means, traffic]).astype(np.float32))
    values = np.concatenate(parts) if parts else np.zeros((0, len(names)), np.float32)
    return within_graph_z(values, names)


def within_graph_z(values: np.ndarray, names: list[str], prefix: str = "cfg.all.",
                   ) -> tuple[np.ndarray, list[str]]:
    """Append z-scores over the graph's rows of the `prefix` columns.

    Rankings are within a graph, but graphs differ in scale by orders of magnitude; a config's
    standing among its own graph's configs is what carries across graphs (solutions.md 7.7)."""
    cols = [i for i, n in enumerate(names) if n.startswith(prefix)]
    x = values[:, cols].astype(np.float64)
    sd = x.std(axis=0) if x.shape[0] else np.ones(len(cols))
    z = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0) if x.shape[0] else x
    return (np.hstack([values, z.astype(np.float32)]),
            names + ["z." + names[i] for i in cols])


def layout_basic(g: Graph, rows: np.ndarray, *, chunk: int) -> tuple[np.ndarray, list[str]]:
    """Reference features: mean of each raw slot over nodes, share of all-default sections."""
    names = [f"cfg.slot_mean_{i}" for i in range(18)]
    names += [f"cfg.default_share_{s}" for s in ("out", "in", "ker")]
    parts = []
    for s in range(0, rows.size, chunk):
        x = g.node_config_feat[rows[s:s + chunk]].astype(np.float32)
        default = (x.reshape(x.shape[0], x.shape[1], 3, 6) < 0).all(axis=3)
        parts.append(np.hstack([x.mean(axis=1), default.mean(axis=1)]) if x.shape[1]
                     else np.zeros((x.shape[0], len(names)), np.float32))
    return (np.concatenate(parts) if parts else np.zeros((0, len(names)))).astype(np.float32), names


# ---------------------------------------------------------------- tile

def tile_root(g: Graph) -> int:
    """The kernel's output node: the last node flagged is_root, else the last node."""
    roots = np.flatnonzero(g.node_feat[:, 0] > 0)
    return int(roots[-1]) if roots.size else g.node_feat.shape[0] - 1


def _conv_kernel_shape(g: Graph) -> np.ndarray:
    """Dims of the smaller-volume operand of the last convolution (its weights), else empty."""
    convs = np.flatnonzero(g.node_opcode == 26)
    if convs.size == 0:
        return np.zeros(0)
    ops = g.edge_index[g.edge_index[:, 0] == convs[-1], 1]
    if ops.size == 0:
        return np.zeros(0)
    w = ops[np.argmin(g.node_feat[ops, 28])]
    return g.node_feat[w, 21:21 + ranks(g.node_feat)[w]].astype(np.float64)


def _dominant_op(g: Graph) -> int:
    for i, ids in enumerate(((26,), (34,), (70, 72))):
        if np.isin(g.node_opcode, ids).any():
            return i
    return 3


def tile_full(g: Graph, rows: np.ndarray, *, chunk: int = 0) -> tuple[np.ndarray, list[str]]:
    """Tile counts, 8x128 padding waste and tile bytes of each config against the output."""
    cf = g.config_feat[rows].astype(np.float64)
    root = tile_root(g)
    rank = int(ranks(g.node_feat)[root])
    shape = padded_shapes(g.node_feat)[root, :6]
    layout = default_layouts(g.node_feat)[root]
    ob = np.where(cf[:, 8:14] > 0, cf[:, 8:14], shape)  # an absent bound tiles the whole dim
    ob[:, rank:] = 1.0
    tiles = np.ceil(shape / ob)
    padded = ob.copy()
    if rank > 0:
        padded[:, layout[0]] = np.ceil(padded[:, layout[0]] / 128) * 128
    if rank > 1:
        padded[:, layout[1]] = np.ceil(padded[:, layout[1]] / 8) * 8
    eb = element_bytes(g.node_feat)[root]
    tile_elems, padded_elems = ob.prod(axis=1), padded.prod(axis=1)
    total_tiles = tiles.prod(axis=1)
    kshape = _conv_kernel_shape(g)
    kb = cf[:, :kshape.size]
    ktiles = np.where(kb > 0, np.ceil(kshape / np.maximum(kb, 1)), 1).prod(axis=1)
    waste = np.log2(padded_elems / tile_elems)
    minor = ob[:, layout[0]] if rank else np.ones(len(rows))
    second = ob[:, layout[1]] if rank > 1 else np.ones(len(rows))
    dom = np.zeros(4)
    dom[_dominant_op(g)] = 1.0
    vals = [np.log2(1 + np.abs(cf)), np.log2(tiles), np.log2(total_tiles)[:, None],
            waste[:, None], np.log2(padded_elems * eb)[:, None],
            np.log2(tile_elems / shape[:max(rank, 1)].prod())[:, None],
            np.log2(ktiles)[:, None], np.log2(minor)[:, None], np.log2(second)[:, None],
            (minor % 128 == 0)[:, None], np.log2(total_tiles * ktiles)[:, None],
            dom[None, :] * np.log2(total_tiles * ktiles)[:, None], dom[None, :] * waste[:, None]]
    names = [f"cfg.log2_{i}" for i in range(24)] + [f"cfg.log2_tiles_dim{d}" for d in range(6)]
    names += ["cfg.log2_total_tiles", "cfg.log2_pad_waste", "cfg.log2_padded_tile_bytes",
              "cfg.log2_tile_share_of_output", "cfg.log2_kernel_tiles", "cfg.log2_minor_tile",
              "cfg.log2_second_minor_tile", "cfg.minor_tile_mult128", "cfg.log2_all_tiles"]
    names += [f"cfg.{op}_x_log2_all_tiles" for op in ("conv", "dot", "reduce", "elementwise")]
    names += [f"cfg.{op}_x_pad_waste" for op in ("conv", "dot", "reduce", "elementwise")]
    return np.hstack(vals).astype(np.float32), names


def tile_basic(g: Graph, rows: np.ndarray, *, chunk: int = 0) -> tuple[np.ndarray, list[str]]:
    """Reference features: the 24 raw config values."""
    return g.config_feat[rows].astype(np.float32), [f"cfg.raw_{i}" for i in range(24)]


EXTRACTORS = {("tile", "basic"): tile_basic, ("tile", "full"): tile_full,
              ("layout", "basic"): layout_basic, ("layout", "full"): layout_full}
