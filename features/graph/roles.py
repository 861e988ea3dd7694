"""What each configurable node reads and feeds, from shapes and dimension numbers, never from ids.

Real files sort `edge_index` rows, so operand order is lost; weights (parameters) often have lower
ids than the activations they meet. Layout graphs also hold edges from a caller (reduce, while,
fusion ...) to the root of the computation it calls. So:
- call edges (to a computation root) are not data edges, and a parameter of a called computation
  stands for the caller's operand of the same shape;
- a conv's kernel is the operand whose dims match the window and the output feature count; a
  dot's operands and contracting dims follow from the output shape (batch, lhs free, rhs free);
- the layout a configurable node receives is that of the nearest configurable (or fixed) node up
  a chain of layout-preserving ops (elementwise, convert) of the same shape, and its output is
  needed by whatever ends the chains below it.
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from features.graph import longest_paths
from features.npz.graph import Graph
from features.graph.per_graph import OPCODE_GROUPS, ranks
from features.schema import (CONV_INPUT_BATCH, CONV_INPUT_FEATURE, CONV_KERNEL_INPUT_FEATURE,
                             CONV_KERNEL_OUTPUT_FEATURE, CONV_KERNEL_SPATIAL, CONV_OUTPUT_BATCH,
                             CONV_OUTPUT_FEATURE, CONVOLUTION, IS_ROOT, OPCODE_IDS, PARAMETER,
                             PARAMETER_NUMBER, SHAPE_DIMS, WINDOW_SIZE)

CONV = CONVOLUTION
# Ops whose output takes its operand's layout when shapes agree (XLA propagates layouts through
# them): elementwise, convert, bitcast-convert, reduce-precision.
LAYOUT_PRESERVING = frozenset(OPCODE_GROUPS["elementwise"]) | {
    OPCODE_IDS[op] for op in ("convert", "bitcast-convert", "reduce-precision")}
# Ops that change the shape but keep the dimension order: XLA lays a pad or slice out as its
# operand of the same rank, so a configurable operand's layout (and its padding) reaches their
# output (a bert training step pads its [CLS] gradient back to the sequence). Not concatenate:
# with it densenet lost 0.07 on the family CV (docs/records/family_cv.md)
SAME_RANK_LAYOUT = frozenset(OPCODE_IDS[op] for op in (
    "pad", "slice", "dynamic-slice", "dynamic-update-slice", "reverse"))
# Dimension roles: contracting = summed over (dot contracting, conv input features); free = kept
# in the result (dot free dims, conv output features); spatial = conv window dims.
BATCH, CONTRACTING, FREE, SPATIAL = range(4)
# Ops that can produce any layout at no cost (the compiler writes them in whatever layout their
# consumer wants): broadcast, constant, iota. Reading them never needs a conversion.
ANY_LAYOUT = frozenset({13, 24, 48})
N_ROLES = 4


class Edges(NamedTuple):
    operands: list[list[int]]   # data operands per node, ascending ids
    users: list[list[int]]      # data users per node
    param_source: dict[int, int]  # parameter of a called computation -> caller's operand
    shapes: list[tuple[int, ...]]  # output dims per node


def shape_of(node_feat: np.ndarray, v: int) -> tuple[int, ...]:
    r = int(ranks(node_feat[v:v + 1])[0])
    return tuple(int(d) for d in node_feat[v, SHAPE_DIMS][:r])


def node_shapes(node_feat: np.ndarray) -> list[tuple[int, ...]]:
    dims = node_feat[:, SHAPE_DIMS].astype(np.int64).tolist()
    return [tuple(d[:r]) for d, r in zip(dims, ranks(node_feat).tolist())]


def split_edges(g: Graph) -> Edges:
    """Data edges apart from caller -> called-root edges; called parameters mapped to operands."""
    n = g.node_feat.shape[0]
    is_root = g.node_feat[:, IS_ROOT] > 0
    operands, users = [[] for _ in range(n)], [[] for _ in range(n)]
    calls: list[tuple[int, int]] = []
    for u, v in g.edge_index:
        u, v = int(u), int(v)
        if is_root[v] and u != v:
            calls.append((u, v))
        else:
            operands[u].append(v)
            users[v].append(u)
    for ops in operands:
        ops.sort()
    shapes = node_shapes(g.node_feat)
    return Edges(operands, users, _param_sources(g, operands, calls, shapes), shapes)


def _param_sources(g: Graph, operands, calls, shapes) -> dict[int, int]:
    """For each call: the called computation's parameters, in parameter_number order, take the
    caller's operands of the same shape, in id order (the encoder keeps no operand order).

    A computation's nodes are numbered together, so its unused (isolated) parameters are found
    between its lowest reached id and its root."""
    has_edge = np.zeros(g.node_feat.shape[0], bool)
    has_edge[g.edge_index.ravel()] = True
    out: dict[int, int] = {}
    for caller, root in calls:
        stack, seen = [root], {root}
        while stack:
            for o in operands[stack.pop()]:
                if o not in seen:
                    seen.add(o)
                    stack.append(o)
        lo = min(seen)
        while lo > 0 and g.node_opcode[lo - 1] == PARAMETER and not has_edge[lo - 1]:
            lo -= 1
        params = [v for v in range(lo, root + 1) if g.node_opcode[v] == PARAMETER
                  and (v in seen or not has_edge[v])]
        free = list(operands[caller])
        for p in sorted(params, key=lambda p: g.node_feat[p, PARAMETER_NUMBER]):
            match = [o for o in free if shapes[o] == shapes[p]]
            if match:
                out[p] = match[0]
                free.remove(match[0])
    return out


def topological_order(g: Graph) -> np.ndarray:
    """Node ids with every operand before its users (longest-path depth, then id)."""
    depth = longest_paths.longest_path(g.node_feat.shape[0], g.edge_index)
    return np.lexsort((np.arange(depth.size), depth))


def layout_sources(g: Graph, edges: Edges, config_pos: dict[int, int]) -> np.ndarray:
    """(n,) int64: the node whose output layout each node's output carries. A configurable node
    and any node that sets its own layout are their own source; a layout-preserving node of the
    same shape as an operand, or a SAME_RANK_LAYOUT node of its rank, carries that operand's
    source (a configurable one preferred); a called parameter carries its caller's operand's."""
    src = np.arange(g.node_feat.shape[0])
    for v in topological_order(g):
        v = int(v)
        if v in config_pos:
            continue
        if v in edges.param_source:
            src[v] = src[edges.param_source[v]]
        else:
            same = _layout_operands(int(g.node_opcode[v]), edges, v)
            if same:
                best = [o for o in same if int(src[o]) in config_pos] or same
                src[v] = src[best[0]]
    return src


def _layout_operands(opcode: int, edges: Edges, v: int) -> list[int]:
    """The operands whose layout v's output may carry: of its shape for a layout-preserving op,
    of its rank for a SAME_RANK_LAYOUT op, none for any other."""
    if opcode in LAYOUT_PRESERVING:
        return [o for o in edges.operands[v] if edges.shapes[o] == edges.shapes[v]]
    if opcode in SAME_RANK_LAYOUT:
        return [o for o in edges.operands[v] if len(edges.shapes[o]) == len(edges.shapes[v])]
    return []


def chain_ends(g: Graph, edges: Edges, src: np.ndarray, v: int, config_pos: dict[int, int]):
    """Where the output of v is consumed, following layout-preserving users that carry v's layout:
    (count of consumers that are neither configurable nor on the chain, whether a computation
    output is reached). Configurable consumers see the layout through their own input source."""
    plain, to_output = 0, False
    stack, seen = [v], {v}
    while stack:
        x = stack.pop()
        if g.node_feat[x, IS_ROOT] > 0 and x != v:
            to_output = True
        if not edges.users[x] and x != v:
            to_output = True
        for u in edges.users[x]:
            if u in seen:
                continue
            seen.add(u)
            if u in config_pos:
                continue
            if src[u] == src[v]:
                stack.append(u)
            else:
                plain += 1
    return plain, to_output


def merge_points(g: Graph, edges: Edges, src: np.ndarray) -> list[tuple[int, int, int]]:
    """(node, source a, source b): nodes whose operands carry layouts from different sources into
    one output (layout_sources' operands: an elementwise add, a dynamic-update-slice); one of
    them is converted when those layouts differ."""
    out = []
    for v in range(g.node_feat.shape[0]):
        if len(edges.shapes[v]) < 2:
            continue
        srcs = sorted({int(src[o]) for o in _layout_operands(int(g.node_opcode[v]), edges, v)
                       if int(g.node_opcode[src[o]]) not in ANY_LAYOUT})
        for other in srcs:
            if other != src[v] and int(g.node_opcode[src[v]]) not in ANY_LAYOUT:
                out.append((v, int(src[v]), other))
    return out


# ---------------------------------------------------------------- operands of conv and dot

def conv_operands(nf: np.ndarray, v: int, ops: list[int]) -> tuple[int, int]:
    """(input, kernel) of convolution v: the kernel's spatial dims equal the window and its output
    feature dim equals the output's feature count; the input's batch dim equals the output's."""
    if len(ops) < 2:
        return (ops[0] if ops else -1), -1
    out = shape_of(nf, v)

    def kernel_score(w: int) -> int:
        s = shape_of(nf, w)
        spatial = [int(d) for d in nf[v, CONV_KERNEL_SPATIAL] if int(d) < len(s)]
        win = [int(x) for x in nf[v, WINDOW_SIZE][:len(spatial)]]
        score = int(all(s[d] == x for d, x in zip(spatial, win)))
        o_dim = int(nf[v, CONV_KERNEL_OUTPUT_FEATURE])
        of_dim = int(nf[v, CONV_OUTPUT_FEATURE])
        score += int(o_dim < len(s) and of_dim < len(out) and s[o_dim] == out[of_dim])
        b_in, b_out = int(nf[v, CONV_INPUT_BATCH]), int(nf[v, CONV_OUTPUT_BATCH])
        score -= int(b_in < len(s) and b_out < len(out) and s[b_in] == out[b_out]
                     and out[b_out] > 1)
        return score
    a, b = ops[0], ops[1]
    return (a, b) if kernel_score(b) >= kernel_score(a) else (b, a)


@lru_cache(maxsize=4096)
def dot_roles(lhs: tuple, rhs: tuple, out: tuple):
    """Roles of each dim of lhs and rhs (BATCH / CONTRACTING / FREE) such that the output is
    batch + lhs free + rhs free, as XLA orders a dot's result; None if no assignment fits.
    Among fits, contracting the last lhs dim and the first non-batch rhs dim is preferred."""
    def fits(roles_l, roles_r):
        bl = [lhs[i] for i, r in enumerate(roles_l) if r == BATCH]
        br = [rhs[i] for i, r in enumerate(roles_r) if r == BATCH]
        cl = [lhs[i] for i, r in enumerate(roles_l) if r == CONTRACTING]
        cr = [rhs[i] for i, r in enumerate(roles_r) if r == CONTRACTING]
        fl = [lhs[i] for i, r in enumerate(roles_l) if r == FREE]
        fr = [rhs[i] for i, r in enumerate(roles_r) if r == FREE]
        return bl == br and cl == cr and tuple(bl + fl + fr) == out

    best, best_key = None, None
    choices = (BATCH, CONTRACTING, FREE)
    for roles_l in itertools.product(choices, repeat=len(lhs)):
        nb = roles_l.count(BATCH)
        if tuple(lhs[i] for i, r in enumerate(roles_l) if r == BATCH) != out[:nb]:
            continue
        for roles_r in itertools.product(choices, repeat=len(rhs)):
            if roles_r.count(BATCH) != nb or not fits(roles_l, roles_r):
                continue
            key = (roles_l[-1] != CONTRACTING if lhs else True,
                   CONTRACTING not in roles_r[nb:nb + 1], roles_l, roles_r)
            if best_key is None or key < best_key:
                best, best_key = (roles_l, roles_r), key
    return best


def dot_operands(nf: np.ndarray, v: int, ops: list[int], in_rank: int):
    """(lhs, rhs, lhs roles, rhs roles) of dot v; lhs is the operand the config's input section
    describes when ranks tell them apart. Roles are None when the shapes admit no dot."""
    if len(ops) < 2:
        return (ops[0] if ops else -1), -1, None, None
    out = shape_of(nf, v)
    a, b = ops[0], ops[1]
    for lhs, rhs in ((a, b), (b, a)):
        roles = dot_roles(shape_of(nf, lhs), shape_of(nf, rhs), out)
        if roles is not None:
            return lhs, rhs, roles[0], roles[1]
    ra = len(shape_of(nf, a))
    lhs, rhs = (a, b) if in_rank in (0, ra) else (b, a)
    return lhs, rhs, None, None


def conv_roles(nf: np.ndarray, v: int, in_rank: int, ker_rank: int, out_rank: int):
    """Roles of the dims of a conv's input, kernel and output from its dimension numbers."""
    f = nf[v].astype(np.int64)

    def roles(rank, marks):
        r = [SPATIAL] * rank
        for dim, role in marks:
            if 0 <= dim < rank:
                r[dim] = role
        return tuple(r)
    return (roles(in_rank, ((f[CONV_INPUT_BATCH], BATCH), (f[CONV_INPUT_FEATURE], CONTRACTING))),
            roles(ker_rank, ((f[CONV_KERNEL_INPUT_FEATURE], CONTRACTING),
                             (f[CONV_KERNEL_OUTPUT_FEATURE], FREE))),
            roles(out_rank, ((f[CONV_OUTPUT_BATCH], BATCH), (f[CONV_OUTPUT_FEATURE], FREE))))
