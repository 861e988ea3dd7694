"""Module -> the TpuGraphs layout graph arrays, numbered as the dataset's encoder numbers them.

- `call` is inlined (XLA's CallInliner): the body's instructions take the call's place, its
  parameters become the call's operands and its root stands for the call's value; a body
  reached only through calls is no computation of its own.
- The other computations that something calls (reduce's to_apply, while's body, a fusion's
  computation...) stay whole: numbered in text order, the entry computation last.
- Edges `[user, operand]` (operands de-duplicated), plus `[caller, root of each computation it
  calls]`; all rows de-duplicated and sorted.
- node_config_ids: the entry's convolutions, dots and reshapes of rank >= 2 (schema);
  node_splits: 0, the end of each computation named as a split (schema), and n.
"""
from __future__ import annotations

import warnings

import numpy as np

from features import schema as S
from features.hlo.attributes import BadAttribute, computation_names
from features.hlo.errors import HloFormatError, UnknownOpcodeWarning
from features.hlo.featurize import node_features
from features.hlo.parse import Computation, Instruction, Module

# Attributes naming called computations (hlo_parser's computation-valued attributes).
CALLED_KEYS = ("to_apply", "calls", "condition", "body", "select", "scatter",
               "true_computation", "false_computation", "branch_computations",
               "called_computations")
MAX_CALL_DEPTH = 200  # inlining recurses; deeper nesting is no real program


class NoConfigurableNodeError(HloFormatError):
    """The entry computation has no convolution, dot or rank >= 2 reshape: nothing to tune."""


class _Links:
    """One computation's operand indices and called computations, per instruction."""

    __slots__ = ("operands", "called")

    def __init__(self, operands, called):
        self.operands, self.called = operands, called


class _Nodes:
    """The graph as it grows: per node its instruction, operand nodes and called computations."""

    def __init__(self):
        self.insts: list[Instruction] = []
        self.operands: list[list[int]] = []
        self.called: list[tuple[str, ...]] = []

    def add(self, inst: Instruction, operands: list[int], called: tuple) -> int:
        self.insts.append(inst)
        self.operands.append(operands)
        self.called.append(called)
        return len(self.insts) - 1


def encode_module(module: Module) -> dict[str, np.ndarray]:
    links = {c.name: _link(c, module) for c in module.computations}
    order = _standalone_order(module, links)
    nodes, roots, ends = _Nodes(), {}, []
    for comp in order:
        roots[comp.name] = _emit(comp, None, nodes, module, links, 0)
        ends.append(len(nodes.insts))
    opcodes = _opcodes(nodes.insts, module)
    entry_start = ends[-2] if len(ends) > 1 else 0
    return {
        "node_opcode": opcodes,
        "node_feat": _features(nodes.insts, list(roots.values()), module),
        "edge_index": _edges(nodes, roots),
        "node_config_ids": _configurable(nodes, opcodes, entry_start, module),
        "node_splits": _splits(order, ends),
    }


# ---------------------------------------------------------------- resolving names
def _link(comp: Computation, module: Module) -> _Links:
    """Operand names -> indices (defined earlier in the same computation), attribute values ->
    called computation names (defined somewhere in the module)."""
    src, operands, called, params = module.src, [], [], set()
    for k, inst in enumerate(comp.instructions):
        idx = []
        for name in inst.operands:
            j = comp.index.get(name)
            if j is None or j >= k:
                why = "unknown operand" if j is None else "operand used before its definition:"
                raise src.error(inst.pos, f"{why} %{name} in instruction %{inst.name}")
            idx.append(j)
        operands.append(idx)
        called.append(_called(inst, module))
        if inst.parameter_number is not None:
            if inst.parameter_number in params:
                raise src.error(inst.pos, f"parameter({inst.parameter_number}) appears twice "
                                          f"in computation %{comp.name}")
            params.add(inst.parameter_number)
    return _Links(operands, called)


def _called(inst: Instruction, module: Module) -> tuple[str, ...]:
    names = []
    for key in (CALLED_KEYS if inst.attrs else ()):
        if key in inst.attrs:
            try:
                names.extend(computation_names(inst.attrs[key]))
            except BadAttribute as e:
                raise module.src.error(inst.pos, f"{key}= of instruction %{inst.name}: {e}")
    for name in names:
        if name not in module.by_name:
            raise module.src.error(inst.pos, f"unknown computation %{name} called by "
                                             f"instruction %{inst.name}")
    if inst.opcode == "call" and "to_apply" not in inst.attrs:
        raise module.src.error(inst.pos, f"call %{inst.name} has no to_apply=")
    return tuple(names)


def _standalone_order(module: Module, links: dict[str, _Links]) -> list[Computation]:
    """The computations that become graph parts: the entry and whatever a non-call instruction
    reached from it calls; text order, entry last. Refuses a computation that calls itself."""
    standalone, state = {module.entry.name}, {}

    def visit(comp: Computation, depth: int):
        state[comp.name] = "open"
        if depth > MAX_CALL_DEPTH:
            raise module.src.error(comp.pos, "computations call each other too deeply")
        for inst, called in zip(comp.instructions, links[comp.name].called):
            for name in called:
                if inst.opcode != "call":
                    standalone.add(name)
                if state.get(name) == "open":
                    raise module.src.error(inst.pos, f"computation %{name} calls itself "
                                                     f"(through instruction %{inst.name})")
                if name not in state:
                    visit(module.by_name[name], depth + 1)
        state[comp.name] = "done"

    visit(module.entry, 0)
    return [c for c in module.computations
            if c.name in standalone and c is not module.entry] + [module.entry]


# ---------------------------------------------------------------- numbering nodes
def _emit(comp: Computation, args: list[int] | None, nodes: _Nodes, module: Module,
          links: dict[str, _Links], depth: int) -> int:
    """Appends comp's nodes (args: the node of each parameter when comp is being inlined) and
    returns the node that is its value. depth: how many calls deep the inlining is."""
    link, ids = links[comp.name], [0] * len(comp.instructions)
    for k, inst in enumerate(comp.instructions):
        operands = [ids[j] for j in link.operands[k]]
        if args is not None and inst.parameter_number is not None:
            ids[k] = args[inst.parameter_number]
        elif inst.opcode == "call":
            ids[k] = _inline(inst, link.called[k][0], operands, nodes, module, links, depth)
        else:
            ids[k] = nodes.add(inst, operands, link.called[k])
    return ids[comp.root]


def _inline(call: Instruction, callee_name: str, operands: list[int], nodes: _Nodes,
            module: Module, links: dict[str, _Links], depth: int) -> int:
    if depth >= MAX_CALL_DEPTH:
        raise module.src.error(call.pos, f"calls nested more than {MAX_CALL_DEPTH} deep")
    callee = module.by_name[callee_name]
    params = sorted(i.parameter_number for i in callee.instructions
                    if i.parameter_number is not None)
    if params != list(range(len(operands))):
        raise module.src.error(call.pos, f"call %{call.name} passes {len(operands)} operand(s) "
                                         f"but %{callee_name} has parameters {params}")
    return _emit(callee, operands, nodes, module, links, depth + 1)


# ---------------------------------------------------------------- the arrays
def _opcodes(insts: list[Instruction], module: Module) -> np.ndarray:
    """Each instruction's id in the TpuGraphs table; an XLA opcode outside it is id 0 and a
    warning, an opcode XLA does not know an error (XLA's parser refuses it too)."""
    for inst in insts:
        if not S.is_xla_opcode(inst.opcode):
            raise module.src.error(inst.pos, f"unknown opcode '{inst.opcode}' in instruction "
                                             f"%{inst.name}: not an XLA opcode")
    ids = [S.OPCODE_IDS.get(inst.opcode, S.UNKNOWN_OPCODE) for inst in insts]
    warned = set()
    for inst, i in zip(insts, ids):
        if i == S.UNKNOWN_OPCODE and inst.opcode not in warned:
            warned.add(inst.opcode)
            line = module.src.line(inst.pos)
            warnings.warn(UnknownOpcodeWarning(
                f"{module.src.filename}:{line}: opcode '{inst.opcode}' (instruction "
                f"%{inst.name}) is not in the TpuGraphs opcode table; its nodes get id 0"),
                stacklevel=4)
    return np.array(ids, np.uint8)


def _features(insts: list[Instruction], roots: list[int], module: Module) -> np.ndarray:
    try:
        return node_features(insts, roots)
    except BadAttribute as e:
        inst = insts[e.node]
        raise module.src.error(inst.pos, f"instruction %{inst.name}: {e}") from None


def _edges(nodes: _Nodes, roots: dict[str, int]) -> np.ndarray:
    users, operands = [], []
    for user, (ops, called) in enumerate(zip(nodes.operands, nodes.called)):
        for v in set(ops):
            users.append(user)
            operands.append(v)
        for name in called:
            users.append(user)
            operands.append(roots[name])
    n = max(len(nodes.insts), 1)
    codes = np.unique(np.array(users, np.int64) * n + np.array(operands, np.int64))
    return np.stack([codes // n, codes % n], axis=1).astype(np.int64).reshape(-1, 2)


def _configurable(nodes: _Nodes, opcodes: np.ndarray, entry_start: int,
                  module: Module) -> np.ndarray:
    ids, opcodes = [], opcodes.tolist()
    for i in range(entry_start, len(nodes.insts)):
        if opcodes[i] not in S.CONFIGURABLE_OPCODES:
            continue
        if opcodes[i] == S.RESHAPE:  # a rank-1 reshape has only one layout to choose
            ops = nodes.operands[i]
            rank_in = nodes.insts[ops[0]].shape.rank if ops else 0
            if max(nodes.insts[i].shape.rank, rank_in) < S.CONFIGURABLE_RESHAPE_MIN_RANK:
                continue
        ids.append(i)
    if not ids:
        entry = module.entry
        raise NoConfigurableNodeError(
            module.src.filename, module.src.line(entry.pos),
            f"no configurable node in entry computation %{entry.name}: a layout graph needs a "
            f"convolution, a dot or a reshape of rank >= {S.CONFIGURABLE_RESHAPE_MIN_RANK}")
    return np.array(ids, np.int64)


def _splits(order: list[Computation], ends: list[int]) -> np.ndarray:
    splits = [0] + [end for comp, end in zip(order, ends)
                    if any(m in comp.name for m in S.SPLIT_COMPUTATION_MARKERS)]
    if splits[-1] < ends[-1]:
        splits.append(ends[-1])
    return np.array([splits], np.int64)
