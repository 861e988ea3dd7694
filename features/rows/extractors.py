"""The per-config extractors, one registration each: `@extractor(kind, feature_set)` next to
the function makes it the config columns of that collection kind's rows under that feature set,
and the feature sets FeatureConfig accepts are those registered.

An extractor is fn(g, rows, *, chunk, seed) -> (values (r, d) float32, d column names); 'full'
layout ones also take the graph's tables (static=) and a reference (reference=), table.py.
"""
from __future__ import annotations

from typing import Callable

from features.schema import COLLECTIONS, collection_kind

KINDS = tuple(sorted({collection_kind(c) for c in COLLECTIONS}))

# (kind, feature_set) -> extractor
EXTRACTORS: dict[tuple[str, str], Callable] = {}


def extractor(kind: str, feature_set: str):
    """Decorator: register fn as the config columns of `kind` graphs under `feature_set`."""
    if kind not in KINDS:
        raise ValueError(f"extractor kind must be one of {KINDS}, got {kind!r}")

    def add(fn: Callable) -> Callable:
        if (kind, feature_set) in EXTRACTORS:
            raise ValueError(f"a {kind} extractor for feature_set {feature_set!r} is "
                             f"registered already")
        EXTRACTORS[(kind, feature_set)] = fn
        return fn
    return add


def feature_sets() -> tuple[str, ...]:
    """Every feature set some extractor is registered for, sorted."""
    return tuple(sorted({feature_set for _, feature_set in EXTRACTORS}))


def extractor_of(kind: str, feature_set: str) -> Callable:
    if (kind, feature_set) not in EXTRACTORS:
        raise ValueError(f"no {kind} extractor for feature_set {feature_set!r}; registered: "
                         f"{sorted(EXTRACTORS)}")
    return EXTRACTORS[(kind, feature_set)]
