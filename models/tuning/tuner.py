"""The measure / learn / search loop of a tuner: from the compiler default, rounds of candidates
proposed by a search strategy (strategies/: evolution by default) and scored by the model, a batch
measured, the model taught; at the end the best few measured again.

The model is any object with `score(configs) -> (scores, spread)` (higher = predicted faster,
spread = how unsure) and `learn(configs, runtimes)`: `Bound` makes one of a CostModel (or
anything with its rank/update), `Frozen` stops it learning, `Blind` scores at random (the search
without a model). The measurer is any callable from configs to runtimes: the user's command
(runner.py), a pool's recorded runtimes (tune-sim), a stand-in (the live search). This module
never imports models.api: tune_graph.py hands a CostModel to it.

Measurements are noisy, and the fastest of many noisy measurements is flattered by its noise
(the winner's curse), so the last measurements go to the best configs again, the compiler
default, and the best of them once more: the result is the config of lowest mean re-measurement
(the flattered first measurement left out) among those measured twice or more, and the default
unless it beats it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any, Callable

import numpy as np

from features.graph.layout_space import (REFERENCE_CONFIGS, LayoutSpace, SpaceSettings,
                                         config_keys)
from models.tuning.search import Archive, SearchSettings
from models.tuning.strategies import check_strategy, make_strategy


MIN_NOISE = 0.005    # sd of log runtime assumed at least, whatever the repeats say


@dataclass(frozen=True)
class TuneSettings:
    batch: int = 5            # configs measured per round: an update every 5 measurements
                              # finds more than every 8 (docs/records/tuner_stand_in.md,
                              # "2026-11-28: `tune` measures rounds of 5")
    explore: int = 2          # of them, picked by score + kappa * spread (the rest by score)
    kappa: float = 2.0
    drawn: int = 1            # of the exploring ones, drawn at random instead: a family the
                              # model misjudges is found so, then learnt from (records,
                              # "2026-11-27: one exploring pick drawn at random")
    confirm: int = 3          # measurements at the end besides the default's: the best
                              # confirm - 1 again, then the best of them once more (1: the
                              # best); fewer on a small budget (_reserve)
    margin: float = 1.64      # z of one comparison: the best must beat the default by this many
                              # standard errors, raised for the configs it was chosen among
    reference: int = REFERENCE_CONFIGS   # configs fixing the graph's statistics (rank reference)
    elite: int = 8            # best measured configs among each round's starting population
    strategy: str = "evolutionary"   # what proposes each round's candidates (strategies/)
    search: SearchSettings = field(default_factory=SearchSettings)
    space: SpaceSettings = field(default_factory=SpaceSettings)

    def __post_init__(self):
        check_strategy(self.strategy)


@dataclass(frozen=True)
class Evidence:
    """The best config other than the default, against it at the end of a search: what it
    measured and how sure that is (a config is returned only when z > needed)."""
    speedup: float      # the default's runtime over its (geometric means, unflattered)
    z: float            # standard errors of the difference it is faster by
    needed: float       # the z it had to pass (TuneSettings.margin, raised for its rivals)

    @property
    def confirmed(self) -> bool:
        return self.z > self.needed


# why a search kept the compiler default, read from its own record (Verdict, in this order)
CAUSES = ("unconfirmed", "mispredicted", "none predicted")


@dataclass(frozen=True)
class Verdict:
    """Why a search kept the compiler default: its confirmation (a config measured faster,
    not beyond the noise once measured again), its model (configs it scored above the default
    all measured slower), or nothing the search proposed scored above the default (the model's
    view or the search's reach)."""
    cause: str              # one of CAUSES
    picks: int              # configs the model chose and had measured (the default's and the
                            # confirmation's measurements not among them)
    predicted_faster: int   # of them, scored above the default when chosen
    measured_faster: int    # of them, measured faster than the default's mean at their
                            # first measurement (flattered by its noise)


@dataclass
class TuneResult:
    best: np.ndarray            # (nc, 18) int8 (tile: (24,)) the fastest config, confirmed
    best_runtime: float         # mean of its measurements (re-measurements, when it has them)
    default_runtime: float      # mean of the compiler default's (tile: of the first config's)
    configs: np.ndarray         # (m, nc, 18) every measured config, in order
    runtimes: np.ndarray        # (m,) their runtimes, as measure returned them
    rounds: int = 0
    settings: dict = field(default_factory=dict)
    # the best other config against the default (None: the default measured fastest, or none)
    evidence: Evidence | None = None
    verdict: Verdict | None = None    # why the default was kept (None: another was returned)

    @property
    def speedup(self) -> float:
        """Default runtime / best runtime (> 1: faster than the compiler default)."""
        return self.default_runtime / self.best_runtime

    def best_so_far(self) -> np.ndarray:
        """(m,) the lowest runtime measured after each measurement."""
        return np.minimum.accumulate(self.runtimes)


class MeasureError(ValueError):
    """The measure callable returned something other than one positive runtime per config."""


class Ledger:
    """Every measurement in order, the budget they may not exceed, and each config's runs."""

    def __init__(self, measure: Callable, budget: int):
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        self.measure_fn, self.budget = measure, int(budget)
        self.configs: list[np.ndarray] = []
        self.runtimes: list[float] = []
        self.runs: dict[int, list[int]] = {}
        # per measurement, the model's score of the config over the default's when it was
        # chosen (NaN: the default, the confirmation's re-measurements)
        self.expected: list[float] = []

    @property
    def left(self) -> int:
        return self.budget - len(self.runtimes)

    def measure(self, configs: np.ndarray, expected: np.ndarray | None = None) -> np.ndarray:
        """The runtimes of configs (k, ...) from the user's measure, checked and recorded;
        `expected`: the model's score of each over the default's, when it chose them."""
        if len(configs) > self.left:
            raise RuntimeError(f"{len(configs)} measurements asked for, {self.left} left")
        out = np.asarray(self.measure_fn(np.ascontiguousarray(configs)), np.float64).reshape(-1)
        if out.size != len(configs) or not np.all(np.isfinite(out)) or np.any(out <= 0):
            raise MeasureError(f"measure must return {len(configs)} finite positive runtimes "
                               f"for {len(configs)} configs; got {out.size} values {out[:4]}")
        gains = np.full(len(configs), np.nan) if expected is None else expected
        for key, config, r, gain in zip(config_keys(configs), configs, out, gains):
            self.runs.setdefault(key, []).append(len(self.runtimes))
            self.configs.append(np.array(config))
            self.runtimes.append(float(r))
            self.expected.append(float(gain))
        return out

    def mean(self, key: int) -> float:
        return float(np.mean([self.runtimes[i] for i in self.runs[key]]))

    def ranked(self) -> list[int]:
        """Measured configs' keys, lowest mean runtime first (ties: measured earlier)."""
        return sorted(self.runs, key=lambda k: (self.mean(k), self.runs[k][0]))

    def config(self, key: int) -> np.ndarray:
        return self.configs[self.runs[key][0]]


def tune(measure: Callable, space: LayoutSpace, model: Any, budget: int, *, seed: int = 0,
         settings: TuneSettings = TuneSettings()) -> TuneResult:
    """Search the layouts of `space` with `model` (score / learn), measuring at most `budget`
    configs, the compiler default first; deterministic for a seed and a model in one state."""
    rng = np.random.default_rng(seed)
    ledger = Ledger(measure, budget)
    default = space.default(1)
    model.learn(default, ledger.measure(default))
    reserve, carry, rounds = _reserve(budget, settings), default[:0], 0
    strategy = make_strategy(settings.strategy, space, settings.search)
    while ledger.left > reserve:
        starts = np.concatenate([_elite(ledger, settings.elite), carry])
        archive = strategy.propose(starts, model.score, rng)
        picks = _choose(archive, ledger, min(settings.batch, ledger.left - reserve), settings,
                        rng)
        if not picks.size:
            break
        configs = np.array(archive.configs)
        over = np.array(archive.scores)[picks] - model.score(default)[0][0]
        model.learn(configs[picks], ledger.measure(configs[picks], over))
        carry = _unmeasured(archive, ledger, settings.search.population)
        rounds += 1
    return _confirmed(ledger, config_keys(default)[0], settings, rounds)


def tune_pool(measure: Callable, candidates: np.ndarray, model: Any, budget: int, *,
              seed: int = 0, settings: TuneSettings = TuneSettings(),
              tile: bool = True) -> TuneResult:
    """Tune over a fixed list of candidates (tile kernels: their config_feat rows; tune-sim: a
    layout file's configs): rounds of the best-scored unmeasured ones, measured and learnt from;
    the first candidate stands for the default in the result. `tile`: no random picks
    (exploring_rng). The candidates are fixed: settings.strategy proposes nothing here."""
    ledger = Ledger(measure, budget)
    rng = exploring_rng(tile, seed)
    reserve, rounds = _reserve(min(budget, len(candidates)), settings), 0
    while ledger.left > reserve and len(ledger.runs) < len(candidates):
        archive = Archive.empty()
        scores = archive.add(np.asarray(candidates), model.score)
        picks = _choose(archive, ledger, min(settings.batch, ledger.left - reserve), settings,
                        rng)
        configs = np.array(archive.configs)
        over = np.array(archive.scores)[picks] - scores[0]   # the first stands for the default
        model.learn(configs[picks], ledger.measure(configs[picks], over))
        rounds += 1
    first = config_keys(np.asarray(candidates)[:1])[0]
    return _confirmed(ledger, first if first in ledger.runs else None, settings, rounds)


def exploring_rng(tile: bool, seed: int) -> np.random.Generator | None:
    """What draws a search's random exploring picks (TuneSettings.drawn): nothing for tile
    kernels, whose trained model picks the best within 20 measurements (records)."""
    return None if tile else np.random.default_rng(seed)


def _reserve(budget: int, s: TuneSettings) -> int:
    """Measurements kept for confirming (`_remeasure`): `confirm` and the default's, fewer on
    a small budget (none below 10)."""
    n = min(s.confirm, max(0, (budget - 2) // 8))
    return n + 1 if n else 0


def _elite(ledger: Ledger, k: int) -> np.ndarray:
    return np.array([ledger.config(key) for key in ledger.ranked()[:k]])


def _unmeasured(archive: Archive, ledger: Ledger, k: int) -> np.ndarray:
    """The k best-scored configs of the archive not measured yet (next round's starts)."""
    configs = np.array(archive.configs)
    keys = config_keys(configs)
    order = [i for i in archive.best(len(keys)) if keys[i] not in ledger.runs][:k]
    return configs[order]


def _choose(archive: Archive, ledger: Ledger, k: int, s: TuneSettings,
            rng: np.random.Generator | None) -> np.ndarray:
    """Positions in the archive of k unmeasured configs (see `choose`; no random draws
    without an rng)."""
    configs, scores, spread = archive.arrays()
    if not len(configs) or k <= 0:
        return np.zeros(0, np.int64)
    fresh = np.array([key not in ledger.runs for key in config_keys(configs)])
    return choose(scores, spread, fresh, k, s.explore, s.kappa, s.drawn, rng)


def choose(scores: np.ndarray, spread: np.ndarray, fresh: np.ndarray, k: int, explore: int,
           kappa: float, drawn: int = 0, rng: np.random.Generator | None = None) -> np.ndarray:
    """Positions of k configs among the `fresh` (unmeasured) ones: the best-scored, and
    `explore` of them (at most half) not by score: `drawn` of those at random from the rest
    (rng; epsilon-greedy, as Ansor and MetaSchedule), the others by score + kappa * spread, an
    upper confidence bound."""
    n_explore = min(explore, k // 2)
    n_drawn = min(drawn, n_explore) if rng is not None else 0
    picks: list[int] = []
    for value, n in ((scores, k - n_explore), (scores + kappa * spread, n_explore - n_drawn)):
        order = [int(i) for i in np.argsort(-value, kind="stable") if fresh[i]]
        picks += [i for i in order if i not in picks][:n]
    if n_drawn:
        rest = fresh.copy()
        rest[picks] = False
        picks += rng.choice(np.flatnonzero(rest), min(n_drawn, int(rest.sum())),
                            replace=False).tolist()
    return np.array(picks, np.int64)


def _unflattered(ledger: Ledger, key: int, default: int | None) -> np.ndarray:
    """The log runtimes of a config that its choice did not see. A config measured again
    because its first measurement ranked it among the best keeps only the re-measurements: the
    first is flattered by its noise (the winner's curse; counting it, 1 of 10 CNN searches on
    the stand-in returned a config truly 0.1% slower than the default). The default, measured
    first whatever its runtime, keeps all of its."""
    logs = np.log([ledger.runtimes[i] for i in ledger.runs[key]])
    return logs if key == default or logs.size < 2 else logs[1:]


def _advantage(ledger: Ledger, key: int, default: int) -> float:
    """How many standard errors of the difference of their mean log runtimes config `key` is
    faster than the default by (noise from configs measured more than once, at least
    MIN_NOISE): a config flattered by its noise is not returned over the default."""
    pairs = [v - v.mean() for v in (np.log([ledger.runtimes[i] for i in runs])
                                    for runs in ledger.runs.values()) if v.size > 1]
    dof = sum(v.size - 1 for v in pairs)
    noise = max(np.sqrt(sum((v ** 2).sum() for v in pairs) / dof) if dof else 0.0, MIN_NOISE)
    mine, base = _unflattered(ledger, key, default), _unflattered(ledger, default, default)
    se = noise * np.sqrt(1 / mine.size + 1 / base.size)
    return float((base.mean() - mine.mean()) / se)


def _corrected(z: float, m: int) -> float:
    """The z that keeps one comparison's false-alarm rate for the best of m (Bonferroni): the
    best of several re-measured configs is flattered by its re-measurement's noise too (with z
    alone a search on the stand-in returned a config 0.1% slower than the default)."""
    normal = NormalDist()
    return normal.inv_cdf(1 - (1 - normal.cdf(z)) / max(m, 1))


def _confirmed(ledger: Ledger, default: int | None, s: TuneSettings, rounds: int) -> TuneResult:
    """Spend the reserve (`_remeasure`), then return the re-measured config of lowest mean
    re-measurement if it beats the default."""
    _remeasure(ledger, default, ledger.left)
    repeated = [k for k in ledger.ranked() if len(ledger.runs[k]) > 1]
    best = _least(ledger, repeated, default) if repeated else ledger.ranked()[0]
    # the configs the best was chosen among: those re-measured, else every one measured
    rivals = sum(k != default for k in (repeated or ledger.runs))
    evidence = None
    if default is not None and best != default:
        evidence = Evidence(float(np.exp(_unflattered(ledger, default, default).mean()
                                         - _unflattered(ledger, best, default).mean())),
                            _advantage(ledger, best, default), _corrected(s.margin, rivals))
        if not evidence.confirmed:
            best = default
    verdict = _verdict(ledger, default, evidence) if best == default else None
    return TuneResult(best=ledger.config(best), evidence=evidence, verdict=verdict,
                      best_runtime=float(np.exp(_unflattered(ledger, best, default)).mean()),
                      default_runtime=ledger.mean(default) if default is not None
                      else float("nan"),
                      configs=np.array(ledger.configs), runtimes=np.array(ledger.runtimes),
                      rounds=rounds, settings=asdict(s))


def _verdict(ledger: Ledger, default: int, evidence: Evidence | None) -> Verdict | None:
    """Why the default was kept, from the configs the model chose (None: it chose none)."""
    expected = np.array(ledger.expected)
    chosen = np.isfinite(expected)
    chosen[ledger.runs[default]] = False     # a pool's first config stands for the default
    picked = np.flatnonzero(chosen)
    if not picked.size:
        return None
    base = _unflattered(ledger, default, default).mean()
    faster = int((np.log(np.array(ledger.runtimes)[picked]) < base).sum())
    predicted = int((expected[picked] > 0).sum())
    cause = ("unconfirmed" if evidence is not None or faster else
             "mispredicted" if predicted else "none predicted")
    return Verdict(cause, int(picked.size), predicted, faster)


def _remeasure(ledger: Ledger, default: int | None, n: int) -> None:
    """The reserve's n measurements: the best n - 2 configs and the default again (no default,
    as for tile pools: the best n - 1), then the best of those configs once more; a reserve of
    2: the best and the default; of 1: the best. The likely winner measured twice is told from
    the default with fewer rivals to correct for than the reserve spread over more configs:
    with 1% noise, a 3% gain confirmed on 65% of simulated trials instead of 55% (the best three
    once each), and on the test's space of configs 0.1% slower, one returned in 3 of 300
    searches instead of 11 (docs/records/tuner_stand_in.md)."""
    ranked = ledger.ranked()
    size = n - 1 if n > 2 else n
    first = ranked[:size]
    if size > 1 and default is not None and default not in first:
        first = ranked[:size - 1] + [default]     # the default in the last one's place
    if first:
        ledger.measure(np.array([ledger.config(k) for k in first]))
    rivals = [k for k in first if k != default]
    if size < n and rivals:
        ledger.measure(ledger.config(_least(ledger, rivals, default))[None])


def _least(ledger: Ledger, keys: list[int], default: int | None) -> int:
    """Of keys, the config of lowest mean unflattered log runtime (ties: measured first)."""
    return min(keys, key=lambda k: (_unflattered(ledger, k, default).mean(), ledger.runs[k][0]))


@dataclass
class Bound:
    """A model with CostModel's rank/update, bound to one graph: the tuner's score and learn."""
    model: Any
    graph: Any      # models.api.GraphArrays: the arrays rank and update take beside the configs
    reference: np.ndarray | None = None
    collection: str | None = None
    key: str = "node_config_feat"
    name: str = "graph"     # names the graph in the model's errors

    def score(self, configs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ranking = self.model.rank(**self.graph.kwargs(), **{self.key: configs},
                                  reference=self.reference, collection=self.collection,
                                  name=self.name)
        return ranking.scores, ranking.spread

    def learn(self, configs: np.ndarray, runtimes: np.ndarray):
        return self.model.update(**self.graph.kwargs(), **{self.key: configs}, runtimes=runtimes,
                                 reference=self.reference, collection=self.collection,
                                 name=self.name)


@dataclass
class Frozen:
    """The model's scores, never taught (what measurements are worth: compare with it)."""
    model: Any

    def score(self, configs):
        return self.model.score(configs)

    def learn(self, configs, runtimes):
        return None


@dataclass
class Blind:
    """No model: random scores, so the search is evolution on measurements alone."""
    seed: int = 0

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def score(self, configs):
        return self.rng.random(len(configs)), np.zeros(len(configs))

    def learn(self, configs, runtimes):
        return None
