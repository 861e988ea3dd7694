"""Rankers (LightGBM LambdaRank and regression, XGBoost), early stopping by model family, and
the run directory a training writes. Scores mean higher = predicted faster."""
from __future__ import annotations

from models.training.lgbm import LAMBDARANK_DEFAULTS, REGRESSION_DEFAULTS, LambdaRank, Regression
from models.training.xgb import XGBOOST_DEFAULTS, XGBoostRank

# name -> (class, default params per collection kind); the CLI's --ranker choices come from here.
RANKERS = {
    "lambdarank": (LambdaRank, LAMBDARANK_DEFAULTS),
    "xgboost": (XGBoostRank, XGBOOST_DEFAULTS),
    "regression": (Regression, REGRESSION_DEFAULTS),
}
