"""Checks on candidates that the file format alone lets through: layouts that no compiler could
take, and a graph's family (xla vs nlp) as its opcodes suggest.

A layout slot group (node_config_feat's output / input / kernel six slots, format section 3.2) is
either all -1 (the compiler chooses) or the minor-to-major order of its tensor: a permutation of
0..r-1 in the first r slots, the rest -1, for the tensor's rank r. Every config of every dev file
(train and valid, all four layout collections) is such a layout. Ranks come from node_feat
(shape_dimensions): the output group's from the node itself; the input and kernel groups' from
the node's operands, which the files give by shape only (operand order is not kept), so any
operand's rank is accepted.

Numpy over the (c, nc, 18) array, a cache-sized chunk of candidates at a time: each group's six
slots become a base-7 code, looked up in a table of the valid groups' lengths.
"""
from __future__ import annotations

import itertools

import numpy as np

from .graph_roles import CONV, DOT
from .io import DataFormatError, Graph
from .per_graph import ranks

LAYOUT_GROUPS = ("output", "input", "kernel")   # node_config_feat[..., 6g:6g+6], section 3.2
GROUP_SLOTS = 6
NOT_A_LAYOUT = 7    # table value of a group that is no permutation: no tensor has rank 7
ANY_RANK = 0x7F     # bits 0..6: the ranks a group may take when the node has no operands
# Convolutions among a graph's conv and dot nodes at or above this share: a convolutional
# (xla-like) graph. Dev files: 0.354 and up for every xla graph (ConvNeXt lowest), 0 for every
# nlp one; a vision transformer's single patch-embedding conv among ~100 dots stays far below.
CONV_SHARE_XLA = 0.1
# (candidate, node) rows checked at a time: about 1 MB of temporaries (twice as fast as the
# whole array at once on 1,000 x 600)
CHUNK_NODE_ROWS = 1 << 15


class InvalidLayoutError(DataFormatError):
    """A candidate holds a layout slot group that is neither all -1 nor a permutation of its
    tensor's dimensions; the message names the candidate, the node and the group."""


def _group_length_table() -> np.ndarray:
    """(7**6,) uint8 by base-7 code of (slot value + 1): r for a permutation of 0..r-1 followed
    by -1s (0 for all -1), NOT_A_LAYOUT for anything else."""
    table = np.full(7 ** GROUP_SLOTS, NOT_A_LAYOUT, np.uint8)
    weights = 7 ** np.arange(GROUP_SLOTS)
    for r in range(GROUP_SLOTS + 1):
        for perm in itertools.permutations(range(r)):
            slots = np.array(list(perm) + [-1] * (GROUP_SLOTS - r))
            table[int(((slots + 1) * weights).sum())] = r
    return table


GROUP_LENGTH = _group_length_table()


def group_lengths(node_config_feat: np.ndarray) -> np.ndarray:
    """(c, nc, 3) uint8: each slot group's length r (see GROUP_LENGTH), NOT_A_LAYOUT if none.
    Slots must hold -1..5 (as io validates). Each pair of adjacent slots, read as one uint16 of
    digits (slot + 1), becomes lo + 7 * hi; three pairs make the group's base-7 code."""
    ncf = np.ascontiguousarray(node_config_feat, np.int8)
    c, nc, _ = ncf.shape
    pair = (ncf.view(np.uint8) + np.uint8(1)).view("<u2")
    digits = (pair - np.uint16(256 - 7) * (pair >> 8)).reshape(c, nc, 3, 3)
    code = digits[..., 0] + np.uint16(49) * digits[..., 1] + np.uint32(2401) * digits[..., 2]
    return GROUP_LENGTH[code]


def allowed_ranks(g: Graph) -> np.ndarray:
    """(nc, 3) bit masks: bit r set when the group may be a permutation of r dims (bit 0, all
    -1, always). Output: the node's rank; input and kernel: any of its operands' ranks."""
    rank = ranks(g.node_feat).astype(np.int64)
    ids = g.node_config_ids
    position = np.full(g.node_feat.shape[0], -1, np.int64)
    position[ids] = np.arange(ids.size)
    users, operands = g.edge_index[:, 0], g.edge_index[:, 1]
    mine = position[users] >= 0
    operand_bits = np.zeros(ids.size, np.int64)
    np.bitwise_or.at(operand_bits, position[users[mine]], 1 << rank[operands[mine]])
    operand_bits[operand_bits == 0] = ANY_RANK     # no operand known: any rank
    masks = np.stack([1 << rank[ids], operand_bits, operand_bits], axis=1) | 1
    return masks.astype(np.uint8)


def invalid_candidates(g: Graph) -> np.ndarray:
    """(c,) bool: the candidates holding a slot group that is not a layout of its tensor.
    In chunks of about CHUNK_NODE_ROWS (candidate, node) rows, whose temporaries stay in cache."""
    allowed = allowed_ranks(g)
    ncf = g.node_config_feat
    step = max(1, CHUNK_NODE_ROWS // max(ncf.shape[1], 1))
    bad = np.empty(ncf.shape[0], bool)
    for start in range(0, ncf.shape[0], step):
        fits = (allowed >> group_lengths(ncf[start:start + step])) & 1
        bad[start:start + step] = (fits == 0).any(axis=(1, 2))
    return bad


def refuse_invalid(g: Graph, invalid: np.ndarray) -> None:
    """InvalidLayoutError naming the first invalid candidate, its node and slot group."""
    bad = np.flatnonzero(invalid)
    if not bad.size:
        return
    i = int(bad[0])
    lengths = group_lengths(g.node_config_feat[i:i + 1])[0]
    allowed = allowed_ranks(g)
    k, group = map(int, np.argwhere(((allowed >> lengths) & 1) == 0)[0])
    lo = GROUP_SLOTS * group
    values = g.node_config_feat[i, k, lo:lo + GROUP_SLOTS].tolist()
    rank_list = [r for r in range(1, GROUP_SLOTS + 1) if allowed[k, group] >> r & 1]
    tensor = "the node's" if group == 0 else "one of the node's operands'"
    raise InvalidLayoutError(
        f"{g.path}: key 'node_config_feat': candidate {i}, node {int(g.node_config_ids[k])} "
        f"(node_config_ids[{k}]), {LAYOUT_GROUPS[group]} layout (slots {lo}..{lo + 5}) is "
        f"{values}: expected all -1 or a permutation of the tensor's dimensions "
        f"({tensor} rank: {' or '.join(map(str, rank_list)) or 'a scalar, no dimensions'}) "
        f"in its first slots, the rest -1; {bad.size} of {invalid.size} candidates are "
        f"invalid (first {bad[:10].tolist()}); invalid='score' ranks them last instead")


def graph_family(node_opcode: np.ndarray) -> str | None:
    """'xla' for a convolutional graph, 'nlp' for one of dots (a transformer), None for a graph
    with neither: by the share of convolutions among its conv and dot nodes."""
    n_conv = int(np.count_nonzero(node_opcode == CONV))
    n_dot = int(np.count_nonzero(node_opcode == DOT))
    if n_conv + n_dot == 0:
        return None
    return "xla" if n_conv >= CONV_SHARE_XLA * (n_conv + n_dot) else "nlp"
