"""What each configurable node's layout adds to one graph's runtime, learnt from the graph's own
measurements with the trained model as the prior.

The configs of a search share most nodes and differ in a few, so a handful of measurements pins
down those few nodes' effects. Log runtime is modelled as

    log t(x) = a + b * s(x) + sum_j w_j phi_j(x) + sum_k v_k psi_k(x) + noise,

s the trained model's score (higher = faster), phi_j(x) = 1 when x sets slot group j (a node's
output, input or kernel) to one particular layout (a group left at -1, the compiler default,
adds nothing), w_j ~ N(0, effect^2), b ~ N(slope0, slope0^2) with slope0 < 0, a flat. psi_k(x)
counts the nodes of one kind (features/graph/node_kinds.py) whose group x sets to one layout,
v_k ~ N(0, kind^2): a layout measured on one copy of a repeated layer is learnt for every copy,
so the learner generalises to configs it has not measured instead of pinning each runtime on
the few nodes a measured config happened to change (off by default: EffectsParams.kind). It is Bayesian linear regression, solved in
its kernel form (n measurements, not thousands of indicators): k(x, x') = A + slope0^2 s s' +
effect^2 |phi(x) & phi(x')| + kind^2 psi(x).psi(x'). The noise, effect, kind and slope scales
are chosen by marginal likelihood over a small grid, and effects of 0 are on the grid: when the
measurements do not support them the learner is the prior, recalibrated.
The posterior gives each config a mean and a standard deviation: a refined score on the prior's
scale (-mean / |slope0|) and how unsure it is.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve
from threadpoolctl import threadpool_limits

from features.graph.layout_space import group_codes

KIND_SCALES = (0.0, 0.003, 0.01, 0.03)   # EffectsParams.kind's grid with the kind term on
CODES = 7 ** 6          # base-7 codes of one slot group (features.graph.layout_space.group_codes)
INTERCEPT_VAR = 1.0     # prior variance of the graph's level, log runtime about its mean


@dataclass(frozen=True)
class EffectsParams:
    noise: tuple[float, ...] = (0.004, 0.008, 0.016, 0.032, 0.064)   # sd of log runtime
    effect: tuple[float, ...] = (0.0, 0.003, 0.01, 0.03, 0.1)        # sd of one group's effect
    # |log runtime| per score (and its coefficient's sd). No smaller ones: over the narrow
    # score range a search measures, they let the evidence drop the trained model (records)
    slope: tuple[float, ...] = (0.1, 0.3, 1.0)
    # sd of a layout's effect on a kind's node; off (0 alone) by default: on held-out families
    # of the dev pools it found configs 0.002 slower at 20 measurements on the CNNs, level on
    # the transformers (docs/records/tuner_learner.md, "layouts shared by a kind of node")
    kind: tuple[float, ...] = (0.0,)
    min_measurements: int = 3     # fewer: the prior alone


@dataclass(frozen=True)
class Hyper:
    noise: float
    effect: float
    slope: float
    kind: float = 0.0


def indicators(configs: np.ndarray) -> np.ndarray:
    """(c, nc, 3) int64 key of each slot group's (node, group, layout), -1 where left at -1."""
    codes = group_codes(configs).astype(np.int64)
    nc = codes.shape[1]
    slot = np.arange(nc * 3, dtype=np.int64).reshape(1, nc, 3)
    return np.where(codes > 0, slot * CODES + codes, -1)


def kind_indicators(configs: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """(c, nc, 3) int64 key of each slot group's (node kind, group, layout), -1 where left at -1:
    nodes of one kind set to one layout share a key."""
    codes = group_codes(configs).astype(np.int64)
    slot = (np.asarray(kinds, np.int64)[:, None] * 3 + np.arange(3)).reshape(1, -1, 3)
    return np.where(codes > 0, slot * CODES + codes, -1)


def _design(keys: np.ndarray, vocabulary: np.ndarray) -> sparse.csr_matrix:
    """(c, |vocabulary|) matrix of how many times each config sets each vocabulary key."""
    flat = keys.reshape(keys.shape[0], -1)
    rows, cols = np.nonzero(flat >= 0)
    at = np.searchsorted(vocabulary, flat[rows, cols])
    at = np.minimum(at, max(vocabulary.size - 1, 0))
    known = vocabulary.size > 0
    hit = (vocabulary[at] == flat[rows, cols]) if known else np.zeros(rows.size, bool)
    return sparse.csr_matrix((np.ones(hit.sum()), (rows[hit], at[hit])),
                             shape=(keys.shape[0], vocabulary.size))


class NodeEffects:
    """The posterior of one graph's node effects given its measured configs."""

    def __init__(self, configs: np.ndarray, prior: np.ndarray, runtimes: np.ndarray,
                 params: EffectsParams = EffectsParams(), kinds: np.ndarray | None = None):
        keys = indicators(configs)
        self.vocabulary = np.unique(keys[keys >= 0])
        self.phi = _design(keys, self.vocabulary)
        # no kinds, or the kind term off: no kind term to build
        self.kinds = None if kinds is None or not any(params.kind) else np.asarray(kinds, np.int64)
        kind_keys = kind_indicators(configs, self.kinds) if self.kinds is not None else keys[:, :0]
        self.kind_vocabulary = np.unique(kind_keys[kind_keys >= 0])
        self.psi = _design(kind_keys, self.kind_vocabulary)
        self.kind_shared = (self.psi @ self.psi.T).toarray()
        self.prior = np.asarray(prior, np.float64)
        y = np.log(np.asarray(runtimes, np.float64))
        self.level = float(y.mean())
        self.y = y - self.level
        self.shared = (self.phi @ self.phi.T).toarray()
        with threadpool_limits(1, "blas"):
            self._fit(params)

    def _fit(self, params: EffectsParams) -> None:
        """Hyperparameters by evidence, then the posterior. One BLAS thread: these matrices
        are small (n <= a few hundred), and BLAS threads waiting on a busy core made one
        Cholesky of 300 x 300 ten times slower (19 ms against 1.9 ms)."""
        self.hyper, self.log_evidence = _choose(self, params)
        self._factor = cho_factor(self._kernel(self.hyper), lower=True)
        self._alpha = cho_solve(self._factor, self.y + self.hyper.slope * self.prior)

    @property
    def n(self) -> int:
        return self.y.size

    def _kernel(self, h: Hyper) -> np.ndarray:
        s = self.prior
        return (INTERCEPT_VAR + h.slope ** 2 * np.outer(s, s) + h.effect ** 2 * self.shared
                + h.kind ** 2 * self.kind_shared + h.noise ** 2 * np.eye(s.size))

    def predict(self, configs: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of each config's log runtime about the measurements' mean level."""
        with threadpool_limits(1, "blas"):
            return self._predict(configs, prior)

    def _predict(self, configs: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h, s = self.hyper, np.asarray(prior, np.float64)
        keys = indicators(configs)
        cross = (_design(keys, self.vocabulary) @ self.phi.T).toarray()
        k = INTERCEPT_VAR + h.slope ** 2 * np.outer(s, self.prior) + h.effect ** 2 * cross
        prior_var = (INTERCEPT_VAR + h.slope ** 2 * s ** 2
                     + h.effect ** 2 * (keys >= 0).sum(axis=(1, 2)))
        if h.kind:
            kind_keys = kind_indicators(configs, self.kinds)
            k += h.kind ** 2 * (_design(kind_keys, self.kind_vocabulary) @ self.psi.T).toarray()
            prior_var += h.kind ** 2 * _squared_counts(kind_keys)
        mean = -h.slope * s + k @ self._alpha
        explained = np.einsum("ij,ji->i", k, cho_solve(self._factor, k.T))
        return mean, np.sqrt(np.maximum(prior_var - explained, 0.0))

    def score(self, configs: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(refined score, its sd) on the prior's scale: higher = predicted faster."""
        mean, sd = self.predict(configs, prior)
        return -mean / self.hyper.slope, sd / self.hyper.slope

    @property
    def effect_share(self) -> float:
        """The share of the measured configs' fitted log-runtime variation that node effects,
        rather than the trained model's score, account for (0: the prior alone)."""
        h = self.hyper
        part = (h.effect ** 2 * self.shared + h.kind ** 2 * self.kind_shared) @ self._alpha
        whole = part + h.slope ** 2 * self.prior * (self.prior @ self._alpha)
        return float(np.var(part) / max(np.var(whole), 1e-300)) if h.effect or h.kind else 0.0


def _squared_counts(kind_keys: np.ndarray) -> np.ndarray:
    """(c,) psi(x).psi(x) over every key, the vocabulary's or not: a config's prior variance
    from kind effects (the sum of each key's count squared; kind_keys from kind_indicators)."""
    keys = np.sort(kind_keys.reshape(len(kind_keys), -1), axis=1)
    c, width = keys.shape
    new_run = np.ones_like(keys, bool)
    new_run[:, 1:] = keys[:, 1:] != keys[:, :-1]
    run = np.cumsum(new_run, axis=1) - 1 + np.arange(c)[:, None] * width
    counts = np.bincount(run.ravel(), (keys >= 0).ravel(), c * width).reshape(c, width)
    return (counts ** 2).sum(axis=1)


def _evidence(model: NodeEffects, h: Hyper) -> float:
    """Log marginal likelihood of the centred log runtimes under hyperparameters h."""
    try:
        factor = cho_factor(model._kernel(h), lower=True)
    except np.linalg.LinAlgError:
        return -np.inf
    r = model.y + h.slope * model.prior
    alpha = cho_solve(factor, r)
    return float(-0.5 * r @ alpha - np.log(np.diag(factor[0])).sum())


def _choose(model: NodeEffects, p: EffectsParams) -> tuple[Hyper, float]:
    """The grid point of highest evidence (ties to the earlier, simpler one)."""
    kinds = p.kind if model.kinds is not None else (0.0,)
    grid = [Hyper(*v) for v in itertools.product(p.noise, p.effect, p.slope, kinds)]
    scores = [_evidence(model, h) for h in grid]
    best = int(np.argmax(scores))
    return grid[best], scores[best]
