"""`pipeline.py compare RUN_A RUN_B`: does B rank better than A, beyond what seeds alone move?

Both runs' per-graph scores of each seed (held-out-family CV of the train graphs, or the valid
split) are paired graph by graph and seed by seed. Per collection: both means, the gain (B - A
over graphs and seeds), each seed's gain, the seed-to-seed spread of each run's own mean, and
the families that gained and lost. A gain is "clear" when it is more than twice the larger seed
spread and twice the standard error over families (the held-out test is other families), and
more families gain than lose: a one-seed mean over a few graphs moves by more than most
feature changes (README, "Measuring quality").
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from models.training.run_files import read_run
from models.training.selection import graph_family

SPLITS = {"cv": ("cv_seed_per_graph", "held-out-family CV of the train graphs (--folds)"),
          "valid": ("seed_per_graph", "the valid split")}
CLEAR_SPREADS = 2.0   # a gain is clear above this many seed spreads and family standard errors


@dataclass
class Paired:
    collection: str
    graphs: int
    a: float                    # mean over graphs, then seeds
    b: float
    seed_gains: list[float]     # B - A of seed i against seed i
    seed_sd: float              # the larger of the two runs' sd of their per-seed means
    seeds: int                  # the fewer seeds of the two runs
    family_gains: dict[str, float]   # mean gain of each family's graphs, over seeds

    @property
    def gain(self) -> float:
        return self.b - self.a

    @property
    def family_se(self) -> float:
        """Standard error of the gain over families (0 with one family)."""
        gains = np.array(list(self.family_gains.values()))
        return float(gains.std(ddof=1) / np.sqrt(gains.size)) if gains.size > 1 else 0.0

    @property
    def clear(self) -> bool:
        """Never with fewer than 2 seeds a run: one seed shows no seed noise."""
        up = sum(g > 0 for g in self.family_gains.values())
        down = sum(g < 0 for g in self.family_gains.values())
        most = up > down if self.gain > 0 else down > up
        noise = max(self.seed_sd, self.family_se)
        return self.seeds >= 2 and abs(self.gain) > CLEAR_SPREADS * noise and most

    @property
    def verdict(self) -> str:
        if not self.clear:
            return "within noise"
        return "B clearly better" if self.gain > 0 else "B clearly worse"


def seed_scores(record: dict, run_dir: Path, collection: str, split: str):
    """(graph ids, (seeds, graphs) scores) of one collection of a run."""
    key, what = SPLITS[split]
    rows = record["metrics"].get(collection, {}).get(key) or []
    if not rows:
        hint = " (train it with --folds K)" if split == "cv" else ""
        raise ValueError(f"{run_dir}: no per-seed scores of {collection} on {what}{hint}; "
                         f"runs trained before per-seed records have none either")
    ids = list(rows[0])
    return ids, np.array([[np.nan if r.get(g) is None else r[g] for g in ids] for r in rows])


def paired(collection: str, a: tuple, b: tuple) -> Paired:
    """a, b: seed_scores of the two runs; only graphs scored by every seed of both count."""
    (ids_a, sa), (ids_b, sb) = a, b
    common = [g for g in ids_a if g in set(ids_b)]
    ia, ib = [ids_a.index(g) for g in common], [ids_b.index(g) for g in common]
    sa, sb = sa[:, ia], sb[:, ib]
    ok = np.isfinite(sa).all(axis=0) & np.isfinite(sb).all(axis=0)
    if not ok.any():
        raise ValueError(f"{collection}: the two runs share no graph that both scored")
    sa, sb, names = sa[:, ok], sb[:, ok], [g for g, k in zip(common, ok) if k]
    n = min(len(sa), len(sb))
    diff = (sb.mean(axis=0) - sa.mean(axis=0))
    fams = np.array([graph_family(g) for g in names])
    return Paired(collection, len(names), float(sa.mean()), float(sb.mean()),
                  [float(x) for x in (sb[:n] - sa[:n]).mean(axis=1)],
                  float(max(_sd(sa.mean(axis=1)), _sd(sb.mean(axis=1)))), n,
                  {f: float(diff[fams == f].mean()) for f in np.unique(fams)})


def _sd(x: np.ndarray) -> float:
    return float(x.std(ddof=1)) if x.size > 1 else 0.0


def compare_runs(run_a: Path, run_b: Path, split: str = "cv") -> list[Paired]:
    """Every collection both runs trained, paired on `split` ('cv' or 'valid')."""
    ra, rb = read_run(run_a), read_run(run_b)
    if split == "cv":
        # the folds follow --folds and --seed: other folds would pair a graph held out in
        # other company
        differ = [k for k in ("folds", "seed") if ra.get("train_config", {}).get(k) !=
                  rb.get("train_config", {}).get(k)]
        if differ:
            raise ValueError(f"{run_a} and {run_b} were cross-validated with other "
                             f"{' and '.join('--' + k for k in differ)}: their folds differ, "
                             f"so their held-out scores do not pair")
    both = [c for c in ra["metrics"] if c in rb["metrics"]]
    if not both:
        raise ValueError(f"{run_a} and {run_b} share no collection")
    return [paired(c, seed_scores(ra, run_a, c, split), seed_scores(rb, run_b, c, split))
            for c in both]


def as_json(results: list[Paired]) -> list[dict]:
    return [{**asdict(p), "gain": p.gain, "family_se": p.family_se, "clear": p.clear}
            for p in results]


def format_table(results: list[Paired], run_a: Path, run_b: Path, split: str) -> str:
    head = (f"{'collection':<20} {'graphs':>6} {'A':>7} {'B':>7} {'gain':>7} {'seed sd':>7} "
            f"{'fam se':>7}  {'fams +/-':>8}  {'worst family':<26} {'per-seed gains':<24} "
            f"verdict")
    lines = [f"A = {run_a}", f"B = {run_b}", f"paired on {SPLITS[split][1]}", head,
             "-" * len(head)]
    for p in results:
        up = sum(g > 0 for g in p.family_gains.values())
        down = sum(g < 0 for g in p.family_gains.values())
        worst = min(p.family_gains, key=p.family_gains.get)
        seeds = " ".join(f"{g:+.3f}" for g in p.seed_gains)
        lines.append(f"{p.collection:<20} {p.graphs:>6} {p.a:>7.3f} {p.b:>7.3f} {p.gain:>+7.3f} "
                     f"{p.seed_sd:>7.3f} {p.family_se:>7.3f}  {f'{up}/{down}':>8}  "
                     f"{f'{worst} {p.family_gains[worst]:+.3f}':<26} {seeds:<24} {p.verdict}")
    gains = [p.gain for p in results]
    lines.append(f"mean gain over {len(gains)} collections: {np.mean(gains):+.4f}")
    lines.append(f"verdict: 'clear' = |gain| above {CLEAR_SPREADS:g} x both the larger run's seed "
                 f"sd (sd of its per-seed means) and the standard error over families (fam se), "
                 f"most families moving the same way, and 2 seeds or more in each run")
    return "\n".join(lines)
