"""Which of a run's models ranks a graph: the collection asked for, a default by the kind of
candidates, or for a program's own layouts its family's."""
from __future__ import annotations

import numpy as np

from features.schema import COLLECTIONS, is_tile, program_family
from models.api.candidate_checks import graph_family

# A layout graph outside the TpuGraphs tree gets the random-search model: random search covers
# the config space evenly, as an autotuner's proposals do, where the genetic 'default' search
# stays close to the compiler default.
DEFAULT_COLLECTION = {"tile": "tile:xla", "layout": "layout:xla:random"}
# A program's own layouts (`tune PROGRAM`, `rank PROGRAM.hlo --configs`) get its family's
# 'default' collection model, the one default for programs: tune searches from the compiler
# default, as the dataset's genetic 'default' search did, and rank is given what tune writes;
# the family's 'random' model where the run lacks it.
PROGRAM_SEARCHES = ("default", "random")
# Whether `tune` prefers a run whose reference is fixed (FeatureConfig.reference "drawn") for a
# program, by its family: a CNN's first rounds find faster layouts with one (a file run is
# ahead from 50 measurements), a transformer's with a file-reference run, whose graph reference
# grows with the measurements (reference_growth.py; docs/records/new_families.md, "a reference
# that grows", "the model's own search as a CNN's first reference")
TUNER_FIXED_REFERENCE = {"xla": True, "nlp": False}


class MissingModelError(LookupError, ValueError):
    """The run has no model for the collection asked for (it was trained without it)."""


def choose_collection(models: dict, kind: str, collection: str | None, source: str = "") -> str:
    """`collection` (default: DEFAULT_COLLECTION[kind]) checked against the candidates' kind
    and the run's models (`source` names the run in the error)."""
    chosen = collection or DEFAULT_COLLECTION[kind]
    if chosen not in COLLECTIONS:
        raise ValueError(f"unknown collection {chosen!r}; expected one of {COLLECTIONS}")
    if chosen.split(":")[0] != kind:
        raise ValueError(f"{kind} candidates cannot be ranked by the {chosen} model")
    if chosen not in models:
        raise MissingModelError(f"{source or 'this model'} has no model for {chosen}; "
                                f"it has {sorted(models)}")
    return chosen


def program_collection(models: dict, node_opcode: np.ndarray) -> str:
    """The model for a program's own layouts: its family's (xla or nlp, by its opcodes) first of
    PROGRAM_SEARCHES the run's `models` have, else DEFAULT_COLLECTION's layout model."""
    family = graph_family(np.asarray(node_opcode)) or "xla"
    return next((f"layout:{family}:{search}" for search in PROGRAM_SEARCHES
                 if f"layout:{family}:{search}" in models), DEFAULT_COLLECTION["layout"])


def tuner_fixed_reference(node_opcode: np.ndarray, collection: str | None = None) -> bool:
    """TUNER_FIXED_REFERENCE for a program's family: the layout collection's named, else by
    its opcodes (neither conv nor dot: a CNN's)."""
    family = (program_family(collection) if collection and not is_tile(collection)
              else graph_family(np.asarray(node_opcode)) or "xla")
    return TUNER_FIXED_REFERENCE[family]
