"""Random XLA-like computation graphs with real `node_feat` encoding, for the generated sample.

A graph is grown node by node from parameters through conv/dot/reshape/elementwise ops with
consistent tensor shapes, so every `node_feat` column the features read (shapes, layouts, window
and convolution dimension numbers, the empty-list products of 1) carries what real files carry.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from features import schema as C

PARAMETER, CONV, DOT, RESHAPE, ADD, MULTIPLY, TANH, TRANSPOSE, BROADCAST, REDUCE, EXP = (
    63, 26, 34, 75, 2, 59, 96, 98, 13, 70, 37)
CONFIGURABLE_OPS = (CONV, DOT, RESHAPE)
DIMS = np.array([1, 2, 3, 4, 7, 8, 16, 24, 32, 48, 64, 96, 100, 128, 160, 192, 256, 384, 512,
                 768, 1000, 1024])
# op -> weight, per family: CNN-like "xla" graphs lean on conv, BERT-like "nlp" ones on dot.
OP_WEIGHTS = {
    "xla": {CONV: 5, DOT: 2, RESHAPE: 2, ADD: 3, MULTIPLY: 2, TANH: 2, TRANSPOSE: 1, REDUCE: 1,
            BROADCAST: 1},
    "nlp": {CONV: 0, DOT: 5, RESHAPE: 3, ADD: 3, MULTIPLY: 2, TANH: 1, EXP: 1, TRANSPOSE: 2,
            REDUCE: 1, BROADCAST: 1},
}


@dataclass
class Node:
    opcode: int
    shape: tuple[int, ...]
    operands: list[int]
    layout: tuple[int, ...]
    window: tuple[int, int] = (0, 0)
    stride: int = 0
    dimensions: tuple[int, ...] = ()
    param_number: int = 0
    called: list[int] = field(default_factory=list)  # roots of computations this node calls
    is_root: bool = False
    in_called: bool = False                           # belongs to a called computation


@dataclass
class SynthGraph:
    nodes: list[Node]
    elem_bytes: int
    n_splits: int
    consumers: list[list[int]] = field(default_factory=list)

    def __post_init__(self):
        self.consumers = [[] for _ in self.nodes]
        for u, node in enumerate(self.nodes):
            for v in set(node.operands):
                self.consumers[v].append(u)


def row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


class _Builder:
    def __init__(self, rng: np.random.Generator, family: str):
        self.rng, self.family, self.nodes = rng, family, []
        self.n_params = 0

    def add(self, opcode: int, shape, operands, **attrs) -> int:
        rank = len(shape)
        layout = row_major(rank)
        if opcode != PARAMETER and rank > 1 and self.rng.random() < 0.15:
            layout = tuple(int(i) for i in self.rng.permutation(rank))
        self.nodes.append(Node(opcode, tuple(int(d) for d in shape), list(operands), layout,
                               **attrs))
        return len(self.nodes) - 1

    def param(self, shape) -> int:
        self.n_params += 1
        return self.add(PARAMETER, shape, [], param_number=self.n_params - 1)

    def dim(self) -> int:
        return int(self.rng.choice(DIMS))

    def recent(self, min_rank: int = 1, rank: int | None = None) -> int | None:
        lo = max(0, len(self.nodes) - 8)
        ok = [i for i in range(lo, len(self.nodes)) if not self.nodes[i].in_called
              and len(self.nodes[i].shape) >= min_rank and (rank is None or
                                                           len(self.nodes[i].shape) == rank)]
        if not ok:
            return None
        # Mostly extend the chain, sometimes branch from an earlier node (skip connections).
        return ok[-1] if self.rng.random() < 0.6 else int(self.rng.choice(ok))

    def grow(self, op: int) -> None:
        make = {CONV: self.conv, DOT: self.dot, RESHAPE: self.reshape, TRANSPOSE: self.transpose,
                REDUCE: self.reduce, BROADCAST: self.broadcast}.get(op, self.elementwise)
        if not make(op):
            self.elementwise(TANH)

    def elementwise(self, op: int) -> bool:
        x = self.recent()
        shape = self.nodes[x].shape
        other = [i for i in range(max(0, x - 6), x)
                 if self.nodes[i].shape == shape and not self.nodes[i].in_called]
        operands = [x, other[-1]] if op in (ADD, MULTIPLY) and other else [x]
        self.add(op, shape, operands)
        return True

    def dot(self, op: int) -> bool:
        x = self.recent(min_rank=2)
        if x is None:
            return False
        shape = self.nodes[x].shape
        w = self.param((shape[-1], self.dim()))
        self.add(DOT, shape[:-1] + (self.nodes[w].shape[1],), [x, w])
        return True

    def conv(self, op: int) -> bool:
        x = self.recent(rank=4)
        if x is None:
            return False
        b, h, w, c = self.nodes[x].shape
        k, s = int(self.rng.choice([1, 3, 5])), int(self.rng.choice([1, 1, 2]))
        wt = self.param((k, k, c, self.dim()))
        out = (b, -(-h // s), -(-w // s), self.nodes[wt].shape[3])
        self.add(CONV, out, [x, wt], window=(k, k), stride=s)
        return True

    def reshape(self, op: int) -> bool:
        x = self.recent(min_rank=2)
        if x is None:
            return False
        shape = list(self.nodes[x].shape)
        r = len(shape)
        i = int(self.rng.integers(0, r - 1))
        if r > 2 and self.rng.random() < 0.5:
            out = shape[:i] + [shape[i] * shape[i + 1]] + shape[i + 2:]
        else:
            j = int(self.rng.integers(0, r))
            f = next((f for f in (8, 4, 2) if shape[j] % f == 0 and shape[j] > f), None)
            if f is None or r >= 4:
                return False
            out = shape[:j] + [shape[j] // f, f] + shape[j + 1:]
        self.add(RESHAPE, out, [x])
        return True

    def transpose(self, op: int) -> bool:
        x = self.recent(min_rank=2)
        if x is None:
            return False
        perm = tuple(int(i) for i in self.rng.permutation(len(self.nodes[x].shape)))
        shape = tuple(self.nodes[x].shape[i] for i in perm)
        self.add(TRANSPOSE, shape, [x], dimensions=perm)
        return True

    def reduce(self, op: int) -> bool:
        x = self.recent(min_rank=3)
        if x is None:
            return False
        shape = self.nodes[x].shape
        acc, elem = (self.add(PARAMETER, (), [], param_number=i, in_called=True)
                     for i in range(2))
        adder = self.add(ADD, (), [acc, elem], is_root=True, in_called=True)
        self.add(REDUCE, shape[:-1], [x], dimensions=(len(shape) - 1,), called=[adder])
        return True

    def broadcast(self, op: int) -> bool:
        x = self.recent()
        shape = self.nodes[x].shape
        if len(shape) >= 4:
            return False
        self.add(BROADCAST, (self.dim(),) + shape, [x], dimensions=tuple(range(1, len(shape) + 1)))
        return True


def build_graph(rng: np.random.Generator, n_nodes: int, family: str) -> SynthGraph:
    """Grow a graph of about n_nodes nodes; producers always get smaller ids than their users."""
    b = _Builder(rng, family)
    batch = int(rng.choice([1, 8, 16, 32]))
    for _ in range(int(rng.integers(1, 3))):
        if family == "xla":
            b.param((batch, int(rng.choice([14, 28, 56, 112])), int(rng.choice([14, 28, 56])),
                     int(rng.choice([3, 16, 64, 128]))))
        else:
            b.param((batch, int(rng.choice([128, 384, 512])), int(rng.choice([128, 768, 1024]))))
    ops, weights = zip(*OP_WEIGHTS[family].items())
    p = np.array(weights, float) / sum(weights)
    while len(b.nodes) < n_nodes:
        b.grow(int(rng.choice(ops, p=p)))
    n_splits = 1 if family == "nlp" else int(rng.integers(1, 4))
    return SynthGraph(_encoder_order(b.nodes), elem_bytes=int(rng.choice([2, 4])),
                      n_splits=n_splits)


def _encoder_order(nodes: list[Node]) -> list[Node]:
    """Renumber as the TpuGraphs encoder does: called computations first, then the entry
    computation with its parameters (weights included) before the activations they meet."""
    def rank(i):
        nd = nodes[i]
        return 0 if nd.in_called else 1 if nd.opcode == PARAMETER else 2
    order = sorted(range(len(nodes)), key=lambda i: (rank(i), i))
    new_id = {old: new for new, old in enumerate(order)}
    out = []
    for old in order:
        nd = nodes[old]
        out.append(Node(**{**nd.__dict__, "operands": [new_id[v] for v in nd.operands],
                           "called": [new_id[v] for v in nd.called]}))
    return out


def split_points(graph: SynthGraph) -> np.ndarray:
    """Computation boundaries including 0 and n, as `node_splits` holds them."""
    n = len(graph.nodes)
    inner = np.linspace(0, n, graph.n_splits + 1).astype(np.int64)
    return np.unique(inner)


def node_feat(graph: SynthGraph) -> np.ndarray:
    """(n, 140) float32 encoded like the TpuGraphs featurizer (0-padded slots, empty product 1)."""
    n = len(graph.nodes)
    x = np.zeros((n, C.N_NODE_FEAT), np.float32)
    x[:, C.PRODUCT_COLUMNS] = 1.0
    x[split_points(graph)[1:] - 1, C.IS_ROOT] = 1.0  # root of each computation
    x[[i for i, nd in enumerate(graph.nodes) if nd.is_root], C.IS_ROOT] = 1.0
    x[:, C.ELEMENT_TYPE_BF16 if graph.elem_bytes == 2 else C.ELEMENT_TYPE_F32] = 1.0
    for i, node in enumerate(graph.nodes):
        _encode_node(x[i], node)
    return x


def _encode_node(row: np.ndarray, node: Node) -> None:
    r = len(node.shape)
    row[C.SHAPE_DIMS][:r] = node.shape
    row[C.SHAPE_SUM], row[C.SHAPE_PRODUCT] = sum(node.shape), float(np.prod(node.shape))
    row[C.PARAMETER_NUMBER] = node.param_number
    row[C.DIMENSIONS][:len(node.dimensions)] = node.dimensions
    row[C.LAYOUT][:r] = node.layout
    if node.opcode == CONV:   # a 2-d window over NHWC input, HWIO kernel, NHWC output
        k = node.window[0]
        row[C.WINDOW_SIZE][:2], row[C.WINDOW_SIZE_SUM], row[C.WINDOW_SIZE_PRODUCT] = k, 2 * k, k * k
        row[C.WINDOW_STRIDE][:2] = node.stride
        row[C.WINDOW_STRIDE_SUM], row[C.WINDOW_STRIDE_PRODUCT] = 2 * node.stride, node.stride ** 2
        row[C.WINDOW_DILATION][:2], row[C.WINDOW_DILATION_SUM], row[C.WINDOW_DILATION_PRODUCT] = (
            1, 2, 1)
        row[C.BASE_DILATION][:2], row[C.BASE_DILATION_SUM], row[C.BASE_DILATION_PRODUCT] = 1, 2, 1
        row[C.WINDOW_REVERSAL_FALSE_COUNT] = 2
        row[C.CONV_DIM_NUMBERS] = [0, 3, 1, 2, 0, 0, 2, 3, 0, 1, 0, 0, 0, 3]
        row[C.FEATURE_GROUP_COUNT] = row[C.BATCH_GROUP_COUNT] = 1


def edge_index(graph: SynthGraph) -> np.ndarray:
    """(m, 2) int64 rows [user, operand], deduplicated and sorted as the encoder writes them;
    a caller also points at the root of each computation it calls."""
    rows = sorted({(u, v) for u, node in enumerate(graph.nodes)
                   for v in node.operands + node.called})
    return np.array(rows, dtype=np.int64).reshape(-1, 2)
