"""Readers for the attribute values the encoder uses, from their HLO text spelling to numbers.

Each reader takes the value text and returns plain tuples; a value that does not read raises
BadAttribute with what is wrong, and the caller adds file, line and instruction. The readers
are cached: a program spells the same `dimensions={3}` or window thousands of times.
"""
from __future__ import annotations

import re
from functools import lru_cache

from features.hlo.shapes import INT64_MAX, INT64_MIN


class BadAttribute(ValueError):
    """An attribute value that does not read as its key requires."""


_INT = re.compile(r"\s*(-?\d+)\s*$", re.A)
_BRACED = re.compile(r"\s*\{(.*)\}\s*$", re.S)
_SLICE_DIM = re.compile(r"\s*\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]\s*$", re.A)
_DIM_LABELS = re.compile(r"([0-9bf?]{2,})_([0-9io?]{2,})->([0-9bf?]{2,})$", re.A)


def integer(text: str) -> int:
    m = _INT.match(text)
    if m is None:
        raise BadAttribute("expected an integer")
    value = int(m.group(1))
    if not INT64_MIN <= value <= INT64_MAX:
        raise BadAttribute(f"{value} does not fit in 64 bits")
    return value


@lru_cache(maxsize=4096)
def int_list(text: str) -> tuple[int, ...]:
    """`{1,0}` or `{}` (braces required, as XLA prints them)."""
    m = _BRACED.match(text)
    if m is None:
        raise BadAttribute("expected a list of integers in braces")
    body = m.group(1)
    return tuple(integer(v) for v in body.split(",")) if body.strip() else ()


def boolean(text: str) -> bool:
    if text.strip() not in ("true", "false"):
        raise BadAttribute("expected true or false")
    return text.strip() == "true"


def computation_names(text: str) -> tuple[str, ...]:
    """`%region_0.2`, or a braced list `{%a, %b}` (conditional branches, custom-call)."""
    m = _BRACED.match(text)
    names = m.group(1).split(",") if m is not None else [text]
    names = tuple(n.strip().lstrip("%") for n in names if n.strip())
    if not names and m is None:
        raise BadAttribute("expected a computation name")
    return names


@lru_cache(maxsize=1024)
def window(text: str) -> tuple[tuple[int, ...], ...]:
    """`{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x0}` ->
    per window dimension (size, stride, padding_low, padding_high, window_dilation,
    base_dilation, reversal); absent fields take XLA's defaults (stride and dilations 1)."""
    m = _BRACED.match(text)
    if m is None:
        raise BadAttribute("expected {size=... stride=... pad=...}")
    fields = {}
    for item in m.group(1).split():
        key, eq, value = item.partition("=")
        if not eq or key not in ("size", "stride", "pad", "lhs_dilate", "rhs_dilate",
                                 "rhs_reversal"):
            raise BadAttribute(f"unknown window field '{item}'")
        fields[key] = [_pad(v) if key == "pad" else integer(v) for v in value.split("x")]
    size = fields.get("size", [])
    for key, values in fields.items():
        if len(values) != len(size):
            raise BadAttribute(f"window {key}= has {len(values)} entries, size= has {len(size)}")
    ones, pads = [1] * len(size), [(0, 0)] * len(size)
    return tuple(zip(size, fields.get("stride", ones), *zip(*fields.get("pad", pads)),
                     fields.get("rhs_dilate", ones), fields.get("lhs_dilate", ones),
                     fields.get("rhs_reversal", [0] * len(size)))) if size else ()


def _pad(text: str) -> tuple[int, int]:
    parts = text.split("_")
    if len(parts) != 2:
        raise BadAttribute(f"window pad '{text}' is not low_high")
    return integer(parts[0]), integer(parts[1])


@lru_cache(maxsize=1024)
def padding(text: str) -> tuple[tuple[int, int, int], ...]:
    """pad's `0_0x1_1_2` -> per dimension (low, high, interior); interior defaults to 0."""
    out = []
    for dim in text.strip().split("x"):
        parts = dim.split("_")
        if len(parts) not in (2, 3):
            raise BadAttribute(f"padding '{dim}' is not low_high or low_high_interior")
        out.append((integer(parts[0]), integer(parts[1]),
                    integer(parts[2]) if len(parts) == 3 else 0))
    return tuple(out)


@lru_cache(maxsize=1024)
def slices(text: str) -> tuple[tuple[int, int, int], ...]:
    """`{[0:10:2], [0:5]}` -> per dimension (start, limit, stride); stride defaults to 1."""
    m = _BRACED.match(text)
    if m is None:
        raise BadAttribute("expected {[start:limit:stride], ...}")
    out = []
    for dim in (m.group(1).split(",") if m.group(1).strip() else ()):
        d = _SLICE_DIM.match(dim)
        if d is None:
            raise BadAttribute(f"slice dimension '{dim.strip()}' is not [start:limit:stride]")
        start, limit, stride = (integer(v) for v in (d.group(1), d.group(2), d.group(3) or "1"))
        out.append((start, limit, stride))
    return tuple(out)


@lru_cache(maxsize=256)
def dim_labels(text: str) -> dict[str, object]:
    """Convolution dimension numbers from `b01f_01io->b01f`: each letter's position is the
    dimension holding it, each digit k marks spatial dimension k."""
    m = _DIM_LABELS.match(text.strip())
    if m is None:
        raise BadAttribute("expected dim labels like b01f_01io->b01f")
    lhs, rhs, out = m.groups()
    spatial = [len(_spatial(labels)) for labels in (lhs, rhs, out)]
    if len(set(spatial)) != 1:
        raise BadAttribute(f"'{text.strip()}' has {spatial[0]} spatial dimensions in the input, "
                           f"{spatial[1]} in the kernel and {spatial[2]} in the output")
    return {"input_batch": _position(lhs, "b"), "input_feature": _position(lhs, "f"),
            "input_spatial": _spatial(lhs), "kernel_input_feature": _position(rhs, "i"),
            "kernel_output_feature": _position(rhs, "o"), "kernel_spatial": _spatial(rhs),
            "output_batch": _position(out, "b"), "output_feature": _position(out, "f")}


def _position(labels: str, letter: str) -> int:
    if labels.count(letter) != 1:
        raise BadAttribute(f"'{labels}' needs exactly one '{letter}'")
    return labels.index(letter)


def _spatial(labels: str) -> tuple[int, ...]:
    digits = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
    if [d for d, _ in digits] != list(range(len(digits))):
        raise BadAttribute(f"spatial dimensions of '{labels}' are not 0..{len(digits) - 1}")
    return tuple(i for _, i in digits)
