"""The library face for autotuners: `CostModel` (rank, update, save, load) and the errors and
warnings it raises. Its insides: the graph's fixed state (graph_state), learning from
measurements (refine), candidates read and checked (candidates, candidate_checks). `read_hlo`
(features.hlo) turns a program's HLO text into the graph arrays `rank` and `update` take."""
from features.hlo import HloFormatError, NoConfigurableNodeError, read_hlo
from features.npz.graph import DataFormatError
from models.api.candidate_checks import InvalidLayoutError
from models.api.cost_model import (CostModel, DrawnReferenceWarning, FamilyMismatchWarning,
                                   MissingModelError, Ranking,
                                   ReferenceCoverageWarning, SampleTrainedWarning,
                                   format_ranking)
from models.api.refine import UpdateResult
from models.serving.predict import StaleRunError

__all__ = ["CostModel", "DataFormatError", "DrawnReferenceWarning", "FamilyMismatchWarning",
           "HloFormatError",
           "InvalidLayoutError", "MissingModelError", "NoConfigurableNodeError", "Ranking",
           "ReferenceCoverageWarning", "SampleTrainedWarning", "StaleRunError", "UpdateResult",
           "format_ranking", "read_hlo"]
