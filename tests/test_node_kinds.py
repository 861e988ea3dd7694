"""Node kinds: configurable nodes that are the same op on the same shapes share a kind."""
from __future__ import annotations

import numpy as np

from features.graph.node_kinds import node_kinds
from features.schema import DOT, N_NODE_FEAT, OPCODE_IDS, SHAPE_DIMS


def _graph(shapes, opcodes, edges):
    feat = np.zeros((len(shapes), N_NODE_FEAT), np.float32)
    for v, shape in enumerate(shapes):
        feat[v, SHAPE_DIMS.start:SHAPE_DIMS.start + len(shape)] = shape
    return feat, np.array(opcodes, np.int64), np.array(edges, np.int64).reshape(-1, 2)


def test_repeated_layers_share_a_kind_and_shapes_or_operands_tell_kinds_apart():
    """Nodes 2, 5 are dots of [8,64] x [64,64]; node 7 a dot of the same output from other
    operand shapes; node 8 a dot of another output; node 9 a reshape of node 2's output shape."""
    param = OPCODE_IDS["parameter"]
    shapes = [(8, 64), (64, 64), (8, 64), (8, 64), (64, 64), (8, 64), (8, 32), (8, 64),
              (8, 128), (8, 64)]
    opcodes = [param, param, DOT, param, param, DOT, param, DOT, DOT, OPCODE_IDS["reshape"]]
    edges = [(2, 0), (2, 1), (5, 3), (5, 4), (7, 6), (7, 6), (8, 0), (8, 1), (9, 2)]
    feat, opcode, edge_index = _graph(shapes, opcodes, edges)
    kinds = node_kinds(feat, opcode, edge_index, np.array([2, 5, 7, 8, 9]))
    assert kinds[0] == kinds[1]
    assert len({kinds[0], kinds[2], kinds[3], kinds[4]}) == 4
    assert kinds.tolist() == [0, 0, 1, 2, 3]        # numbered in order of first appearance
