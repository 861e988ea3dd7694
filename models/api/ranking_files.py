"""Rank what a file holds with a CostModel: every config of an npz file, or a program's HLO text
with a file of layouts for it (`pipeline.py rank`). Through `CostModel.rank`, so a file's
configs rank exactly as the same arrays passed by hand."""
from __future__ import annotations

import warnings
from pathlib import Path

from models.api.candidates import (candidate_kind, collection_from_path, is_program_text,
                                   npz_keys, read_candidate_arrays, read_program)
from models.api.cost_model import CostModel, FamilyMismatchWarning, Ranking, check_invalid_choice
from models.api.model_choice import choose_collection, program_collection


def rank_file(model: CostModel, path: str | Path, *, collection: str | None = None,
              invalid: str = "error", configs: str | Path | None = None) -> Ranking:
    """Rank every config of an npz file; config_runtime may be missing or zero. The collection
    comes from `collection`, else the file's place in a TpuGraphs tree, else its keys (a
    FamilyMismatchWarning as in `rank`, except for a file in the tree). `invalid` as in
    `rank`. A program's HLO text (any file but an npz) is ranked on the layouts in
    `configs` (a .npy of (c, nc, 18), or an npz holding node_config_feat), by its family's
    model (model_choice.program_collection) unless `collection` names one."""
    path = Path(path)
    check_invalid_choice(invalid)
    if is_program_text(path):   # the same checks and ranking as a file's candidates
        arrays, name = read_program(path, configs)
        chosen = collection or program_collection(model.trained.models, arrays["node_opcode"])
        return model.rank(**arrays, collection=chosen, name=name, invalid=invalid)
    if configs is not None:
        raise ValueError(f"{path} is an npz file, which holds its own configs; configs= "
                         f"(--configs) goes with a program's HLO text")
    kind = candidate_kind(npz_keys(path), path)
    in_tree = None if collection else collection_from_path(path)
    chosen = choose_collection(model.trained.models, kind, collection or in_tree,
                               model.trained.source)
    arrays = read_candidate_arrays(path, chosen)
    with warnings.catch_warnings():
        if in_tree is not None:   # the tree's collection is the data's own label, not a guess
            warnings.simplefilter("ignore", FamilyMismatchWarning)
        return model.rank(**arrays, collection=chosen, name=str(path), invalid=invalid)
