"""Refinement on a tuned graph's own measurements: a small LightGBM lambdarank booster whose base
margin is the trained model's score (the prior), added back with shrinkage.

Shrinkage: the booster's output counts with weight n / (n + PRIOR_WEIGHT) for n measurements,
and with weight 0 when a 2-fold check on the measurements says the refined order ranks them no
better than the prior: a handful of measurements (below min_measurements) leave the prior as it
is; above that the check is a guard, not a proof. That booster learns tile graphs; layout graphs
learn node effects (node_effects.py), which pay on 10-200 measurements of one graph where a
booster over aggregate columns cannot tell which node's change cost what.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np

from models.api.node_effects import EffectsParams, NodeEffects
from models.metrics import kendall_tau_b
from models.training.base import runtime_to_grade


@dataclass(frozen=True)
class RefineParams:
    rounds: int = 30
    learning_rate: float = 0.1
    num_leaves: int = 7
    min_data_in_leaf: int = 5
    feature_fraction: float = 0.5
    lambda_l2: float = 1.0
    n_grades: int = 16
    prior_weight: float = 20.0   # measurements at which the booster counts half
    min_measurements: int = 8    # fewer: no booster, the prior alone
    seed: int = 0

    def lgb_params(self) -> dict:
        return {"objective": "lambdarank", "learning_rate": self.learning_rate,
                "num_leaves": self.num_leaves, "min_data_in_leaf": self.min_data_in_leaf,
                "feature_fraction": self.feature_fraction, "lambda_l2": self.lambda_l2,
                "lambdarank_truncation_level": 10_000, "label_gain": list(range(self.n_grades)),
                "num_threads": 1, "seed": self.seed, "deterministic": True,
                "force_col_wise": True, "verbosity": -1, "metric": "None"}


@dataclass
class Refinement:
    booster: lgb.Booster
    weight: float

    def __call__(self, X: np.ndarray, prior: np.ndarray) -> np.ndarray:
        return self.weight * self.booster.predict(_with_prior(X, prior))

    def save(self, path: Path) -> None:
        self.booster.save_model(str(path))

    @classmethod
    def load(cls, path: Path, weight: float) -> "Refinement":
        return cls(lgb.Booster(model_file=str(path)), weight)


def _with_prior(X: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """The rows plus the prior as a column: one split on it can bend the prior's own order."""
    return np.hstack([X, prior[:, None]]).astype(np.float32)


def _fit(X: np.ndarray, prior: np.ndarray, runtime: np.ndarray, p: RefineParams) -> lgb.Booster:
    grades = runtime_to_grade(runtime, np.array([0, runtime.size]), p.n_grades)
    data = lgb.Dataset(_with_prior(X, prior), grades, group=[runtime.size], init_score=prior,
                       params={"verbosity": -1, "min_data_in_bin": 1})
    return lgb.train(p.lgb_params(), data, num_boost_round=p.rounds)


def _helps(X: np.ndarray, prior: np.ndarray, runtime: np.ndarray, p: RefineParams,
           weight: float) -> bool:
    """2-fold: does the refined score order held-out measurements better than the prior?"""
    half = np.random.default_rng(p.seed).permutation(runtime.size) % 2 == 0
    gain = 0.0
    for fit_on in (half, ~half):
        held = ~fit_on
        if np.unique(runtime[held]).size < 2 or np.unique(runtime[fit_on]).size < 2:
            return False
        booster = _fit(X[fit_on], prior[fit_on], runtime[fit_on], p)
        refined = prior[held] + weight * booster.predict(_with_prior(X[held], prior[held]))
        # Kendall against -runtime: higher score should mean faster
        gain += (kendall_tau_b(refined, -runtime[held].astype(np.float64))
                 - kendall_tau_b(prior[held], -runtime[held].astype(np.float64)))
    return gain > 0


def refine(X: np.ndarray, prior: np.ndarray, runtime: np.ndarray,
           p: RefineParams = RefineParams()) -> Refinement | None:
    """The refinement for measured rows X (n, d) with prior scores (n,) and runtimes (n,);
    None while there are too few measurements or the refinement does not help."""
    runtime = np.asarray(runtime, np.float64)
    if runtime.size < p.min_measurements or np.unique(runtime).size < 2:
        return None
    weight = runtime.size / (runtime.size + p.prior_weight)
    if not _helps(X, prior, runtime, p, weight):
        return None
    return Refinement(_fit(X, prior, runtime, p), weight)


@dataclass(frozen=True)
class UpdateResult:
    """What CostModel.update did with a graph's measurements."""
    measurements: int      # the graph's measurements so far
    used: int              # how many of them the learner fit (0: set aside)
    learner: str           # "node effects" (layout), "booster" (tile) or "none"
    weight: float          # how much the learnt part counts (see `reason`)
    reason: str            # why they were used or set aside, in a few words


def layout_update(configs: np.ndarray, prior: np.ndarray, runtime: np.ndarray,
                  p: EffectsParams = EffectsParams(), kinds: np.ndarray | None = None
                  ) -> tuple[NodeEffects | None, UpdateResult]:
    """The node-effects posterior of a layout graph's measurements (node_effects.py), its
    configurable nodes' kinds shared when given, or None while there are too few or they are
    all equal."""
    n = runtime.size
    if n < p.min_measurements or np.unique(runtime).size < 2:
        return None, UpdateResult(n, 0, "none", 0.0, f"set aside: fewer than "
                                  f"{p.min_measurements} distinct runtimes")
    effects = NodeEffects(configs, prior, runtime, p, kinds)
    h = effects.hyper
    return effects, UpdateResult(n, n, "node effects", effects.effect_share,
                                 f"weight = share of the fit due to node effects (effect sd "
                                 f"{h.effect:g}, kind sd {h.kind:g}, noise sd {h.noise:g}, "
                                 f"slope {h.slope:g})")


def tile_update(X: np.ndarray, prior: np.ndarray, runtime: np.ndarray,
                p: RefineParams = RefineParams()) -> tuple[Refinement | None, UpdateResult]:
    """refine's booster for a tile graph's measurements, and what became of them."""
    n = runtime.size
    refinement = refine(X, prior, runtime, p)
    if refinement is not None:
        return refinement, UpdateResult(n, n, "booster", refinement.weight,
                                        f"weight = n / (n + {p.prior_weight:g})")
    why = (f"fewer than {p.min_measurements} measurements or equal runtimes"
           if n < p.min_measurements or np.unique(runtime).size < 2
           else "the 2-fold check found no gain over the trained model")
    return None, UpdateResult(n, 0, "none", 0.0, f"set aside: {why}")
