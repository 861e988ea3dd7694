"""Which of a run's models ranks a graph: the collection asked for, a default by the kind of
candidates, or for a program's own layouts its family's."""
from __future__ import annotations

import numpy as np

from features.schema import COLLECTIONS
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
