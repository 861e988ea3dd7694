"""HLO shapes: `f32[8,224,224,3]{3,2,1,0}`, `bf16[<=4,?]`, `(s32[], f32[2]{0:T(8)})`, `token[]`.

A shape is read once per distinct spelling (a program repeats a few hundred of them
thousands of times), so reading is a dictionary look-up in the common case.
"""
from __future__ import annotations

import re

from features.hlo.source_text import Source

# XLA's primitive type names as the text spells them (primitive_util): the parser refuses others.
# Types outside the dataset's one-hot (s4, the f8 family, ...) are valid shapes whose one-hot
# columns stay 0, as in the encoder.
PRIMITIVE_TYPES = frozenset((
    "pred", "s1", "s2", "s4", "s8", "s16", "s32", "s64", "u1", "u2", "u4", "u8", "u16", "u32",
    "u64", "f16", "f32", "f64", "bf16", "f4e2m1fn", "f8e3m4", "f8e4m3", "f8e4m3fn",
    "f8e4m3b11fnuz", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e8m0fnu", "c64", "c128", "token",
    "opaque",
))
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
UNBOUNDED_DIM = INT64_MIN  # `?`: XLA's kUnboundedSize

# type[dims] with an optional layout; the layout may be spaced from the dims only when it holds
# nothing but dimension numbers before any ':' (so `-> f32[] {` never eats a computation body).
_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\[\]]*)\](?:\s*\{([\d\s,]*)(?::[^{}]*)?\})?", re.A)
_DIM = re.compile(r"\s*(?:(<=)\s*)?(\d+|\?)\s*$", re.A)
_INT_LIST = re.compile(r"\s*\d+(?:\s*,\s*\d+)*\s*$", re.A)
MAX_TUPLE_DEPTH = 64  # deeper nesting is no real program, and would exhaust Python's stack
# What may sit between two tokens: whitespace and both kinds of comment (hlo_lexer).
SKIP = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n\r]*)*", re.S)


class Shape:
    """element_type: the text's type name, 'tuple' for a tuple; dims: sizes (a dynamic dim's
    bound); layout: minor_to_major, () when the shape has none (scalars, tuples, token);
    tuple_size: top-level element count, 0 unless a tuple."""

    __slots__ = ("element_type", "dims", "layout", "tuple_size")

    def __init__(self, element_type: str, dims: tuple = (), layout: tuple = (), tuple_size=0):
        self.element_type, self.dims, self.layout = element_type, dims, layout
        self.tuple_size = tuple_size

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __repr__(self):
        return f"Shape({self.element_type}, {self.dims}, {self.layout}, {self.tuple_size})"


class ShapeReader:
    """Reads shapes out of one Source at given offsets, caching by spelling."""

    def __init__(self, src: Source):
        self.src, self.text = src, src.text
        self._arrays: dict[str, Shape] = {}
        self._tuples: dict[int, Shape] = {}

    def read(self, pos: int, depth: int = 0) -> tuple[Shape, int]:
        """The shape starting at pos, and the offset just past it."""
        m = _ARRAY.match(self.text, pos)
        if m is not None:
            spelled = m.group(0)
            shape = self._arrays.get(spelled)
            if shape is None:
                shape = self._arrays[spelled] = self._array(m)
            return shape, m.end()
        if self.text.startswith("(", pos):
            if depth >= MAX_TUPLE_DEPTH:
                raise self.src.error(pos, "tuple shapes nested too deep")
            return self._tuple(pos, depth + 1)
        raise self.src.error(pos, f"expected a shape, found {snippet(self.text, pos)}")

    def spelled(self, spelling: str, pos: int) -> Shape:
        """The array shape spelled exactly so (found by the caller at pos)."""
        shape = self._arrays.get(spelling)
        if shape is None:
            shape, _ = self.read(pos)
        return shape

    def _array(self, m: re.Match) -> Shape:
        etype, dims_text, layout_text = m.group(1), m.group(2), m.group(3)
        if etype not in PRIMITIVE_TYPES:
            raise self.src.error(m.start(), f"unknown element type '{etype}'")
        dims = tuple(self._dim(d, m.start()) for d in dims_text.split(",")) \
            if dims_text.strip() else ()
        if layout_text is None:  # XLA fills in the default (major-to-minor) layout
            layout = tuple(range(len(dims) - 1, -1, -1))
        else:
            if layout_text.strip() and not _INT_LIST.match(layout_text):
                raise self.src.error(m.start(), f"bad layout {{{layout_text}}}")
            layout = tuple(int(d) for d in layout_text.split(",")) if layout_text.strip() else ()
            if layout and sorted(layout) != list(range(len(dims))):
                raise self.src.error(m.start(), f"layout {{{layout_text}}} does not fit "
                                                f"the {len(dims)} dimensions of {m.group(0)}")
        return Shape(etype, dims, layout)

    def _dim(self, text: str, pos: int) -> int:
        m = _DIM.match(text)
        if m is None:
            raise self.src.error(pos, f"bad dimension size '{text.strip()}'")
        if m.group(2) == "?":
            return UNBOUNDED_DIM
        size = int(m.group(2))
        if size > INT64_MAX:
            raise self.src.error(pos, f"dimension size {size} does not fit in 64 bits")
        return size

    def _tuple(self, pos: int, depth: int) -> tuple[Shape, int]:
        text, count = self.text, 0
        pos = SKIP.match(text, pos + 1).end()
        if text.startswith(")", pos):
            return self._tuple_of(0), pos + 1
        while True:
            _, pos = self.read(pos, depth)
            count += 1
            pos = SKIP.match(text, pos).end()
            if text.startswith(",", pos):
                pos = SKIP.match(text, pos + 1).end()
            elif text.startswith(")", pos):
                return self._tuple_of(count), pos + 1
            else:
                raise self.src.error(pos, f"expected ',' or ')' in a tuple shape, "
                                          f"found {snippet(text, pos)}")

    def _tuple_of(self, count: int) -> Shape:
        # The encoder sees a tuple only through its one-hot and its top-level size.
        shape = self._tuples.get(count)
        if shape is None:
            shape = self._tuples[count] = Shape("tuple", (), (), count)
        return shape


def snippet(text: str, pos: int) -> str:
    """What sits at pos, for an error message: a few characters, or 'the end of the text'."""
    if pos >= len(text):
        return "the end of the text (truncated?)"
    piece = text[pos:pos + 24].split("\n", 1)[0]
    return repr(piece) if piece else repr(text[pos])
