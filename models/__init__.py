"""From feature rows to rankings, by stage: training/ (rankers, early stopping, run directories),
serving/ (picking a run, the submission), api (CostModel, for tuners), reporting/ (the HTML
report), bench/ (`pipeline.py bench`, apart). metrics is the competition's scoring, which all use.
Scores mean higher = predicted faster (training/base.py)."""

# features sets the OpenMP runtimes' wait policy, read when LightGBM or XGBoost first loads
# one: imported before them, whichever module of models/ is imported first
import features  # noqa: F401
