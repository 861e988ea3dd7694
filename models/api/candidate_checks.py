"""Checks on candidates that the file format alone lets through: layouts that no compiler could
take, and a graph's family (xla vs nlp) as its opcodes suggest.

What a valid layout is, and where a slot group's rank comes from, is written once in
features/graph/layout_space.py (the search proposes by the same rules); this module applies those rules
to candidates and says which candidate, node and group is wrong.
"""
from __future__ import annotations

import numpy as np

from features.schema import CONVOLUTION as CONV, DOT
from features.npz.graph import DataFormatError, Graph
from features.graph import layout_space as space
from features.graph.layout_space import GROUP_SLOTS, LAYOUT_GROUPS, group_lengths

# Convolutions among a graph's conv and dot nodes at or above this share: a convolutional
# (xla-like) graph. Dev files: 0.216 and up for every convolutional xla graph (MiT lowest),
# 0 for a text transformer. A transformer with a conv front end is a transformer here: ViT and
# Swin (0.010-0.020, filed under layout:xla) as Whisper (0.019-0.022, under layout:nlp); no
# share can tell their files' collections apart.
CONV_SHARE_XLA = 0.1


class InvalidLayoutError(DataFormatError):
    """A candidate holds a layout slot group that is neither all -1 nor a permutation of its
    tensor's dimensions; the message names the candidate, the node and the group."""


def allowed_ranks(g: Graph) -> np.ndarray:
    """(nc, 3) bit masks of the ranks each slot group may take (features.graph.layout_space)."""
    return space.allowed_ranks(g.node_feat, g.edge_index, g.node_config_ids)


def invalid_candidates(g: Graph) -> np.ndarray:
    """(c,) bool: the candidates holding a slot group that is not a layout of its tensor."""
    return space.invalid_configs(g.node_config_feat, allowed_ranks(g))


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
