"""Operands, call edges and layout chains on hand-built graphs that follow the real encoder's
conventions: edge rows sorted, weights (parameters) with lower ids than the activations they
meet, and caller -> called-root edges."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from features.graph import roles as R
from features.schema import OPCODE_IDS, TRANSPOSE
from features.rows import row_kernels as K
from features.npz.graph import Graph
from features.rows.per_config import CONTEXTS, layout_full, layout_static
from features.graph.per_graph import signed_log

ADD, MAX, BROADCAST, REDUCE, CONVERT = 2, 57, 13, 70, 25
PAD, SLICE, CONCATENATE, DOT, DUS = (OPCODE_IDS[op] for op in (
    "pad", "slice", "concatenate", "dot", "dynamic-update-slice"))


class Builder:
    """Nodes with shapes and row-major layouts; edges given as (user, operand)."""

    def __init__(self):
        self.shapes, self.ops, self.edges, self.extra = [], [], [], {}

    def node(self, opcode, shape, *operands, root=False, **cols):
        v = len(self.shapes)
        self.shapes.append(tuple(shape))
        self.ops.append(opcode)
        self.edges += [(v, o) for o in operands]
        self.extra[v] = dict(cols, root=root)
        return v

    def graph(self, config_ids, ncf=None, c=3) -> Graph:
        n = len(self.shapes)
        nf = np.zeros((n, 140), np.float32)
        for v, s in enumerate(self.shapes):
            nf[v, 21:21 + len(s)] = s
            nf[v, 28] = np.prod(s)
            nf[v, 134:134 + len(s)] = range(len(s) - 1, -1, -1)
            nf[v, 13] = 1  # f32
            nf[v, 0] = float(self.extra[v]["root"])
            for col, val in self.extra[v].items():
                if isinstance(col, str) and col.startswith("c"):
                    nf[v, int(col[1:])] = val
        ids = np.asarray(config_ids, np.int64)
        if ncf is None:
            ncf = np.full((c, ids.size, 18), -1, np.int8)
        return Graph(Path("hand.npz"), "layout:xla:random", "train", nf,
                     np.array(self.ops, np.int64), np.array(sorted(self.edges), np.int64),
                     np.ones(ncf.shape[0], np.int64), node_config_ids=ids, node_config_feat=ncf,
                     node_splits=np.array([0, n], np.int64))


def conv_cols(window=(3, 3)):
    """NHWC input, HWIO kernel, NHWC output dimension numbers (node_feat 93-106)."""
    return {"c93": 0, "c94": 3, "c95": 1, "c96": 2, "c99": 2, "c100": 3, "c101": 0, "c102": 1,
            "c105": 0, "c106": 3, "c37": window[0], "c38": window[1]}


def test_conv_kernel_is_found_by_dims_not_by_id():
    b = Builder()
    w = b.node(63, (3, 3, 16, 32))               # the weights come first, as in real files
    x = b.node(63, (8, 28, 28, 16))
    conv = b.node(26, (8, 28, 28, 32), w, x, root=True, **conv_cols())
    g = b.graph([conv])
    edges = R.split_edges(g)
    assert edges.operands[conv] == [w, x]        # id order would make w the input
    assert R.conv_operands(g.node_feat, conv, edges.operands[conv]) == (x, w)
    st = layout_static(g)
    assert st.sf[0, K.F_VOL_IN] == 8 * 28 * 28 * 16 and st.sf[0, K.F_VOL_KER] == 3 * 3 * 16 * 32
    # input NHWC: feature (3) is contracted, batch 0, spatial 1-2; kernel HWIO; output NHWC
    assert st.roles[0, 1, :4].tolist() == [R.BATCH, R.SPATIAL, R.SPATIAL, R.CONTRACTING]
    assert st.roles[0, 2, :4].tolist() == [R.SPATIAL, R.SPATIAL, R.CONTRACTING, R.FREE]
    assert st.roles[0, 0, :4].tolist() == [R.BATCH, R.SPATIAL, R.SPATIAL, R.FREE]


def test_pointwise_conv_with_square_weights_still_finds_the_kernel():
    b = Builder()
    w = b.node(63, (1, 1, 64, 64))
    x = b.node(63, (1, 1, 64, 64))               # batch 1, spatial 1x1: shapes equal
    conv = b.node(26, (1, 1, 64, 64), w, x, root=True, **conv_cols(window=(1, 1)))
    g = b.graph([conv])
    x_found, w_found = R.conv_operands(g.node_feat, conv, R.split_edges(g).operands[conv])
    assert {x_found, w_found} == {w, x}          # undecidable from shapes; both found, no crash


def test_dot_operands_and_contracting_dims_from_the_output():
    # lhs (8, 64, 32) x rhs (8, 32, 16) -> (8, 64, 16): batch 8, contract 32
    assert R.dot_roles((8, 64, 32), (8, 32, 16), (8, 64, 16)) == (
        (R.BATCH, R.FREE, R.CONTRACTING), (R.BATCH, R.CONTRACTING, R.FREE))
    # the weight (lower id) is the rhs: (128, 256) x (256, 512) with x = (128, 256)
    b = Builder()
    w = b.node(63, (256, 512))
    x = b.node(63, (128, 256))
    dot = b.node(34, (128, 512), w, x, root=True)
    g = b.graph([dot])
    lhs, rhs, lr, rr = R.dot_operands(g.node_feat, dot, R.split_edges(g).operands[dot], 2)
    assert (lhs, rhs) == (x, w)
    assert lr == (R.FREE, R.CONTRACTING) and rr == (R.CONTRACTING, R.FREE)
    # contracting a non-last lhs dim: (32, 64)^T-style einsum 'kn,km->nm'
    assert R.dot_roles((32, 64), (32, 16), (64, 16)) == ((R.CONTRACTING, R.FREE),
                                                         (R.CONTRACTING, R.FREE))


def test_call_edges_are_not_operands_and_called_parameters_stand_for_the_caller_operand():
    b = Builder()
    p_x = b.node(63, (8, 128))
    reshape = b.node(75, (8, 128), p_x)          # configurable
    a = b.node(63, ())                           # called computation: add(a, b), its root
    bb = b.node(63, ())
    add = b.node(ADD, (), a, bb, root=True)
    init = b.node(24, ())
    red = b.node(REDUCE, (8,), reshape, init, add, root=True)
    g = b.graph([reshape])
    edges = R.split_edges(g)
    assert edges.operands[red] == [reshape, init]          # the edge to `add` is a call
    assert red not in edges.users[add]
    # a reducer's params are (accumulator, element): only one operand, the init, is scalar
    assert list(edges.param_source.values()) == [init]
    # the reshape's output goes to the reduce (a plain user), not to the called computation
    plain, _ = R.chain_ends(g, edges, R.layout_sources(g, edges, {reshape: 0}), reshape,
                               {reshape: 0})
    assert plain == 1


def test_called_parameters_follow_the_caller_operands_by_shape_and_number():
    """call(x, y) of a computation whose conv reads param 1 (y): the conv's input is y."""
    b = Builder()
    w = b.node(63, (1, 1, 16, 16))
    y = b.node(63, (4, 7, 7, 16))
    x = b.node(63, (4, 7, 7, 16))
    p1 = b.node(63, (4, 7, 7, 16), c30=1)
    p0 = b.node(63, (4, 7, 7, 16), c30=0)
    pw = b.node(63, (1, 1, 16, 16), c30=2)
    conv = b.node(26, (4, 7, 7, 16), pw, p1, root=True, **conv_cols((1, 1)))
    call = b.node(14, (4, 7, 7, 16), w, y, x, conv, root=True)
    g = b.graph([conv])
    edges = R.split_edges(g)
    assert edges.operands[call] == [w, y, x]
    # operands of the caller in id order take the params in number order, shape by shape
    assert edges.param_source == {p0: y, p1: x, pw: w}
    src = R.layout_sources(g, edges, {conv: 0})
    assert src[p1] == x and src[pw] == w


def test_layout_follows_elementwise_chains_between_configurable_nodes():
    """conv1 -> add(bias) -> max(relu) -> convert -> conv2: conv2 receives conv1's layout."""
    b = Builder()
    w1 = b.node(63, (3, 3, 16, 16))
    w2 = b.node(63, (3, 3, 16, 16))
    x = b.node(63, (8, 28, 28, 16))
    bias = b.node(63, (16,))
    conv1 = b.node(26, (8, 28, 28, 16), w1, x, **conv_cols())
    bcast = b.node(BROADCAST, (8, 28, 28, 16), bias)
    add = b.node(ADD, (8, 28, 28, 16), conv1, bcast)
    relu = b.node(MAX, (8, 28, 28, 16), add)
    cvt = b.node(CONVERT, (8, 28, 28, 16), relu)
    conv2 = b.node(26, (8, 28, 28, 16), w2, cvt, root=True, **conv_cols())
    ncf = np.full((3, 2, 18), -1, np.int8)
    ncf[1, 0, 0:4] = [2, 1, 3, 0]                # conv1 writes a non-default layout ...
    ncf[2, 0, 0:4] = [2, 1, 3, 0]
    ncf[2, 1, 6:10] = [2, 1, 3, 0]               # ... which conv2 asks for in config 2
    g = b.graph([conv1, conv2], ncf)
    st = layout_static(g)
    assert st.si[1, K.S_IN_POS] == 0             # through add, max and convert
    assert st.si[0, K.S_IN_POS] == -1
    assert st.si[0, K.S_PLAIN_USERS] == 0        # conv1's only consumer is conv2
    values, names = layout_full(g, np.arange(3), chunk=2)
    col = names.index("cfg.all.in_copy")
    # config 0: all default, no copy; 1: conv1 changes, conv2's default input follows it (no
    # copy, the compiler takes what arrives); 2: both agree, no copy
    assert values[:, col].tolist() == [0.0, 0.0, 0.0]
    ncf[2, 1, 6:10] = [3, 2, 1, 0]               # conv2 asks for the default: now a copy
    values, _ = layout_full(b.graph([conv1, conv2], ncf), np.arange(3), chunk=2)
    assert values[:, col].tolist() == [0.0, 0.0, 1.0]


def test_ops_that_carry_a_layout_are_padded_with_it():
    """conv1 -> add(bias) -> max -> convert -> conv2: add, max and convert carry conv1's output
    layout, so its padding costs them too; the broadcast and the parameters move no such data."""
    b = Builder()
    w = b.node(63, (3, 3, 16, 16))
    x = b.node(63, (8, 28, 28, 16))
    conv1 = b.node(26, (8, 28, 28, 16), w, x, **conv_cols())
    bcast = b.node(BROADCAST, (8, 28, 28, 16), b.node(63, (16,)))
    relu = b.node(MAX, (8, 28, 28, 16), b.node(ADD, (8, 28, 28, 16), conv1, bcast))
    conv2 = b.node(26, (8, 28, 28, 16), w, b.node(CONVERT, (8, 28, 28, 16), relu), root=True,
                   **conv_cols())
    ncf = np.full((2, 2, 18), -1, np.int8)
    ncf[1, 0, 0:4] = [2, 1, 3, 0]                # conv1: W minor (28 -> 128), H 2nd (28 -> 32)
    g = b.graph([conv1, conv2], ncf)
    tensor = 8 * 28 * 28 * 16 * 4.0
    np.testing.assert_array_equal(layout_static(g).sf[:, K.F_CHAIN_BYTES], [3 * tensor, 0.0])
    values, names = layout_full(g, np.arange(2), chunk=4)
    row_major = (128 / 16) * (32 / 28)           # default: C minor (16 -> 128), W 2nd (28 -> 32)
    w_minor = (128 / 28) * (32 / 28)
    for name, per_config in (("chain_pad_bytes", [row_major - 1, w_minor - 1]),
                             ("chain_tiled_bytes", [row_major, w_minor])):
        np.testing.assert_allclose(values[:, names.index(f"cfg.all.{name}")],
                                   signed_log(3 * tensor * np.array(per_config)), rtol=1e-6)


def test_pad_and_slice_carry_their_operands_layout_and_concatenate_does_not():
    """reshape [8,1,512] -> pad to [8,256,512] -> add: the pad and the add carry the reshape's
    layout (XLA lays a pad out as its operand), not the pad value's. A dot reading a slice of a
    configurable node reads that node's layout; an update written into a tensor of another
    layout is a conversion where they differ. A concatenate keeps its own layout."""
    b = Builder()
    x = b.node(63, (8, 512))
    reshape = b.node(75, (8, 1, 512), x)                         # configurable
    pad = b.node(PAD, (8, 256, 512), reshape, b.node(63, ()))
    b.node(ADD, (8, 256, 512), pad, b.node(63, (8, 256, 512)), root=True)
    ncf = np.full((2, 1, 18), -1, np.int8)
    ncf[1, 0, 0:3] = [0, 1, 2]                   # the batch dim (8) minor-most
    g = b.graph([reshape], ncf)
    big = 8 * 256 * 512 * 4.0
    np.testing.assert_array_equal(layout_static(g).sf[:, K.F_CHAIN_BYTES], [2 * big])
    # padded as [8,256,512] (8 -> 128 minor, 256 2nd-minor: 16x), not as the reshape's
    # [8,1,512] (8 -> 128, 1 -> 8: 128x); row-major pads neither
    values, names = layout_full(g, np.arange(2), chunk=4)
    np.testing.assert_allclose(values[:, names.index("cfg.all.chain_pad_bytes")],
                               signed_log(np.array([0.0, 15 * 2 * big])), rtol=1e-6)
    assert R.layout_sources(g, R.split_edges(g), {reshape: 0})[pad] == reshape

    b = Builder()
    a = b.node(75, (64, 256), b.node(63, (256, 64)))             # configurable
    part = b.node(SLICE, (32, 256), a)
    dot = b.node(DOT, (32, 64), part, b.node(63, (256, 64)))
    dus = b.node(DUS, (64, 256), b.node(63, (64, 256)), part, b.node(63, ()), b.node(63, ()))
    cat = b.node(CONCATENATE, (64, 256), part, b.node(63, (32, 256)), root=True)
    g = b.graph([a, dot])
    assert layout_static(g).si[1, K.S_IN_POS] == 0   # the dot reads a's layout
    edges = R.split_edges(g)
    src = R.layout_sources(g, edges, {a: 0, dot: 1})
    assert src[part] == a and src[dus] == a and src[cat] == cat
    # the update carries a's layout into the parameter's tensor: a conversion if they differ
    assert R.merge_points(g, edges, src) == [(dus, a, dus - 3)]


def test_elementwise_merge_of_two_layouts_is_a_conversion():
    """Residual add of two conv outputs: different output layouts force a conversion."""
    b = Builder()
    w1, w2 = b.node(63, (1, 1, 16, 16)), b.node(63, (1, 1, 16, 16))
    x = b.node(63, (8, 28, 28, 16))
    c1 = b.node(26, (8, 28, 28, 16), w1, x, **conv_cols((1, 1)))
    c2 = b.node(26, (8, 28, 28, 16), w2, x, **conv_cols((1, 1)))
    b.node(ADD, (8, 28, 28, 16), c1, c2, root=True)
    ncf = np.full((2, 2, 18), -1, np.int8)
    ncf[1, 1, 0:4] = [2, 1, 3, 0]
    values, names = layout_full(b.graph([c1, c2], ncf), np.arange(2), chunk=4)
    merges = values[:, names.index("cfg.all.merge_conversions")]
    assert merges.tolist() == [0.0, 1.0]


def test_slot_values_at_or_above_the_rank_are_flagged_not_padded():
    b = Builder()
    x = b.node(63, (8, 128))
    r = b.node(75, (8, 128), x, root=True)
    ncf = np.full((2, 1, 18), -1, np.int8)
    ncf[1, 0, 0:2] = [3, 0]                      # dim 3 of a rank-2 tensor
    values, names = layout_full(b.graph([r], ncf), np.arange(2), chunk=4)
    assert values[:, names.index("cfg.all.layout_unknown")].tolist() == [0.0, 1.0]
    pad = values[:, names.index("cfg.all.out_log2_pad")]
    assert pad[1] == pad[0] == 0.0               # read as the default, not as 128x padding


def test_reshape_that_reorders_memory_is_a_copy():
    """(8, 128) -> (1024,): a bitcast in row-major, a copy when the input is column-major."""
    b = Builder()
    x = b.node(63, (8, 128))
    r = b.node(75, (1024,), x, root=True)
    ncf = np.full((2, 1, 18), -1, np.int8)
    ncf[1, 0, 6:8] = [0, 1]                      # input minor-to-major (0, 1): column-major
    values, names = layout_full(b.graph([r], ncf), np.arange(2), chunk=4)
    assert values[:, names.index("cfg.all.reshape_copy")].tolist() == [0.0, 1.0]


def test_node_contexts_tell_attention_from_projections_and_head_reshapes():
    """q = x @ wq (projection); heads = transpose(reshape(q)); scores = heads @ k (batched:
    attention); transpose, reshape, projection; a reshape of the projection's output; a reshape
    between two adds has no context. A transpose beats a dot next to the same reshape."""
    b = Builder()
    x, wq = b.node(63, (128, 256)), b.node(63, (256, 256))
    q = b.node(34, (128, 256), wq, x)                         # projection: no batch dim
    split = b.node(75, (128, 4, 64), q)                       # a dot before, a transpose after
    heads = b.node(TRANSPOSE, (4, 128, 64), split)
    k = b.node(63, (4, 64, 128))
    scores = b.node(34, (4, 128, 128), heads, k)              # batch 4
    merged = b.node(TRANSPOSE, (128, 4, 128), scores)
    flat = b.node(75, (128, 512), merged)
    wo = b.node(63, (512, 256))
    out = b.node(34, (128, 256), flat, wo)
    back = b.node(75, (256, 128), out)                        # a dot before
    bias = b.node(ADD, (256, 128), back, back)
    plain = b.node(75, (128, 256), bias)
    b.node(ADD, (128, 256), plain, plain, root=True)
    g = b.graph([q, split, scores, flat, out, back, plain])
    static = layout_static(g)
    named = [CONTEXTS[c] if c >= 0 else None for c in static.si[:, K.S_CONTEXT]]
    assert named == [None, "reshape_transpose", "dot_batched", "reshape_transpose", None,
                     "reshape_dot", None]
