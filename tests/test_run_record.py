"""run.json read as a RunRecord: written back byte for byte, older and newer runs still load."""
from __future__ import annotations

import json

import pytest

from features.cache.store import DamagedCacheError
from models.training.run_record import RunRecord


def test_a_trained_run_is_written_back_byte_for_byte(trained_run):
    text = (trained_run / "run.json").read_text()
    assert json.dumps(RunRecord.read(trained_run).to_json(), indent=1) == text


def test_keys_this_code_does_not_know_are_kept_where_they_are(tmp_path):
    written = {"ranker": "lambdarank", "train_config": {"seeds": 2, "without": ["opcode"]},
               "features": {"signature": "abc", "newer": [1]}, "metrics": {"tile:xla": {}},
               "from_a_newer_writer": {"x": 1}}
    (tmp_path / "run.json").write_text(json.dumps(written))
    record = RunRecord.read(tmp_path)
    assert record.extra == {"from_a_newer_writer": {"x": 1}}
    assert record.features.extra == {"newer": [1]}
    assert (record.collections, record.seeds, record.without) == (["tile:xla"], 2, ("opcode",))
    again = RunRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.to_json()["features"]["newer"] == [1]


def test_an_older_run_without_the_later_keys_loads(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"ranker": "xgboost", "metrics": {"a": {},
                                                                                     "b": {}}}))
    record = RunRecord.read(tmp_path)
    assert record.scored_collections == ["a", "b"] and record.files == {} and record.warnings == ()
    assert record.trained_on == "" and record.without == ()


@pytest.mark.parametrize("text", ['{"ranker": "lambd', "[1, 2]"])
def test_a_run_json_that_is_no_record_is_damaged(tmp_path, text):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(DamagedCacheError, match="damaged run record"):
        RunRecord.read(tmp_path)


def test_a_directory_without_run_json_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a trained run"):
        RunRecord.read(tmp_path)


@pytest.mark.parametrize("demo, seeds, says", [(True, 3, True), (True, 1, False),
                                               (False, 3, False), (False, 2, True)])
def test_the_retrain_command_names_seeds_off_its_runs_own_schedule(tmp_path, demo, seeds, says):
    """A damaged model's message asks for the command that makes the same run: a demo run's
    seeds are named unless they are the demo's (rerun on the sample, it trains the demo's),
    a real run's unless they are the full schedule's."""
    from dataclasses import replace

    from models.training.run_record import RunFeatures
    from models.training.runs import TrainConfig, on_schedule, retrain_command
    cfg = replace(on_schedule(TrainConfig(), demo, seeds), seeds=seeds)
    command = retrain_command(cfg, ["tile:xla"], tmp_path / "runs", RunFeatures(sample=demo))
    assert ("--seeds" in command) == says and (f"--seeds {seeds}" in command) == says
