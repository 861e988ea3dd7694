"""A run's models fit again with families held out (models/training/fold_models.py), and
tune-sim on the train graphs with them (`tune-sim --folds`)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import features
import pipeline
from models import metrics
from models.training.fold_models import fold_models, run_config
from models.training.run_files import is_partner
from models.training.run_record import RunRecord
from models.training.runs import cross_validate, rows_of, seed_scores
from models.training.family_split import graph_family

COLLECTION = "tile:xla"


@pytest.fixture(scope="module")
def train_entry(trained, trained_run, tiny_npz):
    cache, _ = trained
    settings = RunRecord.read(trained_run).feature_config
    built = features.build_entries(tiny_npz, [COLLECTION], ("train",), settings, cache)
    return built[COLLECTION, "train"]


def test_fold_models_are_the_cross_validations_models_kept(trained_run, train_entry):
    said = []
    folds = fold_models(trained_run, train_entry, COLLECTION, 2, log=said.append)
    assert len(folds) == 2 and len(said) == 2
    cfg = run_config(RunRecord.read(trained_run))
    train = rows_of(train_entry, cfg)
    # train --folds 2 scores each held-out graph with models fit on the other fold; the kept
    # models, saved and read back, score them exactly so
    expected = cross_validate(replace(cfg, folds=2), train)
    held_ids = [g for _, ids in folds for g in ids]
    assert sorted(held_ids) == sorted(train.graph_ids)
    for models, ids in folds:
        at = np.array([train.graph_ids.index(g) for g in ids])
        held = train.take_graphs(at)
        rankers = [m for m in models if not is_partner(m)]
        partners = [m for m in models if is_partner(m)]
        assert len(rankers) == cfg.seeds
        for i, s in enumerate(seed_scores(rankers, partners, held)):
            got = metrics.per_graph_scores(COLLECTION, s, held.runtime, held.ptr)
            np.testing.assert_allclose(got, expected[i, at], equal_nan=True)
        # whole families: none of a fold's held-out families among the others' graphs
        others = {graph_family(g) for g in train.graph_ids if g not in ids}
        assert not others & {graph_family(g) for g in ids}


def test_fold_models_are_fit_once_and_again_for_other_train_graphs(trained_run, train_entry):
    fold_models(trained_run, train_entry, COLLECTION, 2, log=lambda line: None)
    where = trained_run / "folds-2" / "tile-xla"
    stamp = (where / "held_out.json").stat().st_mtime_ns
    said = []
    fold_models(trained_run, train_entry, COLLECTION, 2, log=said.append)
    assert not said and (where / "held_out.json").stat().st_mtime_ns == stamp
    saved = json.loads((where / "held_out.json").read_text())
    saved["graphs"] = saved["graphs"][1:]       # as if fit on other train graphs
    (where / "held_out.json").write_text(json.dumps(saved))
    fold_models(trained_run, train_entry, COLLECTION, 2, log=said.append)
    assert len(said) == 2


@pytest.mark.slow
def test_tune_sim_on_the_train_graphs_with_their_families_held_out(trained, trained_run,
                                                                   capsys):
    cache, common = trained
    data_dir = common[common.index("--data-dir") + 1]
    assert pipeline.main(["tune-sim", "--data-dir", data_dir, "--cache-dir", str(cache),
                          "--run", str(trained_run), "--max-graphs", "2", "--folds", "2",
                          "--collections", COLLECTION, "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "the train graphs, their families held out over 2 folds" in out
    # another seed's draws are saved beside seed 0's, not over them
    saved = json.loads((trained_run / "tune_sim_folds-2_seed-1.json").read_text())
    graphs = [g["graph"] for g in saved["collections"][COLLECTION]["graphs"]]
    held = json.loads((trained_run / "folds-2" / "tile-xla" / "held_out.json").read_text())
    # at most 2 per fold, each a train graph, each fold's first ones
    assert graphs == [g for ids in held["held_out"].values() for g in ids[:2]]
    assert saved["settings"]["folds"] == 2 and saved["settings"]["seed"] == 1


def test_tune_sim_refuses_one_fold(trained, trained_run, capsys):
    cache, common = trained
    with pytest.raises(SystemExit):
        pipeline.main(["tune-sim", "--cache-dir", str(cache), "--run", str(trained_run),
                       "--folds", "1"])
    assert ">= 2" in capsys.readouterr().err
