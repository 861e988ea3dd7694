"""HLO text -> Module: computations of instructions, each with its shape, opcode, operand names
and attribute values, following XLA's grammar (hlo_parser.cc, hlo_lexer.cc):

    module      ::= 'HloModule' name (',' attribute)* (computation | frame_table)*
    computation ::= 'ENTRY'? name ('(' params ')' '->' shape)? '{' instruction* '}'
                    (',' attribute)*
    instruction ::= 'ROOT'? name '=' shape opcode '(' operands ')' (',' attribute)*
    attribute   ::= key '=' value

Instructions need no separator (a newline is only whitespace); `/*...*/` and `//` comments may
sit between any two tokens. Attribute values are kept as their text: only the featurizer knows
which ones matter and how to read them (attributes.py). Each instruction keeps its offset in
the text, so later stages can report `file:line`.
"""
from __future__ import annotations

import re

from features.hlo.shapes import INT64_MAX, SKIP, ShapeReader, snippet
from features.hlo.source_text import Source

_NAME = r"[A-Za-z_][\w.\-]*"
_INSTRUCTION = re.compile(rf"(ROOT\s+)?%?({_NAME})\s*=\s*", re.A)
_COMPUTATION = re.compile(rf"(ENTRY\s+)?%?({_NAME})", re.A)
_MODULE = re.compile(rf"HloModule\s+%?({_NAME})", re.A)
# The common instruction start in one match: name, an array shape, opcode and '('.
_FAST_START = re.compile(
    rf"(ROOT\s+)?%?({_NAME})\s*=\s*([a-z][a-z0-9]*\[[^\[\]]*\](?:\{{[\d,]*(?::[^{{}}]*)?\}})?)"
    r" ([a-z][a-z0-9\-]*)\(", re.A)
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\s*\(", re.A)
_SIMPLE_OPERANDS = re.compile(rf"\s*((?:%?{_NAME}\s*,\s*)*%?{_NAME})?\s*\)", re.A)
_OPERAND_NAME = re.compile(rf"%?({_NAME})", re.A)
_TYPED_OPERAND = re.compile(r"[a-z][a-z0-9]*\[|\(", re.A)  # old style: `f32[2]{0} %x`
_PARAMETER = re.compile(r"\s*(\d+)\s*\)", re.A)
_ATTRIBUTE = re.compile(rf"\s*,\s*({_NAME})\s*=\s*", re.A)
_KEY = re.compile(rf"({_NAME})\s*=\s*", re.A)
# Values that need no bracket matching: a bare word (`region_0.2`, `b01f_01io->b01f`, `0_1x1_0`)
# or one flat {...} (`{1,0}`, `{size=3x3 pad=1_1x1_1}`), ending where the attribute ends.
_SIMPLE_VALUE = re.compile(r"(?:[\w.\-<>=]+|\{[^{}()\[\]\"'/]*\})(?=[\s,}]|\Z)", re.A)
# Pieces of any other value: strings (either quote, escapes inside), comments, brackets, words.
_VALUE_PIECE = re.compile(
    r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|/\*.*?\*/|//[^\n\r]*|[^\s,()\[\]{}"'/]+|[()\[\]{}]|/"""
    r"""|,|\s+""", re.S)
_CLOSER = {"(": ")", "[": "]", "{": "}"}
# Stack-frame tables newer XLA prints among the computations (JAX's debug_info=True puts them
# first): `FileNames` then lines of `<id> <string or {...}>`.
_FRAME_TABLES = re.compile(r"(FileNames|FunctionNames|FileLocations|StackFrames)\b")
_FRAME_ID = re.compile(r"\d+\s*")


class Instruction:
    """One `name = shape opcode(operands), attrs` line. operands: names as written;
    parameter_number: k of `parameter(k)`, else None; attrs: key -> value text."""

    __slots__ = ("name", "shape", "opcode", "operands", "attrs", "pos", "is_root",
                 "parameter_number")

    def __init__(self, name, shape, opcode, operands, attrs, pos, is_root, parameter_number):
        self.name, self.shape, self.opcode, self.operands = name, shape, opcode, operands
        self.attrs, self.pos, self.is_root = attrs, pos, is_root
        self.parameter_number = parameter_number

    def __repr__(self):
        return f"Instruction(%{self.name} = {self.opcode}({', '.join(self.operands)}))"


class Computation:
    """A named list of instructions in text order; root: the ROOT one (else the last)."""

    __slots__ = ("name", "instructions", "root", "pos", "is_entry", "index")

    def __init__(self, name, instructions, root, pos, is_entry):
        self.name, self.instructions, self.root = name, instructions, root
        self.pos, self.is_entry = pos, is_entry
        self.index = {inst.name: i for i, inst in enumerate(instructions)}


class Module:
    """computations in text order; entry: the ENTRY one (else the last, as XLA does)."""

    def __init__(self, name: str, computations: list[Computation], entry: Computation,
                 src: Source):
        self.name, self.computations, self.entry, self.src = name, computations, entry, src
        self.by_name = {c.name: c for c in computations}


def parse_module(src: Source) -> Module:
    return _Parser(src).module()


class _Parser:
    def __init__(self, src: Source):
        self.src, self.text = src, src.text
        self.shapes = ShapeReader(src)

    def fail(self, pos: int, expected: str):
        return self.src.error(pos, f"expected {expected}, found {snippet(self.text, pos)}")

    def skip(self, pos: int) -> int:
        pos = SKIP.match(self.text, pos).end()
        if self.text.startswith("/*", pos):
            raise self.src.error(pos, "unterminated /* comment")
        return pos

    # ------------------------------------------------------------------ module, computations
    def module(self) -> Module:
        text, pos = self.text, self.skip(0)
        m = _MODULE.match(text, pos)
        if m is None:
            raise self.fail(pos, "'HloModule <name>' (is this HLO text?)")
        _, pos = self.attributes(m.end())
        computations = []
        while (pos := self.skip(pos)) < len(text):
            if (table := _FRAME_TABLES.match(text, pos)) is not None:
                pos = self.frame_table(table.end())
            else:
                comp, pos = self.computation(pos)
                computations.append(comp)
        return self.assemble(m.group(1), computations)

    def assemble(self, name: str, computations: list[Computation]) -> Module:
        if not computations:
            raise self.src.error(len(self.text), "the module has no computation (truncated?)")
        seen = {}
        for comp in computations:
            if comp.name in seen:
                raise self.src.error(comp.pos, f"computation %{comp.name} is defined twice")
            seen[comp.name] = comp
        entries = [c for c in computations if c.is_entry]
        if len(entries) > 1:
            raise self.src.error(entries[1].pos, "a second ENTRY computation")
        return Module(name, computations, entries[0] if entries else computations[-1], self.src)

    def frame_table(self, pos: int) -> int:
        """Skips one stack-frame table (ids and strings or {...}): no part of the graph."""
        while (m := _FRAME_ID.match(self.text, pos := self.skip(pos))) is not None:
            _, pos = self.value(m.end())
        return pos

    def computation(self, pos: int) -> tuple[Computation, int]:
        text, start = self.text, pos
        m = _COMPUTATION.match(text, pos)
        if m is None:
            raise self.fail(pos, "a computation name")
        pos = self.skip(m.end())
        if text.startswith("(", pos):  # the signature `(p: f32[2]) -> f32[2]` says nothing new
            pos = self.skip(self.balanced(pos))
            if not text.startswith("->", pos):
                raise self.fail(pos, "'->' after a computation's parameter list")
            _, pos = self.shapes.read(self.skip(pos + 2))
            pos = self.skip(pos)
        if not text.startswith("{", pos):
            raise self.fail(pos, f"'{{' to open computation %{m.group(2)}")
        instructions, pos = self.instructions(pos + 1, m.group(2))
        _, pos = self.attributes(pos)  # e.g. `, execution_thread="host"`
        root = self.root_of(instructions, m.group(2), start)
        return Computation(m.group(2), instructions, root, start, m.group(1) is not None), pos

    def instructions(self, pos: int, comp_name: str) -> tuple[list[Instruction], int]:
        text, out, names = self.text, [], set()
        while True:
            pos = self.skip(pos)
            if text.startswith("}", pos):
                return out, pos + 1
            if pos >= len(text):
                raise self.fail(pos, f"'}}' to close computation %{comp_name}")
            inst, pos = self.instruction(pos)
            if inst.name in names:
                raise self.src.error(inst.pos, f"instruction %{inst.name} is defined twice "
                                               f"in computation %{comp_name}")
            names.add(inst.name)
            out.append(inst)

    def root_of(self, instructions: list[Instruction], comp_name: str, pos: int) -> int:
        roots = [i for i, inst in enumerate(instructions) if inst.is_root]
        if len(roots) > 1:
            raise self.src.error(instructions[roots[1]].pos,
                                 f"a second ROOT in computation %{comp_name}")
        if not instructions:
            raise self.src.error(pos, f"computation %{comp_name} has no instruction")
        return roots[0] if roots else len(instructions) - 1

    # ------------------------------------------------------------------ one instruction
    def instruction(self, pos: int) -> tuple[Instruction, int]:
        text = self.text
        m = op = _FAST_START.match(text, pos)
        if m is not None:
            shape = self.shapes.spelled(m.group(3), m.start(3))
        else:
            m = _INSTRUCTION.match(text, pos)
            if m is None:
                raise self.fail(pos, "an instruction 'name = shape opcode(...)' or '}'")
            shape, at = self.shapes.read(m.end())
            op = _OPCODE.match(text, at) or _OPCODE.match(text, self.skip(at))
            if op is None:
                raise self.fail(self.skip(at), f"an opcode and '(' in instruction %{m.group(2)}")
        opcode, number = op.group(op.lastindex), None
        if opcode == "parameter":
            p = _PARAMETER.match(text, op.end())
            if p is None:
                raise self.fail(op.end(), f"a parameter number in instruction %{m.group(2)}")
            operands, at, number = [], p.end(), int(p.group(1))
            if number > INT64_MAX:
                raise self.src.error(p.start(1), f"parameter number {number} does not fit in "
                                                 f"64 bits")
        elif opcode == "constant":  # a literal, not operand names
            operands, at = [], self.balanced(op.end() - 1)
        else:
            operands, at = self.operands(op.end())
        attrs, at = self.attributes(at)
        return Instruction(m.group(2), shape, opcode, operands, attrs, pos,
                           m.group(1) is not None, number), at

    def operands(self, pos: int) -> tuple[list[str], int]:
        m = _SIMPLE_OPERANDS.match(self.text, pos)
        if m is not None:
            names = m.group(1)
            return ([n.strip().lstrip("%") for n in names.split(",")] if names else []), m.end()
        return self.typed_operands(pos)

    def typed_operands(self, pos: int) -> tuple[list[str], int]:
        """Operands with comments or the shapes older XLA printed before each name."""
        text, names = self.text, []
        pos = self.skip(pos)
        if text.startswith(")", pos):
            return names, pos + 1
        while True:
            if _TYPED_OPERAND.match(text, pos):
                _, pos = self.shapes.read(pos)
                pos = self.skip(pos)
            m = _OPERAND_NAME.match(text, pos)
            if m is None:
                raise self.fail(pos, "an operand name")
            names.append(m.group(1))
            pos = self.skip(m.end())
            if text.startswith(")", pos):
                return names, pos + 1
            if not text.startswith(",", pos):
                raise self.fail(pos, "',' or ')' after an operand")
            pos = self.skip(pos + 1)

    # ------------------------------------------------------------------ attributes
    def attributes(self, pos: int) -> tuple[dict[str, str], int]:
        """`, key=value` pairs up to whatever is not one; values as text."""
        text, attrs = self.text, {}
        while True:
            m = _ATTRIBUTE.match(text, pos)
            if m is None:  # comments around the comma, or the end of the list
                at = self.skip(pos)
                if not text.startswith(",", at):
                    return attrs, pos
                m = _KEY.match(text, self.skip(at + 1))
                if m is None:
                    raise self.fail(self.skip(at + 1), "an attribute 'key=value'")
            key, (value, pos) = m.group(1), self.value(m.end())
            attrs[key] = value

    def value(self, pos: int) -> tuple[str, int]:
        m = _SIMPLE_VALUE.match(self.text, pos)
        if m is not None:
            return m.group(0), m.end()
        end = self.balanced_value(pos)
        if end == pos:
            raise self.fail(pos, "an attribute value")
        return self.text[pos:end], end

    def balanced_value(self, pos: int) -> int:
        """End of a value: words, strings and bracketed groups up to a comma, space or closing
        bracket outside any group."""
        text, stack = self.text, []
        while True:
            m = _VALUE_PIECE.match(text, pos)
            if m is None:
                return self.bad_piece(pos, stack)
            piece = m.group(0)
            c = piece[0]
            if not stack and (c in ",)]}" or c.isspace() or piece.startswith(("/*", "//"))):
                return pos
            if c in "([{":
                stack.append((_CLOSER[c], pos))
            elif c in ")]}" and stack.pop()[0] != c:
                raise self.src.error(pos, f"unbalanced '{c}' in an attribute value")
            pos = m.end()  # a group may go on after its bracket closes: `[2,2]<=[4]T(1,0)`

    def balanced(self, pos: int) -> int:
        """From the bracket at pos to just past its partner (literals, parameter lists)."""
        text, stack = self.text, []
        while True:
            m = _VALUE_PIECE.match(text, pos)
            if m is None:
                return self.bad_piece(pos, stack)
            c = m.group(0)[0]
            if c in "([{":
                stack.append((_CLOSER[c], pos))
            elif c in ")]}":
                if not stack or stack.pop()[0] != c:
                    raise self.src.error(pos, f"unbalanced '{c}'")
                if not stack:
                    return m.end()
            pos = m.end()

    def bad_piece(self, pos: int, stack: list):
        if pos >= len(self.text):
            if stack:
                opened = stack[-1][1]
                raise self.src.error(opened, f"'{self.text[opened]}' is never closed (truncated?)")
            return pos
        raise self.src.error(pos, "unterminated string")
