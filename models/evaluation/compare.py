"""`pipeline.py compare RUN_A RUN_B`: does B rank better than A, beyond what seeds alone move?

Both runs' per-graph scores of each seed (held-out-family CV of the train and valid graphs, or the valid
split) are paired graph by graph and seed by seed. Per collection: both means (on the valid
split the ensemble's, as train and report print them; on CV, which has no ensemble, the mean of
the seeds'), the gain, each seed's gain, the seed-to-seed spread of each run's own mean, and
the families that gained and lost. A gain is "clear" when it is more than twice the larger seed
spread and twice the standard error over families (the held-out test is other families), and
more families gain than lose: a one-seed mean over a few graphs moves by more than most
feature changes (README, "Measuring quality"). Without `--on`, CV when both runs have it (both
trained with --folds), else the valid split, and the table says which and why.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from models.metrics import seed_spread
from models.training.run_record import RunRecord
from models.training.family_split import graph_family

SPLITS = {"cv": ("cv_seed_per_graph", "held-out-family CV of the train and valid graphs (--folds)"),
          "valid": ("seed_per_graph", "the valid split")}
CLEAR_SPREADS = 2.0   # a gain is clear above this many seed spreads and family standard errors


@dataclass
class Paired:
    collection: str
    graphs: int
    a: float                    # mean over graphs of `score`
    b: float
    seed_gains: list[float]     # B - A of seed i against seed i
    seed_sd: float              # the larger of the two runs' sd of their per-seed means
    seeds: int                  # the fewer seeds of the two runs
    family_gains: dict[str, float]   # mean gain of each family's graphs (of `score`)
    score: str = "mean of seeds"     # what a, b and the gains are: that, or "ensemble"
    on: str = "cv"                   # the split paired: "cv" or "valid"
    note: str = ""                   # why that split, when it was not asked for
    family_a: dict[str, float] = field(default_factory=dict)   # each family's mean score
    family_b: dict[str, float] = field(default_factory=dict)
    family_graphs: dict[str, int] = field(default_factory=dict)

    def lower_quartile(self, run: str) -> float:
        """The 25th percentile of a run's ('a' or 'b') family means: how its weaker families
        fare, which the mean hides (the held-out test is other families)."""
        means = list((self.family_a if run == "a" else self.family_b).values())
        return float(np.percentile(means, 25)) if means else float("nan")

    def worst_families(self, k: int = 3) -> list[str]:
        """The k families B scores lowest."""
        return sorted(self.family_b, key=self.family_b.get)[:k]

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


def seed_scores(record: RunRecord, run_dir: Path, collection: str, split: str):
    """(graph ids, (seeds, graphs) scores) of one collection of a run."""
    key, what = SPLITS[split]
    rows = record.metrics.get(collection, {}).get(key) or []
    if not rows:
        hint = " (train it with --folds K)" if split == "cv" else ""
        raise ValueError(f"{run_dir}: no per-seed scores of {collection} on {what}{hint}; "
                         f"runs trained before per-seed records have none either")
    ids = list(rows[0])
    return ids, np.array([[np.nan if r.get(g) is None else r[g] for g in ids] for r in rows])


def ensemble_scores(record: RunRecord, collection: str, split: str):
    """(graph ids, (graphs,) scores) of the run's ensemble on the valid split; None on CV (it
    keeps per-seed scores only) or for a run without them."""
    rows = record.metrics.get(collection, {}).get("per_graph") if split == "valid" else None
    if not rows:
        return None
    return list(rows), np.array([np.nan if v is None else v for v in rows.values()])


def paired(collection: str, a: tuple, b: tuple, ens_a: tuple | None = None,
           ens_b: tuple | None = None, on: str = "cv", note: str = "") -> Paired:
    """a, b: seed_scores of the two runs; ens_a, ens_b: their ensemble_scores, compared instead
    of the mean of seeds when both are given. Only graphs scored by every seed of both count."""
    (ids_a, sa), (ids_b, sb) = a, b
    common = [g for g in ids_a if g in set(ids_b)]
    ia, ib = [ids_a.index(g) for g in common], [ids_b.index(g) for g in common]
    sa, sb = sa[:, ia], sb[:, ib]
    ok = np.isfinite(sa).all(axis=0) & np.isfinite(sb).all(axis=0)
    use_ensemble = ens_a is not None and ens_b is not None
    if use_ensemble:
        ea, eb = (_on_graphs(e, common) for e in (ens_a, ens_b))
        ok &= np.isfinite(ea) & np.isfinite(eb)
    if not ok.any():
        raise ValueError(f"{collection}: the two runs share no graph that both scored")
    sa, sb, names = sa[:, ok], sb[:, ok], [g for g, k in zip(common, ok) if k]
    n = min(len(sa), len(sb))
    pa, pb = (ea[ok], eb[ok]) if use_ensemble else (sa.mean(axis=0), sb.mean(axis=0))
    diff = pb - pa
    fams = np.array([graph_family(g) for g in names])
    by_family = lambda x: {f: float(x[fams == f].mean()) for f in np.unique(fams)}  # noqa: E731
    return Paired(collection, len(names), float(pa.mean()), float(pb.mean()),
                  [float(x) for x in (sb[:n] - sa[:n]).mean(axis=1)],
                  max(seed_spread(sa.mean(axis=1)), seed_spread(sb.mean(axis=1))), n,
                  by_family(diff), "ensemble" if use_ensemble else "mean of seeds", on, note,
                  family_a=by_family(pa), family_b=by_family(pb),
                  family_graphs={f: int((fams == f).sum()) for f in np.unique(fams)})


def _on_graphs(scores: tuple, graphs: list[str]) -> np.ndarray:
    ids, values = scores
    at = {g: i for i, g in enumerate(ids)}
    return np.array([values[at[g]] if g in at else np.nan for g in graphs])


def compare_runs(run_a: Path, run_b: Path, split: str | None = None) -> list[Paired]:
    """Every collection both runs trained, paired on `split` ('cv' or 'valid'; None: CV where
    both runs have it, else valid, with a note saying why)."""
    ra, rb = RunRecord.read(run_a), RunRecord.read(run_b)
    both = [c for c in ra.collections if c in rb.metrics]
    if not both:
        raise ValueError(f"{run_a} and {run_b} share no collection")
    note = ""
    if split is None:
        split, note = _default_split(ra, rb, run_a, run_b, both)
    if split == "cv":
        _check_same_folds(ra, rb, run_a, run_b)
        pooled = _cv_pools_differ(ra, rb, both)
        if pooled:
            raise ValueError(f"{run_a} and {run_b} cross-validated other graphs on "
                             f"{', '.join(pooled)} (one of them before CV pooled the train and "
                             f"valid graphs?): their folds differ, so their held-out scores do "
                             f"not pair; retrain the older one")
    return [paired(c, seed_scores(ra, run_a, c, split), seed_scores(rb, run_b, c, split),
                   ensemble_scores(ra, c, split), ensemble_scores(rb, c, split), split, note)
            for c in both]


def _default_split(ra: RunRecord, rb: RunRecord, run_a: Path, run_b: Path, both: list[str]):
    """('cv', '') when both runs hold held-out-family scores from the same folds, else
    ('valid', why): two runs of the default `train` (no --folds) compare out of the box."""
    without = list(dict.fromkeys(str(p) for p, r in ((run_a, ra), (run_b, rb))
                                 if not all(r.metrics[c].get("cv_seed_per_graph")
                                            for c in both)))
    if without:
        return "valid", (f"{' and '.join(without)} {'has' if len(without) == 1 else 'have'} "
                         f"no held-out-family scores, trained without --folds K; --on cv "
                         f"needs both runs trained with the same --folds and --seed")
    if _fold_settings_differ(ra, rb) or _cv_pools_differ(ra, rb, both):
        return "valid", ("the runs' folds differ (--folds or --seed, or the graphs pooled), so "
                         "their held-out scores do not pair")
    return "cv", ""


def _cv_pools_differ(ra: RunRecord, rb: RunRecord, both: list[str]) -> list[str]:
    """The collections whose CV pooled other graphs in the two runs (a run from before CV took
    the valid graphs in holds out the train graphs only: other folds)."""
    ids = lambda r, c: set((r.metrics[c].get("cv_seed_per_graph") or [{}])[0])  # noqa: E731
    return [c for c in both if ids(ra, c) != ids(rb, c)]


def _fold_settings_differ(ra: RunRecord, rb: RunRecord) -> list[str]:
    return [k for k in ("folds", "seed") if ra.train_config.get(k) != rb.train_config.get(k)]


def _check_same_folds(ra: RunRecord, rb: RunRecord, run_a: Path, run_b: Path) -> None:
    # the folds follow --folds and --seed: other folds would pair a graph held out in other
    # company
    differ = _fold_settings_differ(ra, rb)
    if differ:
        raise ValueError(f"{run_a} and {run_b} were cross-validated with other "
                         f"{' and '.join('--' + k for k in differ)}: their folds differ, "
                         f"so their held-out scores do not pair")


def as_json(results: list[Paired]) -> list[dict]:
    return [{**asdict(p), "gain": p.gain, "family_se": p.family_se, "clear": p.clear,
             "lower_quartile": {"a": p.lower_quartile("a"), "b": p.lower_quartile("b")}}
            for p in results]


def format_table(results: list[Paired], run_a: Path, run_b: Path,
                 families: bool = False) -> str:
    score, on = results[0].score, results[0].on
    tag = "ens" if score == "ensemble" else "seeds"
    head = (f"{'collection':<20} {'graphs':>6} {f'A {tag}':>9} {f'B {tag}':>9} "
            f"{f'gain {tag}':>10} {'seed sd':>7} {'fam se':>7}  {'fams +/-':>8}  "
            f"{'worst family':<26} {'fam q25 A/B':<12} {'per-seed gains':<24} verdict")
    lines = [f"A = {run_a}", f"B = {run_b}",
             f"paired on {SPLITS[on][1]}" + (f" ({results[0].note})" if results[0].note else ""),
             head, "-" * len(head)]
    for p in results:
        up = sum(g > 0 for g in p.family_gains.values())
        down = sum(g < 0 for g in p.family_gains.values())
        worst = min(p.family_gains, key=p.family_gains.get)
        seeds = " ".join(f"{g:+.3f}" for g in p.seed_gains)
        q25 = f"{p.lower_quartile('a'):.3f}/{p.lower_quartile('b'):.3f}"
        lines.append(f"{p.collection:<20} {p.graphs:>6} {p.a:>9.3f} {p.b:>9.3f} "
                     f"{p.gain:>+10.3f} {p.seed_sd:>7.3f} {p.family_se:>7.3f}  "
                     f"{f'{up}/{down}':>8}  {f'{worst} {p.family_gains[worst]:+.3f}':<26} "
                     f"{q25:<12} "
                     f"{seeds:<24} {p.verdict}")
    gains = [p.gain for p in results]
    lines.append(f"mean gain over {len(gains)} collections: {np.mean(gains):+.4f}")
    if families:
        lines += [line for p in results for line in _family_lines(p, tag)]
    lines.append(f"columns: {tag} = {SCORES[score]}; per-seed gains = B - A of seed i against "
                 f"seed i, each a single model's score; fams +/- and worst family: the gain of "
                 f"{tag} per model family; fam q25 = the lower quartile of the family means "
                 f"(A / B)")
    lines.append(f"verdict: 'clear' = |gain| above {CLEAR_SPREADS:g} x both the larger run's seed "
                 f"sd (sample sd, n - 1, of its per-seed means, as train prints it) and "
                 f"the standard error over families (fam se), "
                 f"most families moving the same way, and 2 seeds or more in each run")
    return "\n".join(lines)


def _family_lines(p: Paired, tag: str) -> list[str]:
    """Every family of a collection, B's worst first: graphs, both runs' means, the gain."""
    lines = ["", f"{p.collection} per family, B's worst first ({tag}):",
             f"{'family':<16} {'graphs':>6} {'A':>7} {'B':>7} {'gain':>7}"]
    for f in sorted(p.family_b, key=p.family_b.get):
        lines.append(f"{f:<16} {p.family_graphs[f]:>6} {p.family_a[f]:>7.3f} "
                     f"{p.family_b[f]:>7.3f} {p.family_gains[f]:>+7.3f}")
    return lines


SCORES = {"ensemble": "the ensemble's per-graph score (its seeds' scaled scores averaged, as "
                      "train and report print it), mean over graphs",
          "mean of seeds": "the mean over seeds of each single seed's per-graph score (held-out-"
                           "family CV keeps no ensemble score), mean over graphs"}
