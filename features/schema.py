"""The dataset's facts that every stage reads, each named once: the collections and their kind.

Spellings are Kaggle's (`layout:xla:random`); the format reference is shared/tpugraphs_format.md.
"""
from __future__ import annotations

COLLECTIONS = (
    "tile:xla",
    "layout:xla:default",
    "layout:xla:random",
    "layout:nlp:default",
    "layout:nlp:random",
)
SPLITS = ("train", "valid", "test")


def collection_kind(collection: str) -> str:
    """'tile' or 'layout': which arrays a collection's files hold and how it is scored."""
    return "tile" if collection.startswith("tile") else "layout"


def is_tile(collection: str) -> bool:
    return collection_kind(collection) == "tile"


def collection_slug(collection: str) -> str:
    """A collection's name in file and directory names: 'layout:xla:random' -> 'layout-xla-random'."""
    return collection.replace(":", "-")
