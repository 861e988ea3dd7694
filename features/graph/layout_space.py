"""A graph's layout space: which layouts are valid (the rules, written once here), and the moves
a search makes in it (valid random configs, mutations, crossover).

A layout slot group (node_config_feat's output / input / kernel six slots, format section 3.2) is
either all -1 (the compiler chooses) or the minor-to-major order of its tensor: a permutation of
0..r-1 in the first r slots, the rest -1, for the tensor's rank r. Every config of every dev file
(train and valid, all four layout collections) is such a layout. Ranks come from node_feat
(shape_dimensions): the output group's from the node itself; the input and kernel groups' from
the node's operands, which the files give by shape only (operand order is not kept), so for
validity any operand's rank is accepted.

The search is narrower than validity: it sets a group at one rank, the tensor the feature code
reads for it (a conv's input and kernel, a dot's left operand, a reshape's operand), and the
kernel group on convolutions only: no dev config sets a dot's or reshape's kernel group.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import factorial
from pathlib import Path

import numpy as np

from features.graph import roles as R
from features.graph.per_graph import ranks
from features.npz.graph import Graph
from features.npz.read_kernels import row_hash
from features.schema import CONVOLUTION, DOT, N_LAYOUT_CONFIG_FEAT, SLOT_GROUP, SLOT_GROUPS

LAYOUT_GROUPS = SLOT_GROUPS     # node_config_feat[..., 6g:6g+6], section 3.2
GROUP_SLOTS = SLOT_GROUP
NOT_A_LAYOUT = 7    # table value of a group that is no permutation: no tensor has rank 7
ANY_RANK = 0x7F     # bits 0..6: the ranks a group may take when the node has no operands
# (candidate, node) rows checked at a time: about 1 MB of temporaries (twice as fast as the
# whole array at once on 1,000 x 600)
CHUNK_NODE_ROWS = 1 << 15


def _group_length_table() -> np.ndarray:
    """(7**6,) uint8 by base-7 code of (slot value + 1): r for a permutation of 0..r-1 followed
    by -1s (0 for all -1), NOT_A_LAYOUT for anything else."""
    table = np.full(7 ** GROUP_SLOTS, NOT_A_LAYOUT, np.uint8)
    for r in range(GROUP_SLOTS + 1):
        for perm in itertools.permutations(range(r)):
            table[group_code(np.array(list(perm) + [-1] * (GROUP_SLOTS - r)))] = r
    return table


def group_code(slots: np.ndarray) -> int:
    """The base-7 code of one group's six slot values (-1..5); 0 = all -1."""
    return int(((np.asarray(slots, np.int64) + 1) * 7 ** np.arange(GROUP_SLOTS)).sum())


def group_codes(node_config_feat: np.ndarray) -> np.ndarray:
    """(c, nc, 3) uint32: each slot group's base-7 code (0 = all -1). Slots must hold -1..5 (as
    io validates). Each pair of adjacent slots, read as one uint16 of digits (slot + 1), becomes
    lo + 7 * hi; three pairs make the group's code."""
    ncf = np.ascontiguousarray(node_config_feat, np.int8)
    c, nc, _ = ncf.shape
    pair = (ncf.view(np.uint8) + np.uint8(1)).view("<u2")
    digits = (pair - np.uint16(256 - 7) * (pair >> 8)).reshape(c, nc, 3, 3)
    return digits[..., 0] + np.uint16(49) * digits[..., 1] + np.uint32(2401) * digits[..., 2]


def group_lengths(node_config_feat: np.ndarray) -> np.ndarray:
    """(c, nc, 3) uint8: each slot group's length r (see GROUP_LENGTH), NOT_A_LAYOUT if none."""
    return GROUP_LENGTH[group_codes(node_config_feat)]


GROUP_LENGTH = _group_length_table()


def _layout_graph(node_feat, edge_index, node_config_ids, node_opcode=None) -> Graph:
    """A Graph of the arrays the rules read (roles' edge code takes one)."""
    n = np.asarray(node_feat).shape[0]
    return Graph(path=Path("graph"), collection="layout:xla:random", split="test",
                 node_feat=np.asarray(node_feat),
                 node_opcode=np.zeros(n, np.int64) if node_opcode is None else node_opcode,
                 edge_index=np.asarray(edge_index).reshape(-1, 2),
                 config_runtime=np.zeros(0, np.int64),
                 node_config_ids=np.asarray(node_config_ids, np.int64))


def allowed_ranks(node_feat, edge_index, node_config_ids) -> np.ndarray:
    """(nc, 3) bit masks: bit r set when the group may be a permutation of r dims (bit 0, all
    -1, always). Output: the node's rank; input and kernel: any of its operands' ranks."""
    rank = ranks(np.asarray(node_feat)).astype(np.int64)
    ids = np.asarray(node_config_ids, np.int64)
    edge_index = np.asarray(edge_index).reshape(-1, 2)
    position = np.full(rank.size, -1, np.int64)
    position[ids] = np.arange(ids.size)
    users, operands = edge_index[:, 0], edge_index[:, 1]
    mine = position[users] >= 0
    operand_bits = np.zeros(ids.size, np.int64)
    np.bitwise_or.at(operand_bits, position[users[mine]], 1 << rank[operands[mine]])
    operand_bits[operand_bits == 0] = ANY_RANK     # no operand known: any rank
    masks = np.stack([1 << rank[ids], operand_bits, operand_bits], axis=1) | 1
    return masks.astype(np.uint8)


def invalid_configs(node_config_feat: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(c,) bool: the configs holding a slot group that is not a layout of its tensor, given
    allowed_ranks. In chunks of about CHUNK_NODE_ROWS (config, node) rows, whose temporaries
    stay in cache."""
    ncf = node_config_feat
    step = max(1, CHUNK_NODE_ROWS // max(ncf.shape[1], 1))
    bad = np.empty(ncf.shape[0], bool)
    for start in range(0, ncf.shape[0], step):
        fits = (allowed >> group_lengths(ncf[start:start + step])) & 1
        bad[start:start + step] = (fits == 0).any(axis=(1, 2))
    return bad


def _permutation_table() -> tuple[np.ndarray, np.ndarray]:
    """Every group value of rank 1..6 as rows of six slots, and where each rank's rows start
    (rank r's r! rows begin at start[r])."""
    rows, start = [], np.zeros(GROUP_SLOTS + 2, np.int64)
    for r in range(GROUP_SLOTS + 1):
        start[r] = len(rows)
        if r:
            rows += [list(p) + [-1] * (GROUP_SLOTS - r) for p in itertools.permutations(range(r))]
    start[-1] = len(rows)
    return np.array(rows, np.int8), start


PERMUTATIONS, PERM_START = _permutation_table()
PERM_COUNT = np.array([factorial(r) if r else 0 for r in range(GROUP_SLOTS + 1)])


def config_keys(configs: np.ndarray) -> list[int]:
    """A 64-bit hash per config (layout (k, nc, 18), tile (k, 24)): equal configs, equal keys;
    two of 100,000 distinct ones share a key with odds of about 3e-10. Layouts are read as int8
    whatever their dtype; tile rows (float, values to ~2e5) as float32. (A digest per config
    through hashlib took 17 ms of a 170 ms warm ranking call of 1,000 configs.)"""
    configs = np.asarray(configs)
    exact = np.float32 if configs.dtype.kind == "f" else np.int8
    flat = np.ascontiguousarray(configs, exact).reshape(len(configs), -1)
    return row_hash(flat.view(np.uint8)).tolist()


@dataclass(frozen=True)
class SpaceSettings:
    unset: float = 0.25        # a mutated set group goes back to the compiler's choice
    changes: float = 0.5       # groups changed per mutation: 1 + geometric, mean 1 / this
    random_set: float = 0.5    # share of groups a random config sets


@dataclass(frozen=True, eq=False)
class LayoutSpace:
    """The layouts a search tries on one graph: per configurable node and slot group the rank
    it is set at (0: the search leaves it to the compiler)."""
    ranks: np.ndarray          # (nc, 3) int64
    settings: SpaceSettings = SpaceSettings()

    @classmethod
    def of_graph(cls, node_feat, node_opcode, edge_index, node_config_ids,
                 settings: SpaceSettings = SpaceSettings()) -> "LayoutSpace":
        g = _layout_graph(node_feat, edge_index, node_config_ids, np.asarray(node_opcode))
        return cls(_search_ranks(g), settings)

    @property
    def n_nodes(self) -> int:
        return self.ranks.shape[0]

    @property
    def slots(self) -> np.ndarray:
        """(s, 2) the (node, group) pairs the search sets."""
        return np.argwhere(self.ranks > 0)

    def default(self, k: int = 1) -> np.ndarray:
        """(k, nc, 18) int8 the compiler default: every slot -1."""
        return np.full((k, self.n_nodes, N_LAYOUT_CONFIG_FEAT), -1, np.int8)

    def random(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """(k, nc, 18) valid configs setting each searched group with probability random_set."""
        out = self.default(k)
        slots = self.slots
        take = rng.random((k, len(slots))) < self.settings.random_set
        rows, which = np.nonzero(take)
        self._assign(out, rows, slots[which], rng)
        return out

    def covering(self, rng: np.random.Generator) -> np.ndarray:
        """(1, nc, 18) a config setting every searched group to a random permutation."""
        out, slots = self.default(1), self.slots
        self._assign(out, np.zeros(len(slots), np.int64), slots, rng)
        return out

    def mutate(self, rng: np.random.Generator, parents: np.ndarray) -> np.ndarray:
        """A child per parent (k, nc, 18), with 1 + geometric more of its searched groups
        changed: to another permutation, or (a set group) back to -1."""
        children = np.array(parents, np.int8, copy=True)
        slots = self.slots
        if not len(slots) or not len(children):
            return children
        n = rng.geometric(self.settings.changes, size=len(children))
        rows = np.repeat(np.arange(len(children)), n)
        self._assign(children, rows, slots[rng.integers(len(slots), size=rows.size)], rng,
                     self.settings.unset)
        return children

    def crossover(self, rng: np.random.Generator, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Children taking each node's 18 slots from a or b alike."""
        take_a = rng.random(a.shape[:2]) < 0.5
        return np.where(take_a[:, :, None], a, b).astype(np.int8)

    def _assign(self, out, rows, slots, rng, unset: float = 0.0) -> None:
        """out[rows, node, group] = a random permutation of the group's rank (or -1 with
        probability `unset`)."""
        r = self.ranks[slots[:, 0], slots[:, 1]]
        pick = (rng.random(r.size) * PERM_COUNT[r]).astype(np.int64)
        self.set_groups(out, rows, slots, pick, rng.random(r.size) < unset)

    def set_groups(self, out, rows, slots, pick, unset=None) -> None:
        """out[rows, node, group] = permutation number `pick` of the group's rank (-1 where
        `unset`), slots (k, 2) the (node, group) pairs."""
        node, group = slots[:, 0], slots[:, 1]
        values = PERMUTATIONS[PERM_START[self.ranks[node, group]] + pick]
        if unset is not None:
            values[unset] = -1
        view = out.reshape(out.shape[0], self.n_nodes, 3, GROUP_SLOTS)
        view[rows, node, group] = values


def _search_ranks(g: Graph) -> np.ndarray:
    """(nc, 3) the rank each group is searched at: output the node's own; input the tensor the
    features read (conv input, dot left operand, the reshape's operand); kernel a conv's."""
    edges = R.split_edges(g)
    out = np.zeros((g.node_config_ids.size, 3), np.int64)
    for k, v in enumerate(g.node_config_ids.tolist()):
        ops = edges.operands[v]
        rank = lambda u: len(edges.shapes[u]) if u >= 0 else 0   # noqa: E731
        out[k, 0] = rank(v)
        if g.node_opcode[v] == CONVOLUTION:
            x, w = R.conv_operands(g.node_feat, v, ops)
            out[k, 1:] = rank(x), rank(w)
        elif g.node_opcode[v] == DOT:
            out[k, 1] = rank(R.dot_operands(g.node_feat, v, ops, 0)[0])
        elif ops:
            out[k, 1] = max(rank(u) for u in ops)
    return np.minimum(out, GROUP_SLOTS)


# Configs of the reference a graph gets when its caller brings none: the tuner's
# (TuneSettings.reference), CostModel's drawn one (models/api/reference.py) and a run's fixed
# one (FeatureConfig.reference = "drawn") alike, drawn with this seed.
REFERENCE_CONFIGS = 200
REFERENCE_SEED = 0


def reference_configs(space: LayoutSpace, k: int, seed: int = 0) -> np.ndarray:
    """k configs fixing a graph's statistics for its search: the default, configs one to four
    mutations from it (what an evolution from the default visits, as a 'default' collection's
    genetic search did), a tenth random, and one setting every group the search sets (so the
    graph's tables cover them all: CostModel's ReferenceCoverageWarning)."""
    rng = np.random.default_rng(seed)
    n_random = max(k // 10, 1)
    near = space.default(max(k - n_random - 2, 0))
    for step in range(4):            # row i is mutated i % 4 + 1 times
        rows = np.arange(len(near)) % 4 >= step
        near[rows] = space.mutate(rng, near[rows])
    return np.concatenate([space.default(1), near, space.random(rng, n_random),
                           space.covering(rng)])


def space_of(g: Graph) -> LayoutSpace:
    """The tuner's layout space of g, widened to every group a valid config may set (the tuner
    leaves e.g. a dot's kernel group to the compiler; candidates set it): a reference drawn
    from it covers every section candidates can set, so its tables expect them all."""
    searched = LayoutSpace.of_graph(g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids)
    allowed = allowed_ranks(g.node_feat, g.edge_index, g.node_config_ids).astype(np.int64)
    widest = np.zeros_like(searched.ranks)
    for rank in range(1, GROUP_SLOTS + 1):   # the largest rank each group may take
        widest[(allowed >> rank) & 1 == 1] = rank
    widest[allowed == ANY_RANK] = 0          # no operand known: no rank to draw
    return LayoutSpace(np.where(searched.ranks > 0, searched.ranks, widest), searched.settings)


def drawn_reference(g: Graph) -> np.ndarray:
    """(REFERENCE_CONFIGS, nc, 18) valid layouts of g's layout space, one of them setting every
    group (so the graph's tables cover what a search varies), a function of the graph alone:
    random ones for a 'random' collection's model; for a 'default' one, the tuner's mix around
    the compiler default, like the configs that model was trained on (random ones put a
    dev-like nlp:default graph at 0.136 from 0.239)."""
    space = space_of(g)
    if g.collection.endswith(":default"):
        return reference_configs(space, REFERENCE_CONFIGS, REFERENCE_SEED)
    rng = np.random.default_rng(REFERENCE_SEED)
    return np.concatenate([space.random(rng, REFERENCE_CONFIGS - 1), space.covering(rng)])
