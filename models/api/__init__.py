"""The library face for autotuners: `CostModel` (rank, update, save, load) and the errors and
warnings it raises; `rank_file` ranks what a file holds with it. Its insides: the graph's fixed
state (graph_state), learning from measurements (refine), candidates read and checked
(candidates, candidate_checks), what save writes (saved_state). `read_hlo` (features.hlo) turns
a program's HLO text into the graph arrays `rank` and `update` take; `GraphArrays` holds them."""
from features.hlo import HloFormatError, NoConfigurableNodeError, read_hlo
from features.npz.graph import DataFormatError
from models.api.candidate_checks import InvalidLayoutError
from models.api.cost_model import (CostModel, DrawnReferenceWarning, FamilyMismatchWarning,
                                   MissingModelError, Ranking,
                                   ReferenceCoverageWarning, SampleTrainedWarning)
from models.api.graph_arrays import GraphArrays
from models.api.model_choice import program_collection
from models.api.ranking_files import rank_file
from models.api.refine import UpdateResult
from models.api.reference_growth import Growth
from models.api.saved_state import LearntGraph, SavedState
from models.api.trained_run import TrainedRun
from models.serving.predict import StaleRunError

__all__ = ["CostModel", "DataFormatError", "DrawnReferenceWarning", "FamilyMismatchWarning",
           "GraphArrays", "Growth", "HloFormatError",
           "InvalidLayoutError", "LearntGraph", "MissingModelError", "NoConfigurableNodeError",
           "Ranking", "ReferenceCoverageWarning", "SampleTrainedWarning", "SavedState",
           "StaleRunError", "TrainedRun", "UpdateResult", "program_collection", "rank_file",
           "read_hlo"]
