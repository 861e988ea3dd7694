"""pipeline.py compare: two runs paired graph by graph and seed by seed, against plain NumPy."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pipeline
from models.evaluation.compare import compare_runs

GRAPHS = [f"{fam}_batch_{b}_test" for fam in ("bert", "gpt2", "t5", "opt", "llama", "bloom",
                                              "albert", "roberta") for b in (8, 16)]


def write_run(path, cv: np.ndarray | None, valid: np.ndarray, collection="layout:nlp:default",
              seed=0, ensemble: np.ndarray | None = None):
    """A run.json holding per-seed scores (seeds, graphs) of GRAPHS, and the ensemble's
    (graphs,) on the valid split if given; NaN = unscored."""
    def by_graph(row):
        return {g: (None if np.isnan(x) else float(x)) for g, x in zip(GRAPHS, row)}
    metrics = {"seed_per_graph": [by_graph(r) for r in valid],
               "cv_seed_per_graph": [by_graph(r) for r in cv] if cv is not None else []}
    if ensemble is not None:
        metrics["per_graph"] = by_graph(ensemble)
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"metrics": {collection: metrics},
                                               "train_config": {"folds": 5, "seed": seed}}))
    return path


def test_gain_seed_gains_and_families_match_numpy(tmp_path, rng):
    a = rng.uniform(0.3, 0.6, len(GRAPHS)) + rng.normal(0, 0.005, (3, len(GRAPHS)))
    b = a + rng.normal(0.05, 0.01, a.shape)
    b[:, GRAPHS.index("t5_batch_8_test")] -= 0.2       # one family loses
    a[1, 0] = np.nan                                     # unscored by one seed: left out
    p, = compare_runs(write_run(tmp_path / "a", a, a), write_run(tmp_path / "b", b, b))
    keep = np.arange(1, len(GRAPHS))
    assert p.graphs == len(keep)
    assert p.a == pytest.approx(a[:, keep].mean()) and p.b == pytest.approx(b[:, keep].mean())
    assert p.seed_gains == pytest.approx((b[:, keep] - a[:, keep]).mean(axis=1).tolist())
    assert p.seed_sd == pytest.approx(max(a[:, keep].mean(axis=1).std(ddof=1),
                                          b[:, keep].mean(axis=1).std(ddof=1)))
    t5 = [GRAPHS.index(g) for g in ("t5_batch_8_test", "t5_batch_16_test")]
    assert p.family_gains["t5"] == pytest.approx((b[:, t5] - a[:, t5]).mean())
    assert p.family_gains["t5"] < 0 < p.family_gains["gpt"]
    fam = np.array(list(p.family_gains.values()))
    assert p.family_se == pytest.approx(fam.std(ddof=1) / np.sqrt(8))
    assert p.verdict == "B clearly better"


def test_a_gain_inside_the_seed_spread_is_noise(tmp_path, rng):
    a = rng.uniform(0.3, 0.6, (3, len(GRAPHS)))
    a[1] += 0.05                                          # seeds disagree by 0.05
    b = a.copy()
    b[0] += 0.01                                          # +0.0033 on the mean
    p, = compare_runs(write_run(tmp_path / "a", None, a), write_run(tmp_path / "b", None, b),
                      "valid")
    assert p.gain == pytest.approx(0.01 / 3) and p.verdict == "within noise"


def test_runs_without_per_seed_scores_are_refused_by_name(tmp_path, rng, capsys):
    a = write_run(tmp_path / "a", None, rng.uniform(size=(1, len(GRAPHS))))
    b = write_run(tmp_path / "b", None, rng.uniform(size=(1, len(GRAPHS))))
    assert pipeline.main(["compare", str(a), str(b), "--on", "cv"]) == 2
    err = capsys.readouterr().err
    assert str(a) in err and "held-out-family CV" in err and "--folds" in err
    assert pipeline.main(["compare", str(a), str(tmp_path / "nowhere")]) == 2
    assert "not a trained run" in capsys.readouterr().err
    assert pipeline.main(["compare", str(a), str(b), "--on", "valid"]) == 0
    assert "layout:nlp:default" in capsys.readouterr().out


def test_one_seed_is_never_clear_and_other_folds_do_not_pair(tmp_path, rng):
    a = rng.uniform(0.3, 0.6, (1, len(GRAPHS)))
    p, = compare_runs(write_run(tmp_path / "a", a, a), write_run(tmp_path / "b", a + 0.1, a))
    assert p.gain == pytest.approx(0.1) and p.verdict == "within noise"   # no seed noise seen
    with pytest.raises(ValueError, match="--seed: their folds differ"):
        compare_runs(tmp_path / "a", write_run(tmp_path / "c", a, a, seed=1), "cv")
    p, = compare_runs(tmp_path / "a", tmp_path / "c")      # without --on: the valid split
    assert p.on == "valid" and "folds differ" in p.note


def test_two_default_runs_compare_their_ensembles_on_valid_with_no_options(tmp_path, rng,
                                                                           capsys):
    """Runs of the default `train` (no --folds) compare out of the box, on the valid split,
    and the columns are the ensemble's scores, as train and report print them, not the mean
    of the single seeds (a tile ensemble of 0.836 whose seeds score 0.836, 0.834, 0.730)."""
    seeds = rng.uniform(0.3, 0.6, (3, len(GRAPHS)))
    seeds[2] -= 0.1                                       # one weak seed
    ensemble = seeds[:2].mean(axis=0) + 0.02              # the ensemble beats its seeds' mean
    a = write_run(tmp_path / "a", None, seeds, ensemble=ensemble)
    b = write_run(tmp_path / "b", None, seeds + 0.01, ensemble=ensemble + 0.01)
    assert pipeline.main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "paired on the valid split" in out and "without --folds" in out
    assert "A ens" in out and "the ensemble's per-graph score" in out
    row = next(line for line in out.splitlines() if line.startswith("layout:nlp:default"))
    assert row.split()[2:5] == [f"{ensemble.mean():.3f}", f"{ensemble.mean() + 0.01:.3f}",
                                "+0.010"]
    assert f"{seeds.mean():.3f}" not in row.split()[2:4]
    p, = compare_runs(a, b)
    assert (p.score, p.on) == ("ensemble", "valid")
    p, = compare_runs(write_run(tmp_path / "c", seeds, seeds), write_run(tmp_path / "d", seeds,
                                                                         seeds))
    assert (p.score, p.on) == ("mean of seeds", "cv")       # CV keeps no ensemble score


def test_family_means_lower_quartile_and_the_family_list(tmp_path, rng, capsys):
    a = rng.uniform(0.3, 0.9, (3, len(GRAPHS)))
    b = a + rng.normal(0.0, 0.02, a.shape)
    p, = compare_runs(write_run(tmp_path / "a", a, a), write_run(tmp_path / "b", b, b))
    fams = np.array([{"gpt2": "gpt"}.get(g.split("_")[0], g.split("_")[0]) for g in GRAPHS])
    means_b = {f: b[:, fams == f].mean() for f in set(fams)}
    assert p.family_b == pytest.approx(means_b)
    assert p.lower_quartile("b") == pytest.approx(np.percentile(list(means_b.values()), 25))
    assert p.worst_families(2) == sorted(means_b, key=means_b.get)[:2]
    assert pipeline.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                          "--families"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("per family, B's worst first")[1]
              .splitlines()[2:10]]
    assert listed == sorted(means_b, key=means_b.get)


def test_runs_that_pooled_other_graphs_do_not_pair_on_cv(tmp_path, rng):
    a = rng.uniform(0.3, 0.6, (3, len(GRAPHS)))
    write_run(tmp_path / "a", a, a)
    older = write_run(tmp_path / "b", a, a)
    record = json.loads((older / "run.json").read_text())
    for row in record["metrics"]["layout:nlp:default"]["cv_seed_per_graph"]:
        row.pop(GRAPHS[-1])                       # its CV held out one graph fewer
    (older / "run.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="cross-validated other graphs"):
        compare_runs(tmp_path / "a", older, "cv")
    p, = compare_runs(tmp_path / "a", older)
    assert p.on == "valid" and "graphs pooled" in p.note


def test_train_and_compare_print_one_seed_spread(tmp_path, rng):
    """The spread of a run's per-seed means is one figure: `train`'s table (run.json's
    seed_std) and `compare`'s seed sd are both metrics.seed_spread, numpy's std with ddof=1."""
    from models.training.runs import CollectionResult
    seeds = rng.uniform(0.3, 0.6, (3, len(GRAPHS)))
    seeds[0] -= 0.3                                    # one seed well below the others
    trained = CollectionResult("layout:nlp:default", seeds.mean(axis=0), np.zeros(len(GRAPHS)),
                               seeds, tuple(GRAPHS), 1.0).summary()
    run = write_run(tmp_path / "a", None, seeds)
    compared, = compare_runs(run, run, "valid")
    want = seeds.mean(axis=1).std(ddof=1)
    assert trained["seed_std"] == pytest.approx(want)
    assert compared.seed_sd == pytest.approx(want)
