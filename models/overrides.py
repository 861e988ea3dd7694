"""KEY=VALUE overrides for settings dataclasses, typed by their fields, and range rules.

The CLI's `--feature` (FeatureConfig) and `--set` (ranker parameters) go through
`parse_overrides`, so a wrong key or a value of the wrong type is an error naming the valid keys
before any work starts; `describe` lists them for `--help`.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Sequence

TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


def settable_fields(cls, exclude: Sequence[str] = ()) -> dict[str, type]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)
            if f.init and f.name not in exclude}


def describe(cls, exclude: Sequence[str] = (), *, defaults: bool | dict = True,
             choices: dict[str, Sequence[str]] | None = None) -> str:
    """'name (type, default value), ...' for --help ('%' doubled for argparse).

    defaults: True for the class's own, False for none, or {label: instance} where they differ
    by label ('default layout 64, tile 31'). choices: allowed values per field, shown as
    'str: a|b' (default: the class's CHOICES, if it has them)."""
    choices = getattr(cls, "CHOICES", {}) if choices is None else choices
    parts = []
    for name, typ in settable_fields(cls, exclude).items():
        kind = f"{typ.__name__}: {'|'.join(choices[name])}" if name in choices else typ.__name__
        parts.append(f"{name} ({kind}{_default_text(cls, name, defaults)})")
    return ", ".join(parts).replace("%", "%%")


def _default_text(cls, name: str, defaults: bool | dict) -> str:
    if defaults is False:
        return ""
    if defaults is True:
        defaults = {"": cls()}
    values = {label: getattr(instance, name) for label, instance in defaults.items()}
    if len(set(map(repr, values.values()))) == 1:
        return f", default {next(iter(values.values()))!r}"
    return ", default " + ", ".join(f"{label} {v!r}" for label, v in values.items())


def parse_overrides(cls, pairs: Sequence[str], exclude: dict[str, str] | None = None) -> dict:
    """['num_leaves=63', 'gain=linear'] -> {'num_leaves': 63, 'gain': 'linear'}, each value
    converted to its field's type. exclude: keys set elsewhere -> where (for the message)."""
    exclude = exclude or {}
    fields = settable_fields(cls, tuple(exclude))
    out = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        if key in exclude:
            raise ValueError(f"{key!r} is not a {cls.__name__} override here: use {exclude[key]}")
        if key not in fields:
            raise ValueError(f"unknown {cls.__name__} setting {key!r}; valid: "
                             f"{describe(cls, tuple(exclude), defaults=False).replace('%%', '%')}")
        out[key] = _convert(raw, fields[key], f"{cls.__name__}.{key}")
    return out


def _convert(raw: str, typ: type, name: str):
    try:
        if typ is bool:
            if raw.lower() not in TRUE + FALSE:
                raise ValueError
            return raw.lower() in TRUE
        if typ is int:
            return int(raw)
        if typ is float:
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError
            return value
        if typ is str:
            return raw
    except ValueError:
        raise ValueError(f"{name} must be of type {typ.__name__}, got {raw!r}") from None
    raise TypeError(f"{name}: a {typ} setting cannot be given as KEY=VALUE")


def at_least(obj, **minimums) -> None:
    """Range rules for a settings dataclass's __post_init__: each field >= its minimum."""
    for name, low in minimums.items():
        if not getattr(obj, name) >= low:
            _fail(obj, name, f">= {low}")


def positive(obj, *names: str) -> None:
    for name in names:
        if not getattr(obj, name) > 0:
            _fail(obj, name, "> 0")


def fractions(obj, *names: str, allow_zero: bool = False) -> None:
    """Each field in (0, 1], or [0, 1] with allow_zero."""
    for name in names:
        v = getattr(obj, name)
        if not ((0 <= v if allow_zero else 0 < v) and v <= 1):
            _fail(obj, name, "in [0, 1]" if allow_zero else "in (0, 1]")


def _fail(obj, name: str, rule: str):
    raise ValueError(f"{type(obj).__name__}.{name} must be {rule}, got {getattr(obj, name)!r}")
