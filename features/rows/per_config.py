"""Per-config features: one row per selected config of a graph.

Layout rows aggregate, over the configurable nodes, what a TPU compiler pays for under each
config: 8x128 padding of the effective layouts, copies where a consumer's layout differs from its
producer's, and whether dot/conv put their feature dimensions minor-most (solutions.md section 7).
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from tqdm import tqdm

from features.graph import roles as R
from features.rows import row_kernels as K
from features.rows.extractors import extractor
from features.npz.graph import Graph
from features.graph.per_graph import element_bytes, ranks, signed_log
from features.schema import (CONVOLUTION, DOT, IS_ROOT, LAYOUT, N_LAYOUT_CONFIG_FEAT, OPCODE_IDS,
                             PARAMETER, RESHAPE, SHAPE_DIMS, SHAPE_PRODUCT, TILE_MINOR,
                             TILE_SECOND_MINOR, TRANSPOSE, tiled_extent)

ROLE_NAMES = ("batch", "contracting", "free", "spatial")


def _kernel_quantities() -> tuple[str, ...]:
    """The kernel's Q_* constants as feature names in column order: Q_OUT_PAD_BYTES is
    'out_pad_bytes'. They must number 0..N_BASE_QUANT - 1, each once."""
    index = {name[2:].lower(): v for name, v in vars(K).items() if name.startswith("Q_")}
    if sorted(index.values()) != list(range(K.N_BASE_QUANT)):
        raise AssertionError("row_kernels.Q_* must number 0..N_BASE_QUANT - 1, each once")
    return tuple(sorted(index, key=index.get))


NODE_QUANTITIES = _kernel_quantities() + tuple(
    f"{t}_{p}_is_{r}" for t in ("out", "in", "ker") for p in ("minor", "second")
    for r in ROLE_NAMES)
BYTE_QUANTITIES = tuple(i for i, n in enumerate(NODE_QUANTITIES) if n.endswith("bytes"))
# Estimated memory traffic of a config: padded tensors plus every copy a layout change implies.
TRAFFIC_QUANTITIES = (K.Q_TILED_BYTES, K.Q_IN_COPY_BYTES, K.Q_KER_COPY_BYTES, K.Q_USER_COPY_BYTES,
                      K.Q_OUTPUT_COPY_BYTES, K.Q_RESHAPE_COPY_BYTES)
CHAIN_TILED = K.Q_CHAIN_TILED_BYTES
GROUPS = ("all", "conv", "dot", "reshape")
GROUP_OF_OPCODE = {CONVOLUTION: 0, DOT: 1, RESHAPE: 2}
# A node's place in the program, for the node learner (node_rows.py): an attention matmul (a
# dot with batch dims) against a projection, a reshape splitting or merging heads (next to a
# transpose) against one feeding or leaving a dot. As sums over each context among the config
# rows they changed family CV by -0.0003 (docs/records/README.md), so the rows have none.
CONTEXTS = ("dot_batched", "reshape_transpose", "reshape_dot")
# Within-graph statistics (z-scores, value frequencies) come from this many configs drawn
# uniformly from the file, whatever rows are selected, so train and test rows see the same.
STAT_CONFIGS = 1000
assert len(NODE_QUANTITIES) == K.N_QUANT and len(GROUPS) == K.N_GROUPS
assert len(ROLE_NAMES) == R.N_ROLES == K.N_ROLES


# ---------------------------------------------------------------- layout

def default_layouts(node_feat: np.ndarray) -> np.ndarray:
    """(n, 6) int64 layout_minor_to_major with the 0-padding beyond each rank turned into -1."""
    layout = node_feat[:, LAYOUT].astype(np.int64)
    layout[np.arange(6)[None, :] >= ranks(node_feat)[:, None]] = -1
    return layout


def padded_shapes(node_feat: np.ndarray) -> np.ndarray:
    """(n, 7) float64 shape dims with absent dims (and the 7th, read by index -1) set to 1."""
    dims = np.ones((node_feat.shape[0], 7))
    shape = node_feat[:, SHAPE_DIMS]
    dims[:, :6] = np.where(shape > 0, shape, 1.0)
    return dims


class LayoutStatic(NamedTuple):
    """Per-configurable-node tables the kernels read (see row_kernels.layout_config_features)."""
    si: np.ndarray
    sf: np.ndarray
    shapes: np.ndarray
    pad: np.ndarray
    defaults: np.ndarray
    fixed: np.ndarray
    roles: np.ndarray
    merge_pos: np.ndarray
    merge_fixed: np.ndarray
    merge_bytes: np.ndarray


def _operand_roles(g: Graph, v: int, ops: list[int], in_rank: int):
    """(input, kernel, roles of out/in/kernel dims) of configurable node v."""
    nf, opcode = g.node_feat, int(g.node_opcode[v])
    none = ((), (), ())
    if opcode == CONVOLUTION:
        x, w = R.conv_operands(nf, v, ops)
        rk = (lambda u: len(R.shape_of(nf, u)) if u >= 0 else 0)
        r_in, r_ker, r_out = R.conv_roles(nf, v, rk(x), rk(w), len(R.shape_of(nf, v)))
        return x, w, (r_out, r_in, r_ker)
    if opcode == DOT:
        x, w, lr, rr = R.dot_operands(nf, v, ops, in_rank)
        if lr is None:
            return x, w, none
        out = [R.BATCH] * lr.count(R.BATCH) + [R.FREE] * (len(R.shape_of(nf, v)) - lr.count(R.BATCH))
        return x, w, (tuple(out), lr, rr)
    same_rank = [o for o in ops if len(R.shape_of(nf, o)) == in_rank] or ops
    return (same_rank[0] if same_rank else -1), -1, none


def layout_static(g: Graph) -> LayoutStatic:
    """Everything about the configurable nodes that no config changes, computed once per graph."""
    nf = g.node_feat
    pos = {int(v): k for k, v in enumerate(g.node_config_ids)}
    edges = R.split_edges(g)
    src = R.layout_sources(g, edges, pos)
    own = default_layouts(nf)
    vol, eb = nf[:, SHAPE_PRODUCT].astype(np.float64), element_bytes(nf)
    nodes, roles = _operands(g, edges)
    si, fixed = _static_ints(g, edges, src, pos, own, nodes)
    si[:, K.S_CONTEXT] = node_contexts(g, edges, roles)
    all_dims = padded_shapes(nf)
    dims = np.where((nodes >= 0)[:, :, None], all_dims[nodes], 1.0)
    shapes = np.ascontiguousarray(np.stack([dims, np.log2(dims)], axis=-1))
    defaults = np.where((nodes >= 0)[:, :, None], own[nodes], -1)
    pad = pad_tables(dims)
    chain, chain_pad = layout_chains(g, src, pos, vol * eb, all_dims, pad[:, 0])
    sf = _static_floats(g, nodes, vol, eb, chain)
    pad = np.ascontiguousarray(np.concatenate([pad, chain_pad[:, None]], axis=1))
    return LayoutStatic(si, sf, shapes, pad, np.ascontiguousarray(defaults), fixed,
                        roles, *_merge_tables(g, edges, src, pos, own, vol * eb))


def _operands(g: Graph, edges: R.Edges) -> tuple[np.ndarray, np.ndarray]:
    """(nc, 3) int64 the nodes whose output, input and kernel a configurable node's config
    sections describe (-1: none), and (nc, 3, 6) int64 the roles of their dims (-1: none)."""
    ids, used = g.node_config_ids, g.slots()[:, 1:]   # input, kernel
    nodes = np.full((ids.size, 3), -1, np.int64)
    roles = np.full((ids.size, 3, 6), -1, np.int64)
    for k, v in enumerate(ids):
        v = int(v)
        x, w, rl = _operand_roles(g, v, edges.operands[v], int(used[k, 0]))
        if not (used[k, 1] > 0 or g.node_opcode[v] == CONVOLUTION):
            w = -1  # a dot's rhs has no config section: its layout is not the config's to set
        nodes[k] = (v, x, w)
        for t, r in enumerate(rl):
            roles[k, t, :len(r)] = r[:6]
    return nodes, roles


def _static_ints(g: Graph, edges: R.Edges, src: np.ndarray, pos: dict[int, int],
                 own: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """si (nc, K.N_STATIC_INT) int64 and fixed (nc, 2, 6) int64: where each configurable node's
    input and kernel layouts come from, the layouts fixed sources carry, its first sibling, its
    plain users, group and ranks."""
    si = np.full((nodes.shape[0], K.N_STATIC_INT), -1, np.int64)
    fixed = np.full((nodes.shape[0], 2, 6), -1, np.int64)
    first_reader: dict[int, int] = {}
    for k, (v, x, w) in enumerate(nodes.tolist()):
        for t, u in enumerate((x, w)):
            if u >= 0:
                free = int(g.node_opcode[src[u]]) in R.ANY_LAYOUT
                si[k, K.S_IN_POS + t] = K.ANY_SOURCE if free else pos.get(int(src[u]), -1)
                fixed[k, t] = own[src[u]]
        # Siblings read one source, so they share S_IN_POS and fixed[:, 0]: the layout kernel
        # takes the sibling's source layout from node k's
        first = first_reader.setdefault(int(src[x]), k) if x >= 0 else -1
        si[k, K.S_SIB_FIRST] = -1 if first == k else first
        plain, to_out = R.chain_ends(g, edges, src, v, pos)
        si[k, K.S_PLAIN_USERS], si[k, K.S_TO_OUTPUT] = plain, int(to_out)
    opcodes = g.node_opcode[g.node_config_ids]
    si[:, K.S_HAS_KER] = nodes[:, 2] >= 0
    si[:, K.S_IS_RESHAPE] = opcodes == RESHAPE
    si[:, K.S_GROUP] = [GROUP_OF_OPCODE.get(int(o), 3) for o in opcodes]
    rank = ranks(g.node_feat)
    for t, col in enumerate((K.S_RANK_OUT, K.S_RANK_IN, K.S_RANK_KER)):
        si[:, col] = np.where(nodes[:, t] >= 0, rank[nodes[:, t]], 0)
    return si, fixed


def node_contexts(g: Graph, edges: R.Edges, roles: np.ndarray) -> np.ndarray:
    """(nc,) int64 each configurable node's CONTEXTS index, -1 for none: a dot whose output has
    a batch dim; a reshape whose operand or a user is a transpose; else one whose operand or a
    user is a dot. roles: _operands' dim roles."""
    out = np.full(g.node_config_ids.size, -1, np.int64)
    for k, v in enumerate(g.node_config_ids.tolist()):
        opcode = int(g.node_opcode[v])
        near = {int(g.node_opcode[u]) for u in edges.operands[v] + edges.users[v]}
        if opcode == DOT and (roles[k, 0] == R.BATCH).any():
            out[k] = CONTEXTS.index("dot_batched")
        elif opcode == RESHAPE and TRANSPOSE in near:
            out[k] = CONTEXTS.index("reshape_transpose")
        elif opcode == RESHAPE and DOT in near:
            out[k] = CONTEXTS.index("reshape_dot")
    return out


def _static_floats(g: Graph, nodes: np.ndarray, vol: np.ndarray, eb: np.ndarray,
                   chain: np.ndarray) -> np.ndarray:
    """sf (nc, K.N_STATIC_F) float64: volumes of each configurable node's tensors, its element
    bytes and the bytes of the chain that carries its output layout (layout_chains); vol, eb:
    (n,) per node."""
    sf = np.zeros((nodes.shape[0], K.N_STATIC_F))
    for t, col in enumerate((K.F_VOL_OUT, K.F_VOL_IN, K.F_VOL_KER)):
        sf[:, col] = np.where(nodes[:, t] >= 0, vol[nodes[:, t]], 0.0)
    sf[:, K.F_BYTES] = eb[g.node_config_ids]
    sf[:, K.F_CHAIN_BYTES] = chain
    return sf


def _merge_tables(g: Graph, edges: R.Edges, src: np.ndarray, pos: dict[int, int],
                  own: np.ndarray, node_bytes: np.ndarray):
    """merge_pos (m, 2), merge_fixed (m, 2, 6), merge_bytes (m,) of graph_roles.merge_points:
    each side's configurable source (-1: fixed), the layout a fixed side carries, and the
    merging node's output bytes."""
    merges = R.merge_points(g, edges, src)
    m_src = np.array([(a, b) for _, a, b in merges], np.int64).reshape(-1, 2)
    merge_pos = np.vectorize(lambda u: pos.get(int(u), -1), otypes=[np.int64])(m_src) \
        if m_src.size else m_src
    merge_bytes = np.array([node_bytes[v] for v, _, _ in merges], np.float64)
    return merge_pos, np.ascontiguousarray(own[m_src]).reshape(-1, 2, 6), merge_bytes


def layout_chains(g: Graph, src: np.ndarray, pos: dict[int, int], node_bytes: np.ndarray,
                  dims: np.ndarray, out_pad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each configurable node's chain: the non-configurable nodes whose output carries its layout
    (graph_roles.layout_sources: elementwise chains of its shape, pads and slices of its rank).
    Returns their bytes (nc,) and their pad factor (nc, 7, 7) under every (minor, 2nd-minor)
    choice, each carrier padded under its own dims (a pad's output is larger than its operand)
    and weighted by its bytes; out_pad (the node's own output table) where it has none.
    Called parameters alias their caller's operand and move no data of their own.
    dims: padded_shapes of every node."""
    u = np.flatnonzero(np.isin(src, list(pos)) & (g.node_opcode != PARAMETER))
    u = u[~np.isin(u, list(pos))]
    k = np.array([pos[int(v)] for v in src[u]], np.int64)
    weight = np.bincount(k, node_bytes[u], minlength=len(pos)).astype(np.float64)
    total = np.zeros_like(out_pad)
    np.add.at(total, k, node_bytes[u][:, None, None] * pad_tables(dims[u][:, None, :])[:, 0])
    w = weight[:, None, None]
    return weight, np.where(w > 0, total / np.where(w > 0, w, 1.0), out_pad)


def pad_tables(dims: np.ndarray) -> np.ndarray:
    """(nc, t, 7, 7) padded / true size of each of t tensors for every (minor dim, 2nd-minor dim)
    choice, in 8x128 tiles (schema.tiled_extent); 2nd-minor index 6 means none (rank 1).
    layout_static adds a 4th table per node: its chain's (layout_chains)."""
    minor = tiled_extent(dims, TILE_MINOR) / dims               # (nc, 3, 7)
    second = tiled_extent(dims, TILE_SECOND_MINOR) / dims
    second[..., 6] = 1.0
    return np.ascontiguousarray(minor[..., :, None] * second[..., None, :])


def stat_rows(g: Graph, seed: int) -> np.ndarray:
    """A label-independent uniform sample (sorted) of the file's configs for within-graph stats."""
    return stat_sample(g.n_configs, seed)


def with_stat_sample(rows: np.ndarray, c: int, seed: int) -> np.ndarray:
    """The configs a read of a graph of c configs keeps: `rows` and the statistics sample, as
    sorted file positions."""
    return np.union1d(rows, stat_sample(c, seed))


def stat_sample(c: int, seed: int) -> np.ndarray:
    """stat_rows of a graph of c configs, known before its configs are read. Drawn from the
    count and the seed alone, never the file's name: the same bytes score the same anywhere."""
    if c <= STAT_CONFIGS:
        return np.arange(c)
    return np.sort(np.random.default_rng([seed, c]).choice(c, STAT_CONFIGS, replace=False))


class ValueCounts(NamedTuple):
    """Per configurable node: the distinct 18-slot values (codes) among the sampled configs and
    their shares (row_kernels.value_table), plus the most common one. Each config's node gets the
    share of its value, and whether it is not the most common one (value_freq,
    differs_from_modal): a genetic search (the 'default' collections) revisits good choices, so
    frequent is fast."""
    ptr: np.ndarray
    keys: np.ndarray
    shares: np.ndarray
    modal: np.ndarray


def config_codes(g: Graph, rows: np.ndarray) -> np.ndarray:
    """(nc, r) int64 row_kernels.config_codes of the given configs, node-major."""
    return K.config_codes(g.node_config_feat, g.held(rows))


def value_counts(codes: np.ndarray) -> ValueCounts:
    """codes (nc, s) int64 of the sampled configs -> per-node value shares."""
    return ValueCounts(*K.value_table(np.ascontiguousarray(codes)))


def layout_names() -> list[str]:
    names = [f"cfg.{grp}.{q}" for grp in GROUPS for q in NODE_QUANTITIES]
    names += [f"cfg.mean.{q}" for q in NODE_QUANTITIES]
    return names + ["cfg.all.est_traffic_bytes", "cfg.all.est_chain_traffic_bytes",
                    "cfg.all.merge_conversions",
                    "cfg.all.merge_conversion_bytes"]


def _layout_chunk(g: Graph, rows: np.ndarray, st: LayoutStatic, table: ValueCounts,
                  codes: np.ndarray | None = None):
    """Features of `rows`; codes: their config_codes when the caller has them."""
    if codes is None:
        codes = config_codes(g, rows)
    sums = K.layout_config_features(codes, st.si, st.sf, st.shapes, st.pad, st.defaults,
                                    st.fixed, st.roles, *table, numba.get_num_threads())
    merges = K.merge_conversions(g.node_config_feat, g.held(rows), st.merge_pos, st.merge_fixed,
                                 st.merge_bytes, st.defaults)
    means = sums[:, :K.N_QUANT] / g.node_config_ids.size
    traffic = sums[:, list(TRAFFIC_QUANTITIES)].sum(axis=1, keepdims=True) + merges[:, 1:]
    # Kept apart from est_traffic_bytes, so that leaving chain_padding out (ablation) leaves
    # exactly the features without it
    with_chains = traffic + sums[:, CHAIN_TILED:CHAIN_TILED + 1]
    for grp in range(K.N_GROUPS):
        cols = grp * K.N_QUANT + np.array(BYTE_QUANTITIES)
        sums[:, cols] = signed_log(sums[:, cols])
    merges[:, 1] = signed_log(merges[:, 1])
    return np.hstack([sums, means, signed_log(traffic), signed_log(with_chains),
                      merges]).astype(np.float32)


class LayoutReference(NamedTuple):
    """A graph's within-graph statistics, fixed per graph: the value shares of its reference
    configs and the mean and spread of their z_prefixes columns. A file's reference is its
    stat_rows; an autotuner's is whatever configs it fixes for the graph (models/api/cost_model.py), so a
    config's row never depends on the other configs ranked with it."""
    table: ValueCounts
    mean: np.ndarray
    sd: np.ndarray


def layout_reference(g: Graph, static: LayoutStatic, chunk: int) -> LayoutReference:
    """The reference made of every config g holds."""
    rows = np.arange(g.node_config_feat.shape[0])
    codes = config_codes(g, rows)
    table = value_counts(codes)
    values = _chunked(g, rows, static, table, chunk, codes)
    return LayoutReference(table, *_z_stats(values, layout_names(), g.collection))


@extractor("layout", "full")
def layout_full(g: Graph, rows: np.ndarray, *, chunk: int, seed: int = 0, static=None,
                reference: LayoutReference | None = None) -> tuple[np.ndarray, list[str]]:
    """(r, ~600) float32 for the selected configs, computed chunk by chunk; z-scores and value
    shares come from `reference`, by default the file's `stat_rows`, never from the selected
    (label-dependent) rows. `static` is layout_static(g) when the caller already has it."""
    names = layout_names()
    if g.node_config_ids.size == 0:
        empty = np.zeros((1, len(names)), np.float32)
        return within_graph_z(np.zeros((rows.size, len(names)), np.float32),
                              _z_stats(empty, names, g.collection), names, g.collection)
    st = layout_static(g) if static is None else static
    if reference is not None:
        return within_graph_z(_chunked(g, rows, st, reference.table, chunk), reference[1:],
                              names, g.collection)
    sample = stat_rows(g, seed)
    sample_codes = config_codes(g, sample)
    table = value_counts(sample_codes)
    wanted = np.union1d(rows, sample)
    # Every selected row is in the sample (a file of at most STAT_CONFIGS configs): its codes
    # are known
    values = _chunked(g, wanted, st, table, chunk,
                      sample_codes if wanted.size == sample.size else None)
    return within_graph_z(values[np.searchsorted(wanted, rows)],
                          _z_stats(values[np.searchsorted(wanted, sample)], names, g.collection),
                          names, g.collection)


def _chunked(g: Graph, rows: np.ndarray, st: LayoutStatic, table: ValueCounts, chunk: int,
             codes: np.ndarray | None = None) -> np.ndarray:
    """_layout_chunk over `rows` a chunk at a time; codes: their config_codes when known."""
    parts = []
    starts = range(0, rows.size, chunk)
    # Only big files get a bar (4+ chunks); tqdm itself stays quiet off a terminal.
    for s in tqdm(starts, desc=f"{g.graph_id} configs", unit="chunk", disable=None
                  if len(starts) >= 4 else True, leave=False):
        parts.append(_layout_chunk(g, rows[s:s + chunk], st, table,
                                   None if codes is None
                                   else np.ascontiguousarray(codes[:, s:s + chunk])))
    return np.concatenate(parts) if parts else np.zeros((0, len(layout_names())), np.float32)


# Collections whose every group's sums (conv, dot, reshape) are z-scored within the graph, not
# only those over all configurable nodes: dev family CV +0.005 / +0.004 on the transformers'
# collections, -0.0014 / -0.0015 on the CNNs' (docs/records/family_cv.md)
Z_GROUP_COLLECTIONS = ("layout:nlp:default", "layout:nlp:random")


def z_prefixes(collection: str) -> tuple[str, ...]:
    """The names (prefixes) of the columns a collection's rows z-score within the graph."""
    groups = GROUPS if collection in Z_GROUP_COLLECTIONS else GROUPS[:1]
    return tuple(f"cfg.{grp}." for grp in groups)


def _z_columns(names: list[str], collection: str) -> list[int]:
    return [i for i, n in enumerate(names) if n.startswith(z_prefixes(collection))]


def _z_stats(reference: np.ndarray, names: list[str],
             collection: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and spread of the reference rows' z-scored columns (spread 1 where it is 0)."""
    ref = reference[:, _z_columns(names, collection)].astype(np.float64)
    if not ref.shape[0]:
        return np.zeros(ref.shape[1]), np.ones(ref.shape[1])
    sd = ref.std(axis=0)
    return ref.mean(axis=0), np.where(sd > 0, sd, 1.0)


def within_graph_z(values: np.ndarray, stats: tuple[np.ndarray, np.ndarray], names: list[str],
                   collection: str) -> tuple[np.ndarray, list[str]]:
    """Append z-scores of the collection's z_prefixes columns against a reference's mean and
    spread.

    Rankings are within a graph, but graphs differ in scale by orders of magnitude; a config's
    standing among its own graph's configs is what carries across graphs (solutions.md 7.7)."""
    cols = _z_columns(names, collection)
    mean, sd = stats
    z = (values[:, cols] - mean) / sd
    return (np.hstack([values, z.astype(np.float32)]),
            names + ["z." + names[i] for i in cols])


@extractor("layout", "basic")
def layout_basic(g: Graph, rows: np.ndarray, *, chunk: int, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Reference features: mean of each raw slot over nodes, share of all-default sections."""
    names = [f"cfg.slot_mean_{i}" for i in range(N_LAYOUT_CONFIG_FEAT)]
    names += [f"cfg.default_share_{s}" for s in ("out", "in", "ker")]
    parts = []
    for s in range(0, rows.size, chunk):
        x = g.node_config_feat[g.held(rows[s:s + chunk])].astype(np.float32)
        default = (x.reshape(x.shape[0], x.shape[1], 3, 6) < 0).all(axis=3)
        parts.append(np.hstack([x.mean(axis=1), default.mean(axis=1)]) if x.shape[1]
                     else np.zeros((x.shape[0], len(names)), np.float32))
    return (np.concatenate(parts) if parts else np.zeros((0, len(names)))).astype(np.float32), names


# ---------------------------------------------------------------- tile

def tile_root(g: Graph) -> int:
    """The kernel's output node: the last node flagged is_root, else the last node."""
    roots = np.flatnonzero(g.node_feat[:, IS_ROOT] > 0)
    return int(roots[-1]) if roots.size else g.node_feat.shape[0] - 1


def _conv_kernel_shape(g: Graph) -> np.ndarray:
    """Dims of the kernel operand of the last convolution (by its dimension numbers), else empty."""
    convs = np.flatnonzero(g.node_opcode == CONVOLUTION)
    if convs.size == 0:
        return np.zeros(0)
    ops = sorted(int(v) for v in g.edge_index[g.edge_index[:, 0] == convs[-1], 1])
    _, w = R.conv_operands(g.node_feat, int(convs[-1]), ops)
    if w < 0:
        return np.zeros(0)
    return np.array(R.shape_of(g.node_feat, w), np.float64)


def _dominant_op(g: Graph) -> int:
    reduces = (OPCODE_IDS["reduce"], OPCODE_IDS["reduce-window"])
    for i, ids in enumerate(((CONVOLUTION,), (DOT,), reduces)):
        if np.isin(g.node_opcode, ids).any():
            return i
    return 3


@extractor("tile", "full")
def tile_full(g: Graph, rows: np.ndarray, *, chunk: int = 0, seed: int = 0) -> tuple[np.ndarray, list[str]]:
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
        padded[:, layout[0]] = tiled_extent(padded[:, layout[0]], TILE_MINOR)
    if rank > 1:
        padded[:, layout[1]] = tiled_extent(padded[:, layout[1]], TILE_SECOND_MINOR)
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
            (minor % TILE_MINOR == 0)[:, None], np.log2(total_tiles * ktiles)[:, None],
            dom[None, :] * np.log2(total_tiles * ktiles)[:, None], dom[None, :] * waste[:, None]]
    names = [f"cfg.log2_{i}" for i in range(24)] + [f"cfg.log2_tiles_dim{d}" for d in range(6)]
    names += ["cfg.log2_total_tiles", "cfg.log2_pad_waste", "cfg.log2_padded_tile_bytes",
              "cfg.log2_tile_share_of_output", "cfg.log2_kernel_tiles", "cfg.log2_minor_tile",
              "cfg.log2_second_minor_tile", "cfg.minor_tile_mult128", "cfg.log2_all_tiles"]
    names += [f"cfg.{op}_x_log2_all_tiles" for op in ("conv", "dot", "reduce", "elementwise")]
    names += [f"cfg.{op}_x_pad_waste" for op in ("conv", "dot", "reduce", "elementwise")]
    return np.hstack(vals).astype(np.float32), names


@extractor("tile", "basic")
def tile_basic(g: Graph, rows: np.ndarray, *, chunk: int = 0, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Reference features: the 24 raw config values."""
    return g.config_feat[rows].astype(np.float32), [f"cfg.raw_{i}" for i in range(24)]

