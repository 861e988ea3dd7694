"""Every Numba kernel against a plain Python/NumPy reference, including degenerate graphs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from features.graph import longest_paths as GK
from features.graph import roles as R
from features.npz import read_kernels as RK
from features.rows import row_kernels as K
from features.npz.graph import Graph
from features.schema import OPCODE_IDS
from features.rows.per_config import (GROUP_OF_OPCODE, NODE_QUANTITIES, default_layouts,
                                      layout_full, layout_static, padded_shapes, value_counts)


def _fnv_reference(b: bytes) -> int:
    def step(h, x):
        h = ((h ^ x) * 1099511628211) % 2**64
        return h ^ (h >> 29)
    basis = 14695981039346656037
    lanes = [basis ^ (lane * 0x9E3779B97F4A7C15 % 2**64) for lane in range(4)]
    blocks = len(b) // 32
    for w in range(blocks):
        for lane in range(4):
            at = 32 * w + 8 * lane
            lanes[lane] = step(lanes[lane], int.from_bytes(bytes(b[at:at + 8]), "little"))
    def mix(h):   # MurmurHash3's fmix64
        h = ((h ^ (h >> 33)) * 0xFF51AFD7ED558CCD) % 2**64
        h = ((h ^ (h >> 33)) * 0xC4CEB9FE1A85EC53) % 2**64
        return h ^ (h >> 33)
    h = mix(lanes[0])
    for lane in lanes[1:]:
        h = step(h, mix(lane))
    for x in b[32 * blocks:]:
        h = step(h, int(x))
    return h


@pytest.mark.parametrize("width", [0, 5, 32, 77])   # 2 blocks of 32 bytes and 13 left at 77
def test_row_hash_is_four_lane_fnv1a_and_separates_rows(rng, width):
    rows = rng.integers(0, 256, (50, width)).astype(np.uint8)
    rows[7] = rows[3]
    got = RK.row_hash(rows)
    assert [int(v) for v in got] == [_fnv_reference(r) for r in rows]
    if width >= 5:
        assert got[7] == got[3] and np.unique(got).size == 49


@pytest.mark.parametrize("width", [76, 200])   # 76: 2 blocks of 32 bytes and 12 left over
def test_row_hash_separates_every_single_byte_change(width):
    base = np.zeros(width, np.uint8)
    changed = np.repeat(base[None], width * 7 + 1, axis=0)
    for pos in range(width):
        for j, value in enumerate((1, 2, 4, 8, 16, 128, 255)):
            changed[1 + 7 * pos + j, pos] = value
    assert np.unique(RK.row_hash(changed)).size == changed.shape[0]


def test_config_codes_are_base7(rng):
    ncf = rng.integers(-1, 6, (9, 4, 18)).astype(np.int8)
    ref = ((ncf.astype(np.int64) + 1) * 7 ** np.arange(17, -1, -1)).sum(axis=2)
    rows = np.array([8, 0, 3, 3])
    np.testing.assert_array_equal(K.config_codes(ncf, rows), ref[rows].T)


def _longest_path_reference(n, edges):
    depth = np.zeros(n, np.int64)
    for _ in range(n):
        for u, v in edges:
            depth[u] = max(depth[u], depth[v] + 1)
    return depth


@pytest.mark.parametrize("n", [1, 2, 30])
def test_longest_path_matches_relaxation(rng, n):
    pairs = {(int(u), int(v)) for u, v in rng.integers(0, n, (3 * n, 2)) if u > v}
    # ids shuffled so producers do not always have smaller ids than users
    perm = rng.permutation(n)
    edges = np.array([(perm[u], perm[v]) for u, v in sorted(pairs)], np.int64).reshape(-1, 2)
    np.testing.assert_array_equal(GK.longest_path(n, edges), _longest_path_reference(n, edges))


# ---------------------------------------------------------------- the layout kernel

def _factorize(rng, factors, rank):
    """The product of `factors` split into `rank` dims, in random order and grouping."""
    dims = np.ones(rank)
    for f in rng.permutation(factors):
        dims[rng.integers(rank)] *= f
    return dims


# pad and slice carry a same-rank operand's layout, padded under their own dims; concatenate
# does not (roles.SAME_RANK_LAYOUT)
SAME_RANK = [OPCODE_IDS[op] for op in ("pad", "slice", "concatenate")]


def random_layout_graph(rng, n: int, config_ids, c: int) -> Graph:
    """A random DAG with random shapes/layouts and random (valid-range) layout configs."""
    node_feat = np.zeros((n, 140), np.float32)
    rank = rng.integers(1, 5, n)
    for i in range(n):  # one volume for all, so any node can be a reshape of any other
        node_feat[i, 21:21 + rank[i]] = _factorize(rng, [1, 2, 4, 3, 5, 128], rank[i])
        node_feat[i, 28] = node_feat[i, 21:21 + rank[i]].prod()
        node_feat[i, 134:134 + rank[i]] = rng.permutation(rank[i])
        node_feat[i, 13 if i % 2 else 15] = 1
    node_feat[:, 93:107] = rng.integers(0, 4, 14)
    opcode = rng.choice([26, 34, 75, 2, 63, 13, *SAME_RANK], n)
    ids = np.asarray(config_ids, np.int64)
    opcode[ids] = rng.choice([26, 34, 75], ids.size)
    edges = sorted({(int(u), int(v)) for u in range(1, n)
                    for v in rng.choice(u, size=min(u, 2), replace=False)})
    ncf = np.full((c, ids.size, 18), -1, np.int8)
    for k, v in enumerate(ids):
        for s in range(3):
            r = int(rank[v]) if s == 0 else int(rng.integers(1, 5))
            rows = rng.random(c) < 0.6
            for j in np.flatnonzero(rows):
                ncf[j, k, 6 * s:6 * s + r] = rng.permutation(r)
    return Graph(path=Path("random.npz"), collection="layout:xla:random", split="train",
                 node_feat=node_feat, node_opcode=opcode.astype(np.int64),
                 edge_index=np.array(edges, np.int64).reshape(-1, 2),
                 config_runtime=np.ones(c, np.int64), node_config_ids=ids,
                 node_config_feat=ncf, node_splits=np.array([0, n], np.int64))


def _eff(section, fallback):
    return np.array(fallback) if (section < 0).all() else section.astype(np.int64)


def _known(layout, rank):
    return rank > 0 and 0 <= layout[0] < rank and (rank == 1 or 0 <= layout[1] < rank)


def _pad(shape, layout, rank):
    if not _known(layout, rank):
        return 1.0
    f = np.ceil(shape[layout[0]] / 128) * 128 / shape[layout[0]]
    if rank > 1:
        f *= np.ceil(shape[layout[1]] / 8) * 8 / shape[layout[1]]
    return f


def _bitcast(in_dims, in_layout, out_dims, out_layout):
    """Reference: simulate the reshape on a small stand-in array. Each tensor is laid out in
    memory by its layout (minor-to-major); a bitcast keeps every element's memory position."""
    size = int(np.prod(in_dims))
    logical = np.arange(size).reshape(in_dims)
    # memory order of the input: transpose to major..minor, then flatten
    in_mem = np.transpose(logical, tuple(reversed(in_layout))).ravel()
    out_logical = logical.reshape(out_dims)
    out_mem = np.transpose(out_logical, tuple(reversed(out_layout))).ravel()
    return np.array_equal(in_mem, out_mem)


ROLE_OF = ("batch", "contracting", "free", "spatial")


def chain_dims(g):
    """Per configurable position: (dims, bytes) of each non-configurable, non-parameter node
    whose output carries its layout (roles.layout_sources), for the chain's padding."""
    pos = {int(v): k for k, v in enumerate(g.node_config_ids)}
    src = R.layout_sources(g, R.split_edges(g), pos)
    nf = g.node_feat.astype(np.float64)
    dims = np.where(nf[:, 21:27] > 0, nf[:, 21:27], 1.0)
    out = {k: [] for k in pos.values()}
    for u, s in enumerate(src):
        if int(s) in pos and u not in pos and g.node_opcode[u] != 63:
            out[pos[int(s)]].append((dims[u], nf[u, 28] * (4 if u % 2 else 2)))   # f32 / bf16
    return out


def reference_quantities(ncf, j, k, st, shapes, eff_in, freq, modal, chains):
    """Plain-Python statement of the node quantities (features/per_config.NODE_QUANTITIES)."""
    si, sf, defaults, fixed, roles = st.si, st.sf, st.defaults, st.fixed, st.roles
    q = dict.fromkeys(NODE_QUANTITIES, 0.0)
    r_out, r_in, r_ker = si[k, K.S_RANK_OUT], si[k, K.S_RANK_IN], si[k, K.S_RANK_KER]
    unknown = [0]

    def checked(lay, rank, fallback):  # a layout not naming each dim once is unknown
        bad = sum(1 for s in range(6) if (s < rank and not 0 <= lay[s] < rank)
                  or (s >= rank and lay[s] >= 0))
        unknown[0] += bad
        return np.array(fallback) if bad else lay
    out = checked(_eff(ncf[j, k, 0:6], defaults[k, 0]), r_out, defaults[k, 0])
    p = si[k, K.S_IN_POS]
    prod = _eff(ncf[j, p, 0:6], defaults[p, 0]) if p >= 0 else fixed[k, 0]
    free_in, free_ker = p == K.ANY_SOURCE, si[k, K.S_KER_POS] == K.ANY_SOURCE
    ein = checked(_eff(ncf[j, k, 6:12], prod), r_in, prod)
    eff_in[k] = ein
    has_ker = si[k, K.S_HAS_KER] == 1
    ek = np.full(6, -1)
    if has_ker:
        pk = si[k, K.S_KER_POS]
        kprod = _eff(ncf[j, pk, 0:6], defaults[pk, 0]) if pk >= 0 else fixed[k, 1]
        ek = checked(_eff(ncf[j, k, 12:18], kprod), r_ker, kprod)
        q["ker_copy"] = float(not np.array_equal(ek, kprod) and not free_ker)
        q["ker_is_default"] = float((ncf[j, k, 12:18] < 0).all())
    eb, vo, vi, vk = sf[k, K.F_BYTES], sf[k, K.F_VOL_OUT], sf[k, K.F_VOL_IN], sf[k, K.F_VOL_KER]
    po, pi = _pad(shapes[k, 0], out, r_out), _pad(shapes[k, 1], ein, r_in)
    pk_ = _pad(shapes[k, 2], ek, r_ker) if has_ker else 1.0
    changed = not np.array_equal(out, defaults[k, 0])
    q.update(out_is_default=float((ncf[j, k, 0:6] < 0).all()),
             in_is_default=float((ncf[j, k, 6:12] < 0).all()),
             out_row_major=float(r_out > 0 and list(out[:r_out]) == list(range(r_out - 1, -1, -1))),
             out_eq_in=float(np.array_equal(out, ein)), out_changed=float(changed),
             out_changed_bytes=changed * vo * eb,
             out_log2_pad=np.log2(po), out_pad_bytes=(po - 1) * vo * eb,
             in_log2_pad=np.log2(pi), in_pad_bytes=(pi - 1) * vi * eb,
             ker_pad_bytes=(pk_ - 1) * vk * eb,
             in_copy=float(not np.array_equal(ein, prod) and not free_in),
             user_copy=si[k, K.S_PLAIN_USERS] * changed,
             output_copy_bytes=vo * eb if changed and si[k, K.S_TO_OUTPUT] == 1 else 0.0,
             out_log2_minor=np.log2(shapes[k, 0][out[0]]) if r_out > 0 and out[0] < r_out else 0.0,
             out_log2_second_minor=(np.log2(shapes[k, 0][out[1]]) if r_out > 1 and out[1] < r_out
                                    else 0.0),
             in_log2_minor=(np.log2(shapes[k, 1][ein[0]]) if r_in > 0 and 0 <= ein[0] < r_in
                            else 0.0),
             out_minor_mult128=float(r_out > 0 and out[0] < r_out
                                     and shapes[k, 0][out[0]] % 128 == 0),
             tiled_bytes=(po * vo + pi * vi + pk_ * vk) * eb,
             value_freq=freq, differs_from_modal=modal, layout_unknown=float(unknown[0]),
             chain_pad_bytes=sum((_pad(d, out, r_out) - 1) * nb for d, nb in chains[k]),
             chain_tiled_bytes=sum(_pad(d, out, r_out) * nb for d, nb in chains[k]))
    if si[k, K.S_IS_RESHAPE] == 1 and not _bitcast(
            [int(d) for d in shapes[k, 1][:r_in]], list(ein[:r_in]),
            [int(d) for d in shapes[k, 0][:r_out]], list(out[:r_out])):
        q["reshape_copy"], q["reshape_copy_bytes"] = 1.0, vo * eb
    for t, (lay, r) in enumerate(((out, r_out), (ein, r_in), (ek, r_ker))):
        if t == 2 and not has_ker:
            continue
        for slot, pos in enumerate(("minor", "second")):
            if r > slot and 0 <= lay[slot] < r and roles[k, t, lay[slot]] >= 0:
                name = ("out", "in", "ker")[t]
                q[f"{name}_{pos}_is_{ROLE_OF[roles[k, t, lay[slot]]]}"] = 1.0
    q["in_copy_bytes"] = q["in_copy"] * vi * eb
    q["ker_copy_bytes"] = q["ker_copy"] * vk * eb
    q["user_copy_bytes"] = q["user_copy"] * vo * eb
    first = si[k, K.S_SIB_FIRST]
    if first >= 0 and not np.array_equal(ein, eff_in[first]):
        q["sibling_mismatch"], q["sibling_bytes"] = 1.0, vi * eb
    return q


def reference_values(codes, sample):
    """Plain counting: (nc, r) share of the sample's configs giving each node the same value,
    and whether the value is not the node's most common one (the smallest among ties); the
    share as float32, as the features hold it."""
    freq = np.array([[np.mean(sample[k] == c) if sample.shape[1] else 0.0 for c in codes[k]]
                     for k in range(codes.shape[0])], np.float32).reshape(codes.shape)
    modal = []
    for k in range(codes.shape[0]):
        values, counts = np.unique(sample[k], return_counts=True)
        modal.append(values[counts == counts.max()].min() if values.size else -1)
    return freq, (codes != np.array(modal).reshape(-1, 1)).astype(float)


def reference_features(g, rows, freq, modal):
    st = layout_static(g)
    shapes = st.shapes[..., 0]  # the dims; the reference takes its own log2 and padding
    nc, chains = g.node_config_ids.size, chain_dims(g)
    out = np.zeros((rows.size, K.N_GROUPS * K.N_QUANT))
    for r, j in enumerate(rows):
        eff_in = {}
        for k in range(nc):
            q = reference_quantities(g.node_config_feat, j, k, st, shapes, eff_in, freq[k, r],
                                     modal[k, r], chains)
            vec = np.array([q[name] for name in NODE_QUANTITIES])
            out[r, :K.N_QUANT] += vec
            if st.si[k, K.S_GROUP] < 3:
                g_ = st.si[k, K.S_GROUP] + 1
                out[r, g_ * K.N_QUANT:(g_ + 1) * K.N_QUANT] += vec
    return out


@pytest.mark.parametrize("n, ids, c", [
    (12, [3, 7, 5, 10], 25),          # non-contiguous, unsorted configurable ids
    (40, list(range(5, 40, 3)), 9),
    (60, list(range(2, 60, 4)), 6),   # pads, slices, concatenates of configurable nodes
    (6, [4], 1),                      # one configurable node, one config
    (1, [0], 3),                      # a single node, no edges at all
    (8, [], 4),                       # no configurable node
])
def test_layout_kernel_matches_reference(rng, n, ids, c):
    g = random_layout_graph(rng, n, ids, c)
    rows = np.arange(c)
    codes = K.config_codes(g.node_config_feat, rows)
    freq, modal = reference_values(codes, codes[:, ::2])
    st = layout_static(g)
    got = K.layout_config_features(codes, st.si, st.sf, st.shapes, st.pad, st.defaults,
                                   st.fixed, st.roles, *value_counts(codes[:, ::2]), 2)
    np.testing.assert_allclose(got, reference_features(g, rows, freq, modal), rtol=1e-9)
    values, names = layout_full(g, rows[::-1].copy(), chunk=2)
    assert values.shape == (c, len(names)) and np.isfinite(values).all()
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_layout_kernel_on_repeated_node_values(rng, n_blocks):
    """Each section of each node takes one of 3 values, drawn apart, so a node's own value
    repeats across configs while the sections of its sources and sibling vary on their own:
    what the kernel computes once per distinct (value, what it reads of other nodes) must still
    match the reference row by row."""
    g = random_layout_graph(rng, 40, list(range(3, 40, 2)), 60)
    ncf = g.node_config_feat.copy()
    pick = rng.integers(0, 3, ncf.shape[:2] + (3,))
    for sec in range(3):
        g.node_config_feat[:, :, 6 * sec:6 * sec + 6] = ncf[pick[:, :, sec], np.arange(
            ncf.shape[1])[None, :], 6 * sec:6 * sec + 6]
    rows = rng.permutation(60)[:45]
    distinct = [np.unique(g.node_config_feat[rows, k], axis=0).shape[0]
                for k in range(ncf.shape[1])]
    assert max(distinct) < rows.size / 2     # the kernel reuses what it computed
    codes = K.config_codes(g.node_config_feat, rows)
    freq, modal = reference_values(codes, codes[:, ::3])
    st = layout_static(g)
    assert (st.si[:, K.S_IN_POS] >= 0).any() and (st.si[:, K.S_SIB_FIRST] >= 0).any()
    got = K.layout_config_features(codes, st.si, st.sf, st.shapes, st.pad, st.defaults,
                                   st.fixed, st.roles, *value_counts(codes[:, ::3]), n_blocks)
    np.testing.assert_allclose(got, reference_features(g, rows, freq, modal), rtol=1e-9)


def test_value_shares_and_modal_of_the_sample(rng):
    """One conv, dot and reshape node, so each has a group block of its own: its value's share
    of the sampled configs, 0 for a value the sample never saw, and whether it is not the most
    common value."""
    g = random_layout_graph(rng, 8, [2, 4, 6], 40)
    g.node_opcode[[2, 4, 6]] = list(GROUP_OF_OPCODE)     # conv, dot, reshape
    ncf = g.node_config_feat
    ncf[:] = rng.integers(-1, 1, ncf.shape)
    ncf[:, :, 3:] = -1                               # few distinct values, so repeats occur
    ncf[:, 1] = -1                                   # node 1 never changes
    ncf[39, 2, :] = 0                                # a value the sample never saw
    sample, rows = np.arange(0, 39, 2), np.array([5, 0, 39, 5])
    codes = K.config_codes(ncf, np.arange(40))
    st = layout_static(g)
    out = K.layout_config_features(np.ascontiguousarray(codes[:, rows]), st.si, st.sf,
                                   st.shapes, st.pad, st.defaults, st.fixed, st.roles,
                                   *value_counts(codes[:, sample]), 1)
    assert (st.si[:, K.S_GROUP] == [0, 1, 2]).all()
    freq = [out[:, (k + 1) * K.N_QUANT + K.Q_VALUE_FREQ] for k in range(3)]
    modal = [out[:, (k + 1) * K.N_QUANT + K.Q_DIFFERS_FROM_MODAL] for k in range(3)]
    assert np.allclose(freq[1], 1.0) and not modal[1].any()
    for k in (0, 2):
        keys = [ncf[j, k].tobytes() for j in range(40)]
        seen = [keys[j] for j in sample]
        share = np.array([seen.count(keys[j]) / sample.size for j in rows])
        np.testing.assert_allclose(freq[k], share, rtol=1e-6)
        most = max(set(seen), key=seen.count)
        if seen.count(most) > max(seen.count(x) for x in set(seen) - {most}):
            np.testing.assert_array_equal(modal[k], [keys[j] != most for j in rows])
    assert freq[2][2] == 0.0 and modal[2][2] == 1.0


@pytest.mark.parametrize("collection, groups", [
    ("layout:nlp:random", ("all", "conv", "dot", "reshape")),
    ("layout:xla:random", ("all",)),
])
def test_within_graph_z_scores_against_the_files_configs(rng, collection, groups):
    """A file of fewer than STAT_CONFIGS configs is its own reference: each z column is its raw
    column standardised over all of the file's configs (NumPy), whichever rows are asked for
    and in what order; every group's sums (one conv, dot and reshape node each) on the
    transformers' collections, those over all nodes elsewhere, never the per-node means."""
    g = random_layout_graph(rng, 12, [3, 6, 9], 30)._replace(collection=collection)
    g.node_opcode[[3, 6, 9]] = list(GROUP_OF_OPCODE)     # conv, dot, reshape
    every, _ = layout_full(g, np.arange(30), chunk=7)
    rows = np.array([29, 4, 17])
    values, names = layout_full(g, rows, chunk=7)
    z = [n[2:] for n in names if n.startswith("z.")]
    assert sorted({n.split(".")[1] for n in z}) == sorted(groups)
    for grp in groups:
        raw = [i for i, n in enumerate(names) if n.startswith(f"cfg.{grp}.")]
        assert raw and all(names[i] in z for i in raw)
        for i in raw:
            x = every[:, i].astype(np.float64)
            sd = x.std() if x.std() > 0 else 1.0
            np.testing.assert_allclose(values[:, names.index(f"z.{names[i]}")],
                                       (x[rows] - x.mean()) / sd, rtol=1e-4, atol=1e-4)


def test_merge_conversions_match_counting(rng):
    """Each merge's two sides: a configurable source's effective output layout (its section, or
    its default when the section is all -1) or a fixed layout; count where they differ."""
    c, nc, m = 30, 5, 12
    ncf = rng.integers(-1, 3, (c, nc, 18)).astype(np.int8)
    ncf[::3, :, :6] = -1                                  # default output sections
    defaults = rng.integers(-1, 3, (nc, 3, 6))
    merge_pos = rng.integers(-1, nc, (m, 2))
    merge_fixed = rng.integers(-1, 3, (m, 2, 6))
    merge_fixed[::2, 1] = defaults[merge_pos[::2, 0].clip(0), 0]   # some sides agree
    merge_bytes = rng.random(m) * 100
    rows = rng.permutation(c)[:20]
    got = K.merge_conversions(ncf, rows, merge_pos, merge_fixed, merge_bytes, defaults)
    for r, j in enumerate(rows):
        sides = [[_eff(ncf[j, p, :6], defaults[p, 0]) if p >= 0 else merge_fixed[i, t]
                  for t, p in enumerate(merge_pos[i])] for i in range(m)]
        differ = np.array([not np.array_equal(a, b) for a, b in sides])
        np.testing.assert_allclose(got[r], [differ.sum(), merge_bytes[differ].sum()])
    assert 0 < got[:, 0].max() and got[:, 0].min() < m


def test_static_tables_on_a_hand_built_graph():
    """p0 -> a (reshape, cfg) ; p0 -> b (dot, cfg, weights w) ; a -> add ; b -> add."""
    nf = np.zeros((5, 140), np.float32)
    shapes = {0: (8, 256), 1: (2048,), 2: (256, 64), 3: (8, 64), 4: (2048,)}
    for i, s in shapes.items():
        nf[i, 21:21 + len(s)] = s
        nf[i, 28] = np.prod(s)
        nf[i, 134:134 + len(s)] = range(len(s) - 1, -1, -1)
        nf[i, 13] = 1
    # nodes: 0 p0, 1 a=reshape(p0), 2 w, 3 b=dot(p0, w), 4 add(a, ...)
    edges = np.array([[1, 0], [3, 0], [3, 2], [4, 1], [4, 3]], np.int64)
    ncf = np.full((2, 2, 18), -1, np.int8)
    ncf[1, 1, 6:8] = [0, 1]
    ncf[1, 1, 12:14] = [1, 0]
    g = Graph(Path("hand.npz"), "layout:nlp:random", "train", nf,
              np.array([63, 75, 63, 34, 2]), edges, np.ones(2, np.int64),
              node_config_ids=np.array([1, 3]), node_config_feat=ncf,
              node_splits=np.array([0, 5]))
    st = layout_static(g)
    si, sf, shp, pad, defaults = st.si, st.sf, st.shapes, st.pad, st.defaults
    assert si[:, K.S_IN_POS].tolist() == [-1, -1]
    assert si[1, K.S_HAS_KER] == 1 and si[0, K.S_HAS_KER] == 0
    assert si[:, K.S_SIB_FIRST].tolist() == [-1, 0]       # both read p0
    # the add carries a's layout (same shape, a configurable source): a's output flows on to the
    # program output, b's meets the add as a plain user
    assert si[:, K.S_PLAIN_USERS].tolist() == [0, 1]
    assert si[:, K.S_TO_OUTPUT].tolist() == [1, 0]
    # dot (8, 256) x (256, 64) -> (8, 64): lhs dim 1 and rhs dim 0 are contracted
    assert st.roles[1, 1, :2].tolist() == [2, 1] and st.roles[1, 2, :2].tolist() == [1, 2]
    assert sf[1, K.F_VOL_KER] == 256 * 64 and sf[1, K.F_BYTES] == 4
    assert sf[:, K.F_CHAIN_BYTES].tolist() == [2048 * 4, 0.0]   # the add carries a's layout
    np.testing.assert_array_equal(defaults[0, 0], [0, -1, -1, -1, -1, -1])
    np.testing.assert_array_equal(shp[1, 2, :3, 0], [256, 64, 1])
    assert pad[1, 1, 1, 0] == 1.0     # dot input (8, 256): minor 256 and 2nd-minor 8 fit tiles
    assert pad[1, 0, 0, 1] == 16.0    # dot output (8, 64) with dim 0 minor: 8 -> 128, 64 fits
    assert pad[1, 0, 0, 6] == 16.0    # same minor, no 2nd-minor
    assert pad[1, 0, 1, 0] == 2.0     # dim 1 minor: 64 -> 128, 8 fits
    assert (default_layouts(nf)[1] == [0, -1, -1, -1, -1, -1]).all()
    assert padded_shapes(nf)[1, :2].tolist() == [2048, 1]


FLOAT_BAD = (6.0, -2.0, 2.5, -1.5, 5.5, 1e-7, np.nan, np.inf, -np.inf, 1e30, -1e30)
INT_BAD = (6, -2, 127, -128, 2**31 - 1)


@pytest.mark.parametrize("dtype, bad_values", [
    (np.float32, FLOAT_BAD), (np.float64, FLOAT_BAD + (5 + 1e-12, -1 - 1e-12)),
    (np.int64, INT_BAD + (2**62, -2**62)), (np.uint64, (6, 255, 2**64 - 1)),
    (np.int32, INT_BAD)])
def test_to_int8_checked_converts_and_finds_the_first_bad_value(rng, dtype, bad_values):
    values = rng.integers(-1 if np.dtype(dtype).kind != "u" else 0, 6, (5, 4, 18)).astype(dtype)
    out = np.empty(values.shape, np.int8)
    assert RK.to_int8_checked(values, out) == -1
    np.testing.assert_array_equal(out, values.astype(np.int8))
    if np.dtype(dtype).kind == "f":         # -0.0 is the integer 0
        signed_zero = values.copy()
        signed_zero[2, 3, 4] = -0.0
        assert RK.to_int8_checked(signed_zero, out) == -1 and out[2, 3, 4] == 0
    for bad in bad_values:
        broken = values.copy()
        broken[3, 1, 7] = bad
        broken[4, 0, 0] = 9
        assert RK.to_int8_checked(broken, out) == np.ravel_multi_index((3, 1, 7), values.shape), bad


def _slots_reference(ncf):
    c, nc = ncf.shape[:2]
    return (ncf >= 0).reshape(c, nc, 3, 6).sum(axis=3).max(axis=0, initial=0)


@pytest.mark.parametrize("nc", [1, 2, 3, 4, 5, 9])   # 24-byte blocks and 0-3 sections left over
def test_slots_set_matches_numpy(rng, nc):
    ncf = np.full((30, nc, 18), -1, np.int8)
    for j, k, s in zip(rng.integers(0, 30, 40), rng.integers(0, nc, 40), rng.integers(0, 3, 40)):
        r = int(rng.integers(1, 7))
        ncf[j, k, 6 * s:6 * s + r] = rng.permutation(r)
    ncf[11, nc - 1, 12:] = 5                         # every slot of the last section set
    np.testing.assert_array_equal(RK.slots_set(ncf), _slots_reference(ncf))
    assert RK.slots_set(np.zeros((0, 3, 18), np.int8)).tolist() == [[0, 0, 0]] * 3
    assert RK.slots_set(np.zeros((4, 0, 18), np.int8)).shape == (0, 3)


def test_add_slots_set_raises_what_earlier_pieces_left(rng):
    ncf = rng.integers(-1, 6, (40, 7, 18)).astype(np.int8)
    ncf[ncf > 1] = -1
    used = np.zeros(7 * 3, np.int64)
    for lo in range(0, 40, 9):
        RK.add_slots_set(ncf[lo:lo + 9].reshape(-1, 7 * 18).view(np.uint8), used)
    np.testing.assert_array_equal(used.reshape(7, 3), _slots_reference(ncf))


def test_add_slots_set_refuses_counts_of_another_width():
    with pytest.raises(ValueError, match="6 values per entry"):
        RK.add_slots_set(np.zeros((2, 36), np.uint8), np.zeros(5, np.int64))
