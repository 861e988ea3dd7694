"""Which configurable nodes of a layout graph are the same kind of node: one opcode, element
type, output shape and attributes, fed by operands of the same shapes.

A program repeats its layers, so an attention matmul or a 3x3 convolution appears many times
over; a layout costs each copy alike. A learner that shares what it measures across a kind
(models/api/node_effects.py) learns from one copy's measurement what all copies cost.
"""
from __future__ import annotations

import numpy as np

from features.schema import (CONV_DIM_NUMBERS, DIMENSIONS, ELEMENT_TYPE, FEATURE_GROUP_COUNT,
                             SHAPE_DIMS, WINDOW_SIZE, WINDOW_STRIDE)

# The node_feat columns that tell two nodes of one opcode apart.
_DESCRIBING = np.r_[np.arange(SHAPE_DIMS.start, SHAPE_DIMS.stop),
                    np.arange(ELEMENT_TYPE.start, ELEMENT_TYPE.stop),
                    np.arange(DIMENSIONS.start, DIMENSIONS.stop),
                    np.arange(WINDOW_SIZE.start, WINDOW_SIZE.stop),
                    np.arange(WINDOW_STRIDE.start, WINDOW_STRIDE.stop),
                    np.arange(CONV_DIM_NUMBERS.start, CONV_DIM_NUMBERS.stop),
                    FEATURE_GROUP_COUNT]


def node_kinds(node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray,
               node_config_ids: np.ndarray) -> np.ndarray:
    """(nc,) int64 kind of each configurable node, numbered 0.. in order of first appearance:
    equal when the opcode, the describing node_feat columns and the sorted multiset of the
    operands' output shapes are equal."""
    node_feat = np.asarray(node_feat)
    ids = np.asarray(node_config_ids, np.int64)
    edges = np.asarray(edge_index, np.int64).reshape(-1, 2)
    shapes = node_feat[:, SHAPE_DIMS].astype(np.int64)
    found: dict[tuple, int] = {}
    kinds = np.empty(ids.size, np.int64)
    operands_of = _operands(edges, ids)
    for i, v in enumerate(ids):
        operand_shapes = sorted(tuple(shapes[u]) for u in operands_of[i])
        key = (int(node_opcode[v]), node_feat[v, _DESCRIBING].tobytes(), tuple(operand_shapes))
        kinds[i] = found.setdefault(key, len(found))
    return kinds


def _operands(edges: np.ndarray, ids: np.ndarray) -> list[np.ndarray]:
    """Each configurable node's operands (edge rows are [user, operand])."""
    order = np.argsort(edges[:, 0], kind="stable")
    users, operands = edges[order, 0], edges[order, 1]
    lo, hi = np.searchsorted(users, ids, "left"), np.searchsorted(users, ids, "right")
    return [operands[a:b] for a, b in zip(lo, hi)]
