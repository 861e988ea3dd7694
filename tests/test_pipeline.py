"""The three commands end to end, in-process, on the tiny generated tree."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline
from features import FeatureConfig
from models.training import RANKERS
from features.npz.find import list_npz
from features.npz.read import count_configs
from features.schema import COLLECTIONS

from .conftest import QUICK, quick

README = Path(__file__).resolve().parents[1] / "README.md"


def test_train_records_a_run_that_beats_random(trained):
    cache, _ = trained
    record = json.loads(next((cache / "runs").glob("*/run.json")).read_text())
    assert set(record["metrics"]) == set(COLLECTIONS)
    for collection, m in record["metrics"].items():
        assert m["mean"] > m["random_mean"], collection
    assert record["features"]["signature"] and record["versions"]["lightgbm"]


@pytest.mark.slow
def test_submit_writes_a_valid_submission(trained, tiny_npz, tmp_path, capsys):
    cache, common = trained
    out = tmp_path / "submission.csv"
    assert pipeline.main(["submit", *common, "--out", str(out)]) == 0
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["ID", "TopConfigs"]
    expected = {f"{c}:{f.stem}": count_configs(f) for c in COLLECTIONS
                for f in list_npz(tiny_npz, c, "test")}
    got = {r[0]: [int(x) for x in r[1].split(";")] for r in rows[1:]}
    assert got.keys() == expected.keys()
    for row_id, picks in got.items():
        c = expected[row_id]
        if row_id.startswith("tile:xla:"):
            assert len(picks) == min(5, c) and len(set(picks)) == len(picks)
        else:
            assert sorted(picks) == list(range(c))
    out = capsys.readouterr().out
    for collection in COLLECTIONS:
        assert f"{collection:<20} served by" in out


def test_second_build_is_served_from_cache(trained, capsys):
    _, common = trained
    assert pipeline.main(["build-features", *common, "--collections", "tile:xla"]) == 0
    out = capsys.readouterr().out
    assert out.count("cached") == 3 and "built" not in out


def _full_run(cache: Path) -> Path:
    """The fixture's run: the first with a model for every collection."""
    return min((p for p in (cache / "runs").glob("*/run.json")
                if len(json.loads(p.read_text())["metrics"]) == len(COLLECTIONS)),
               key=lambda p: p.stat().st_mtime).parent


def _doctored_run(trained, tmp_path, edit) -> Path:
    """A copy of the trained run whose run.json was changed by `edit`."""
    cache, _ = trained
    run = _full_run(cache) / "run.json"
    copy = tmp_path / "doctored"
    shutil.copytree(run.parent, copy)
    record = json.loads(run.read_text())
    edit(record)
    (copy / "run.json").write_text(json.dumps(record))
    return copy


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["features"].update(signature="0" * 12), "trained on features 000000000000"),
    (lambda r: r["metrics"].pop("tile:xla"), "cannot serve tile:xla: no model for tile:xla"),
])
def test_submit_refuses_a_stale_or_incomplete_run(trained, tmp_path, capsys, edit, message):
    _, common = trained
    run = _doctored_run(trained, tmp_path, edit)
    out = tmp_path / "s.csv"
    assert pipeline.main(["submit", *common, "--run", str(run), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_named_data_dir_must_exist(tmp_path, capsys):
    code = pipeline.main(["build-features", "--data-dir", str(tmp_path / "nope"),
                          "--cache-dir", str(tmp_path)])
    assert code == 2 and "no TpuGraphs tree" in capsys.readouterr().err


def test_without_data_the_sample_is_generated_and_announced(tmp_path, monkeypatch):
    import features.npz.data_source as data
    from .conftest import TINY

    monkeypatch.delenv("TPUGRAPHS_DIR", raising=False)
    monkeypatch.setattr(data, "DEFAULT_DATA_DIR", tmp_path / "absent")
    source = pipeline.data_source(None, tmp_path / "cache", TINY)
    assert source.is_sample and "using the generated sample" in source.description
    assert not data.resolve_data(None)
    assert list_npz(source.npz_root, "tile:xla", "test")


@pytest.mark.slow
def test_training_on_the_generated_sample_is_a_demo_schedule(tmp_path, monkeypatch, capsys):
    """No data found: the generated sample (the tiny tree here) trains on the demo schedule,
    says so, and records it; its rounds cap every model, the node learner's too."""
    import features.npz.data_source as data
    import models.sample.generate as generate
    from models.training.node_learner import NodeParams
    from models.training.runs import DEMO
    from .conftest import TINY
    monkeypatch.delenv("TPUGRAPHS_DIR", raising=False)
    monkeypatch.setattr(data, "DEFAULT_DATA_DIR", tmp_path / "absent")
    monkeypatch.setattr(generate, "SampleSpec", lambda: TINY)
    assert pipeline.main(["train", "--cache-dir", str(tmp_path), "--workers", "1",
                          "--collections", "tile:xla", "layout:xla:default"]) == 0
    assert "a demo schedule on the generated sample" in capsys.readouterr().out
    record = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    assert record["features"]["sample"] and record["train_config"]["demo"]
    assert record["train_config"]["seeds"] == DEMO.seeds < 3
    for params in (*record["params"].values(), *record["node_params"].values()):
        assert params["n_estimators"] == DEMO.rounds < NodeParams().n_estimators
    assert record["params"]["tile:xla"]["early_stopping"] == DEMO.early_stopping
    assert all(len(m["rounds"]) == DEMO.seeds for m in record["metrics"].values())


def test_training_on_a_data_dir_keeps_the_full_schedule(trained_run):
    """The tiny tree named with --data-dir is real data to `train`: 3 seeds, every model's own
    rounds (the node learner's 600; the rankers' are the tests' QUICK --set)."""
    from models.training.node_learner import NodeParams
    record = json.loads((trained_run / "run.json").read_text())
    assert not record["features"]["sample"] and not record["train_config"]["demo"]
    assert record["train_config"]["seeds"] == 3
    assert record["node_params"]["layout:xla:default"]["n_estimators"] == \
        NodeParams().n_estimators


def test_bad_setting_is_an_error_not_a_crash(tiny_root, tmp_path, capsys):
    code = pipeline.main(["build-features", "--data-dir", str(tiny_root), "--cache-dir",
                          str(tmp_path), "--feature", "feature_set=fancy"])
    assert code == 2 and "feature_set" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(pipeline.COMMANDS))
def test_help_for_every_command(command, capsys):
    with pytest.raises(SystemExit) as exc:
        pipeline.main([command, "--help"])
    out = capsys.readouterr().out
    # compare reads the two run directories it is given, encode one program: no cache
    assert exc.value.code == 0 and ("--cache-dir" in out) != (command in ("compare", "encode"))


def test_readme_documents_every_command_and_the_test_command():
    text = README.read_text()
    for command in pipeline.COMMANDS:
        assert f"pipeline.py {command}" in text
    ci = (README.parent / ".ci" / "run").read_text()
    test_cmd = re.search(r"^python -m pytest.*$", ci, re.M).group(0)
    assert test_cmd in text


def test_feature_config_defaults_are_recorded_with_the_run(trained):
    cache, _ = trained
    record = json.loads(next((cache / "runs").glob("*/run.json")).read_text())
    assert record["features"]["settings"] == FeatureConfig().__dict__


@pytest.mark.parametrize("ranker", sorted(RANKERS))
@pytest.mark.slow
def test_every_ranker_beats_random_order_on_the_sample(ranker, trained, tmp_path):
    """Floors below the worst of three seeds per ranker on this tiny sample (lowest seen over
    seeds 0-2: xla:random +0.86, nlp:default +0.46, tile +0.19 above random)."""
    cache, common = trained
    code = pipeline.main(["train", "--ranker", ranker, *common, *quick(ranker), "--collections",
                          "tile:xla", "layout:xla:random", "layout:nlp:default"])
    assert code == 0
    record = max((json.loads(p.read_text()) for p in (cache / "runs").glob("*/run.json")
                  if ranker in p.parent.name), key=lambda r: r["created"])
    m = record["metrics"]
    assert m["layout:xla:random"]["mean"] > m["layout:xla:random"]["random_mean"] + 0.5
    assert m["layout:nlp:default"]["mean"] > m["layout:nlp:default"]["random_mean"] + 0.25
    assert m["tile:xla"]["mean"] > m["tile:xla"]["random_mean"] + 0.1


# ---------------------------------------------------------------- complete submissions

def _data_copy(tiny_root, tmp_path) -> Path:
    """A copy of the tiny tree (same names and sizes, so the same data to a run)."""
    copy = tmp_path / "data"
    shutil.copytree(tiny_root / "npz_all", copy / "npz_all")
    return copy


def _submit(trained, data, tmp_path, *extra) -> tuple[int, Path]:
    cache, _ = trained
    out = tmp_path / "s.csv"
    code = pipeline.main(["submit", "--data-dir", str(data), "--cache-dir", str(cache),
                          "--workers", "1", "--out", str(out), *extra])
    return code, out


def _test_dir(data: Path, collection: str) -> Path:
    return data / "npz_all" / "npz" / Path(*collection.split(":")) / "test"


@pytest.mark.parametrize("how", ["empty", "missing"])
def test_submit_refuses_a_collection_without_test_files(trained, tiny_root, tmp_path, capsys,
                                                        how):
    data = _data_copy(tiny_root, tmp_path)
    test_dir = _test_dir(data, "layout:xla:default")
    shutil.rmtree(test_dir)
    if how == "empty":
        test_dir.mkdir()
    code, out = _submit(trained, data, tmp_path)
    assert code == 2 and "no test files for layout:xla:default" in capsys.readouterr().err
    assert not out.exists()


def test_submit_refuses_an_empty_test_tree(trained, tiny_root, tmp_path, capsys):
    data = _data_copy(tiny_root, tmp_path)
    for collection in COLLECTIONS:
        for f in _test_dir(data, collection).glob("*.npz"):
            f.unlink()
    code, out = _submit(trained, data, tmp_path)
    assert code == 2 and "no test files for tile:xla" in capsys.readouterr().err
    assert not out.exists()


def test_a_stem_that_cannot_be_a_csv_id_fails_before_writing(trained, tiny_root, tmp_path,
                                                             capsys):
    data = _data_copy(tiny_root, tmp_path)
    first = sorted(_test_dir(data, "tile:xla").glob("*.npz"))[0]
    first.rename(first.with_name("a,b.npz"))
    code, out = _submit(trained, data, tmp_path)
    assert code == 2 and "a,b.npz: the file name cannot be written" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_ids_must_match_the_downloads_sample_submission(trained, tiny_root, tiny_npz, tmp_path,
                                                        capsys):
    data = _data_copy(tiny_root, tmp_path)
    ids = [f"{c}:{f.stem}" for c in COLLECTIONS for f in list_npz(tiny_npz, c, "test")]
    (data / "sample_submission.csv").write_text(
        "ID,TopConfigs\n" + "".join(f"{i},0;1\n" for i in ids))
    code, out = _submit(trained, data, tmp_path)
    assert code == 0 and out.exists()
    out.unlink()
    (data / "sample_submission.csv").write_text(
        "ID,TopConfigs\n" + "".join(f"{i},0;1\n" for i in ids[1:] + ["tile:xla:elsewhere"]))
    code, out = _submit(trained, data, tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and "tile:xla:elsewhere" in err and ids[0] in err and not out.exists()


@pytest.mark.slow
def test_a_run_trained_on_other_data_needs_the_flag_and_is_named(trained, tiny_root, tmp_path,
                                                                 capsys):
    data = _data_copy(tiny_root, tmp_path)
    sorted((data / "npz_all" / "npz" / "tile" / "xla" / "train").glob("*.npz"))[0].unlink()
    code, out = _submit(trained, data, tmp_path)
    assert code == 2 and "trained on other train files" in capsys.readouterr().err
    code, out = _submit(trained, data, tmp_path, "--allow-other-data")
    printed = capsys.readouterr().out
    assert code == 0 and out.exists()
    assert "tile:xla             served by" in printed and \
        "(note: trained on other train files than this data's)" in printed


@pytest.mark.slow
def test_a_run_trained_on_the_sample_is_not_used_for_other_data(trained, tiny_root, tmp_path,
                                                                capsys):
    def as_if_sample(record):
        record["features"].update(sample=True, train_files={
            c: "sample-files" for c in record["features"]["train_files"]})
    run = _doctored_run(trained, tmp_path, as_if_sample)
    code, out = _submit(trained, tiny_root, tmp_path, "--run", str(run))
    assert code == 2 and "trained on the generated sample" in capsys.readouterr().err
    code, out = _submit(trained, tiny_root, tmp_path, "--run", str(run), "--allow-other-data")
    assert code == 0 and "note: trained on the generated sample" in capsys.readouterr().out


# ---------------------------------------------------------------- runs that compose

@pytest.mark.slow
def test_runs_trained_on_subsets_compose_into_one_submission(trained, tiny_root, tmp_path,
                                                             capsys):
    cache, common = trained
    runs = cache / "runs"
    full = _full_run(cache)
    assert pipeline.main(["train", *common, *QUICK, "--seed", "11", "--collections",
                          "tile:xla"]) == 0
    newest = max(runs.glob("*/run.json"), key=lambda p: p.stat().st_mtime).parent
    capsys.readouterr()
    code, out = _submit(trained, tiny_root, tmp_path)
    printed = capsys.readouterr().out
    assert code == 0 and out.exists()
    assert f"tile:xla             served by {newest}" in printed
    for collection in COLLECTIONS[1:]:
        assert f"{collection:<20} served by" in printed and \
            f"{collection:<20} served by {newest}" not in printed
    code, _ = _submit(trained, tiny_root, tmp_path, "--run", f"tile:xla={full}",
                      "--run", f"layout:xla:random={full}")
    printed = capsys.readouterr().out
    assert code == 0 and f"tile:xla             served by {full}" in printed
    code, _ = _submit(trained, tiny_root, tmp_path, "--run", str(newest))
    assert code == 2 and "cannot serve layout:xla:default: no model" in capsys.readouterr().err


# ---------------------------------------------------------------- empty or unusable splits

def _train(data, cache, *extra) -> int:
    return pipeline.main(["train", "--data-dir", str(data), "--cache-dir", str(cache),
                          "--workers", "1", *QUICK, *extra])


def test_an_empty_train_split_is_an_error(tiny_root, tmp_path, capsys):
    data = _data_copy(tiny_root, tmp_path)
    for f in (data / "npz_all" / "npz" / "tile" / "xla" / "train").glob("*.npz"):
        f.unlink()
    assert _train(data, tmp_path / "cache", "--collections", "tile:xla") == 2
    assert "tile:xla: the train split has no graphs" in capsys.readouterr().err
    assert not list((tmp_path / "cache" / "runs").glob("*"))


@pytest.mark.slow
def test_an_empty_valid_split_needs_the_flag_and_is_flagged(tiny_root, tmp_path, capsys):
    data = _data_copy(tiny_root, tmp_path)
    valid = data / "npz_all" / "npz" / "layout" / "xla" / "random" / "valid"
    for f in valid.glob("*.npz"):
        f.unlink()
    args = ("--collections", "layout:xla:random", "tile:xla")
    assert _train(data, tmp_path / "cache", *args) == 2
    assert "layout:xla:random: the valid split has no graphs" in capsys.readouterr().err
    assert not list((tmp_path / "cache" / "runs").glob("*"))
    assert _train(data, tmp_path / "cache", *args, "--allow-no-valid") == 0
    out = capsys.readouterr().out
    assert "warning: layout:xla:random: the valid split has no graphs" in out
    assert "final (mean of 1 collections)" in out
    record = json.loads(next((tmp_path / "cache" / "runs").glob("*/run.json")).read_text())
    assert record["metrics"]["layout:xla:random"]["mean"] is None
    assert record["final"] == record["metrics"]["tile:xla"]["mean"]


@pytest.mark.slow
def test_a_build_tries_every_split_and_lists_every_bad_file_by_collection(tiny_root, tmp_path,
                                                                          capsys):
    """A bad tile valid file and a bad layout train file: both are listed, under their
    collections, after every other file of every collection and split was built."""
    data = _data_copy(tiny_root, tmp_path)
    npz = data / "npz_all" / "npz"
    bad = [list_npz(npz, "tile:xla", "valid")[1], list_npz(npz, "layout:nlp:random", "train")[0]]
    for f in bad:
        f.write_bytes(f.read_bytes()[:300])
    code = pipeline.main(["build-features", "--data-dir", str(data), "--cache-dir",
                          str(tmp_path / "cache"), "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err
    assert err.startswith("error: 2 unusable file(s) in 2 collection(s)")
    tile, layout = err.index("tile:xla valid: 1 unusable"), err.index("layout:nlp:random train: 1")
    assert tile < err.index(bad[0].name) < layout < err.index(bad[1].name)
    built = {tuple(line.split()[:2]) for line in out.splitlines() if " graphs " in line}
    assert built == {(c, s) for c in COLLECTIONS for s in ("train", "valid", "test")} - {
        ("tile:xla", "valid"), ("layout:nlp:random", "train")}


def test_stale_temporaries_are_removed_when_a_command_starts(tmp_path, capsys):
    from features.cache.store import owner_tag

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tag = owner_tag().replace(str(os.getpid()), str(dead.pid))
    stale = tmp_path / "runs" / f"lambdarank-abc{tag}.x1"
    stale.mkdir(parents=True)
    pipeline.main(["build-features", "--data-dir", str(tmp_path / "absent"), "--cache-dir",
                   str(tmp_path)])
    assert not stale.exists() and "removed 1 temporaries" in capsys.readouterr().out


def _npz_opens(monkeypatch, root: Path) -> list[str]:
    """Every open of an .npz file under root from now on (zipfile and numpy open through io)."""
    import builtins
    import io

    opened, real_open = [], io.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and str(file).endswith(".npz") \
                and Path(file).resolve().is_relative_to(root.resolve()):
            opened.append(str(file))
        return real_open(file, *args, **kwargs)
    monkeypatch.setattr(io, "open", counting_open)
    monkeypatch.setattr(builtins, "open", counting_open)
    return opened


@pytest.mark.slow
def test_after_the_build_train_and_submit_open_no_raw_file(trained, tiny_root, tmp_path,
                                                           monkeypatch):
    """Node rows and config counts come from the cache entry: the download is read once."""
    # the shared session's build (features/ and packed/) without its runs: a cache just built
    shutil.copytree(trained[0], tmp_path / "cache", ignore=shutil.ignore_patterns("runs"))
    common = ["--data-dir", str(tiny_root), "--cache-dir", str(tmp_path / "cache"),
              "--workers", "1"]
    opened = _npz_opens(monkeypatch, tiny_root)
    assert pipeline.main(["train", "--seeds", "1", *common, *QUICK]) == 0
    assert pipeline.main(["submit", *common, "--out", str(tmp_path / "s.csv")]) == 0
    assert opened == []
    run = next((tmp_path / "cache" / "runs").glob("lambdarank-*/run.json"))
    node_models = list(run.parent.glob("layout-*-default/node-*"))
    assert node_models, "the default collections' node learners were trained from cached rows"
