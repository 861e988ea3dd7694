"""Layout validity and graph family (models/api/candidate_checks.py) against plain references,
on hand-built graphs and on every dev layout file."""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from models.api.candidate_checks import (InvalidLayoutError, allowed_ranks, graph_family,
                                         group_lengths, invalid_candidates, refuse_invalid)
from features.npz.find import list_npz
from features.npz.graph import DataFormatError, Graph
from features.npz.read import read_graph
from features.schema import COLLECTIONS, SHAPE_DIMS, is_tile
from models.training.family_split import graph_family as family_of_graph

CONV, DOT, PARAMETER, ADD = 26, 34, 63, 2
# Dev families whose opcodes are a transformer's with a few convolutions before it.
CONV_FRONT_TRANSFORMERS = ("vit", "swin", "whisper")


def _reference_length(slots) -> int:
    """r when the slots are a permutation of 0..r-1 followed by -1s, else 7: by definition."""
    r = sum(1 for v in slots if v >= 0)
    ok = list(slots[r:]) == [-1] * (6 - r) and sorted(slots[:r]) == list(range(r))
    return r if ok else 7


def test_group_lengths_match_the_definition_on_every_possible_group():
    groups = np.array(list(itertools.product(range(-1, 6), repeat=6)), np.int8)   # 7**6
    ncf = np.concatenate([groups, np.full((groups.shape[0], 12), -1, np.int8)], axis=1)
    got = group_lengths(ncf.reshape(-1, 1, 18))[:, 0, 0]
    want = np.array([_reference_length(g.tolist()) for g in groups])
    np.testing.assert_array_equal(got, want)
    assert (want < 7).sum() == sum(math.factorial(r) for r in range(7))   # 874 layouts
    # the other two groups of a node are read from their own slots
    shifted = np.full((3, 1, 18), -1, np.int8)
    shifted[0, 0, 6:9] = (2, 0, 1)
    shifted[1, 0, 12:14] = (0, 0)
    shifted[2, 0, 0:2], shifted[2, 0, 12:16] = (1, 0), (3, 1, 2, 0)
    np.testing.assert_array_equal(group_lengths(shifted)[:, 0],
                                  [[0, 3, 0], [0, 0, 7], [2, 0, 4]])


def _graph(ncf: np.ndarray) -> Graph:
    """Nodes: 0 and 1 parameters of shapes (8, 16, 32) and (32, 4); 2 their dot, (8, 16, 4),
    configurable; 3 an add of rank 3, configurable, whose operands the edges leave out (as a
    user's arrays may); 4 a scalar parameter."""
    nf = np.zeros((5, 140), np.float32)
    for v, shape in enumerate([(8, 16, 32), (32, 4), (8, 16, 4), (8, 16, 4), ()]):
        nf[v, SHAPE_DIMS.start:SHAPE_DIMS.start + len(shape)] = shape
    return Graph(path=Path("tuner-graph"), collection="layout:nlp:random", split="test",
                 node_feat=nf, node_opcode=np.array([PARAMETER, PARAMETER, DOT, ADD, PARAMETER]),
                 edge_index=np.array([[2, 0], [2, 1]]), config_runtime=np.zeros(len(ncf), np.int64),
                 node_config_ids=np.array([2, 3]), node_config_feat=ncf,
                 node_splits=np.zeros(0, np.int64))


def _config(dot_out=(), dot_in=(), dot_kernel=(), add_out=()) -> np.ndarray:
    cfg = np.full((2, 18), -1, np.int8)
    for node, group, slots in ((0, 0, dot_out), (0, 1, dot_in), (0, 2, dot_kernel),
                               (1, 0, add_out)):
        cfg[node, 6 * group:6 * group + len(slots)] = slots
    return cfg


def test_allowed_ranks_come_from_the_node_and_its_operands():
    masks = allowed_ranks(_graph(np.full((1, 2, 18), -1, np.int8)))
    # dot: output rank 3; operands of rank 3 and 2. add: no operands known, so any rank.
    assert masks.tolist() == [[1 | 1 << 3, 1 | 1 << 3 | 1 << 2, 1 | 1 << 3 | 1 << 2],
                              [1 | 1 << 3, 0x7F, 0x7F]]


VALID = [_config(), _config(dot_out=(2, 1, 0)), _config(dot_in=(0, 1)),
         _config(dot_in=(2, 0, 1), dot_kernel=(1, 0)), _config(add_out=(1, 2, 0)),
         _config(dot_out=(0, 1, 2), add_out=(2, 1, 0))]
INVALID = {   # name -> (config, node id, group)
    "all five": (_config(dot_out=(5,) * 6), 2, "output"),
    "all zero": (_config(dot_in=(0,) * 6), 2, "input"),
    "repeated dim": (_config(dot_kernel=(1, 1, 0)), 2, "kernel"),
    "too few dims": (_config(dot_out=(1, 0)), 2, "output"),
    "dims past the rank": (_config(dot_out=(3, 1, 0)), 2, "output"),
    "a gap before a dim": (_config(add_out=(-1, 0, 1, 2)), 3, "output"),
    "rank of no operand": (_config(dot_in=(3, 2, 1, 0)), 2, "input"),
}


def test_permutations_of_the_tensors_dims_pass_and_others_do_not():
    configs = np.stack(VALID + [bad for bad, _, _ in INVALID.values()])
    got = invalid_candidates(_graph(configs))
    np.testing.assert_array_equal(got, [False] * len(VALID) + [True] * len(INVALID))


@pytest.mark.parametrize("name", sorted(INVALID))
def test_the_error_names_candidate_node_and_group(name):
    bad, node, group = INVALID[name]
    g = _graph(np.stack([VALID[1], VALID[2], bad, bad]))
    with pytest.raises(InvalidLayoutError) as exc:
        refuse_invalid(g, invalid_candidates(g))
    message = str(exc.value)
    assert isinstance(exc.value, DataFormatError) and message.startswith("tuner-graph: ")
    assert f"candidate 2, node {node} " in message and f"{group} layout" in message
    assert "2 of 4 candidates are invalid (first [2, 3])" in message


def test_a_valid_set_is_not_refused_and_a_scalar_is_named():
    g = _graph(np.stack(VALID))
    refuse_invalid(g, invalid_candidates(g))      # nothing raised
    scalar = g._replace(node_config_ids=np.array([4, 3]),
                        node_config_feat=_config(dot_out=(0,))[None])
    with pytest.raises(InvalidLayoutError, match=re.escape("(the node's rank: a scalar")):
        refuse_invalid(scalar, invalid_candidates(scalar))


@pytest.mark.parametrize("opcodes, family", [
    ([CONV] * 40 + [DOT] * 73, "xla"),       # ConvNeXt-like: dots in the MLP blocks
    ([CONV] * 53 + [DOT], "xla"),
    ([DOT] * 96, "nlp"),
    ([CONV] + [DOT] * 98, "nlp"),            # a vision transformer's patch embedding
    ([ADD, PARAMETER], None),
])
def test_graph_family_by_the_share_of_convolutions(opcodes, family):
    assert graph_family(np.array(opcodes + [ADD] * 50)) == family


@pytest.mark.slow
def test_every_dev_layout_config_is_valid_and_every_family_is_recognised(dev_npz):
    """All splits of all four layout collections: no config refused, the family signature right
    on every graph (the numbers the check and the warning were designed from), except that a
    transformer with a conv front end is a transformer wherever its file is filed (CONV_SHARE_XLA):
    ViT and Swin under layout:xla, Whisper under layout:nlp."""
    files = 0
    for collection in (c for c in COLLECTIONS if not is_tile(c)):
        for split in ("train", "valid", "test"):
            for path in list_npz(dev_npz, collection, split):
                g = read_graph(path, collection, split)
                bad = invalid_candidates(g)
                assert not bad.any(), (path, np.flatnonzero(bad)[:5])
                expected = ("nlp" if family_of_graph(path.stem) in CONV_FRONT_TRANSFORMERS
                            else collection.split(":")[1])
                assert graph_family(g.node_opcode) == expected, path
                files += 1
    assert files >= 200
