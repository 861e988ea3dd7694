"""Outputs that cannot be written (issue 41): every output a command or the API writes is checked
before the work starts, and fails with its path and the reason in one line, never a traceback."""
from __future__ import annotations

import errno
import tempfile

import pytest

import pipeline
from features import FeatureConfig
from features.outputs import OutputPathError, check_dir, check_file
from models.api import CostModel, TrainedRun


def _cli(capsys, *argv) -> tuple[int, str]:
    code = pipeline.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def _one_line_error(err: str, *words: str) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: cannot write ") and all(w in err for w in words), err


def test_a_file_output_refuses_a_directory_and_a_path_under_a_file(tmp_path):
    (tmp_path / "outdir").mkdir()
    (tmp_path / "plain").write_text("x")
    with pytest.raises(OutputPathError, match="it is an existing directory"):
        check_file(tmp_path / "outdir")
    with pytest.raises(OutputPathError, match=f"{tmp_path / 'plain'} is a file, not a dir"):
        check_file(tmp_path / "plain" / "sub" / "submission.csv")
    assert check_file(tmp_path / "new" / "dirs" / "submission.csv")   # made by the write


def test_a_directory_output_refuses_a_file_and_a_path_under_a_file(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(OutputPathError, match="it is an existing file, not a directory"):
        check_dir(tmp_path / "plain")
    with pytest.raises(OutputPathError, match="is a file, not a directory"):
        check_dir(tmp_path / "plain" / "cache", replaced=True)
    assert check_dir(tmp_path / "new" / "cache")


def test_an_unwritable_directory_is_named(tmp_path, monkeypatch):
    """Root writes anywhere whatever the mode bits say, so the refusal is simulated where the
    check tries a write."""
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(OutputPathError, match=f"directory {tmp_path} is not writable "
                                              f"\\(Permission denied\\)"):
        check_file(tmp_path / "submission.csv")


def test_submit_to_a_directory_fails_at_once_in_one_line(tiny_root, tmp_path, capsys):
    (tmp_path / "outdir").mkdir()
    code, err = _cli(capsys, "submit", "--data-dir", tiny_root, "--cache-dir",
                     tmp_path / "cache", "--out", tmp_path / "outdir")
    assert code == 2
    _one_line_error(err, str(tmp_path / "outdir"), "it is an existing directory")
    assert not (tmp_path / "cache" / "features").exists()    # before any work


def test_a_cache_dir_that_is_a_file_fails_at_once(tiny_root, tmp_path, capsys):
    (tmp_path / "cache").write_text("not a directory")
    code, err = _cli(capsys, "build-features", "--data-dir", tiny_root, "--cache-dir",
                     tmp_path / "cache")
    assert code == 2
    _one_line_error(err, str(tmp_path / "cache"), "not a directory")


def test_report_out_under_a_file_fails_in_one_line(tmp_path, capsys):
    (tmp_path / "plain").write_text("x")
    code, err = _cli(capsys, "report", "--run", tmp_path / "run", "--out",
                     tmp_path / "plain" / "report", "--cache-dir", tmp_path)
    assert code == 2
    _one_line_error(err, str(tmp_path / "plain"), "is a file, not a directory")


def test_encode_out_naming_a_directory_fails_in_one_line(tmp_path, capsys):
    (tmp_path / "out.npz").mkdir()
    code, err = _cli(capsys, "encode", tmp_path / "missing.hlo", "--out", tmp_path / "out.npz")
    assert code == 2
    _one_line_error(err, str(tmp_path / "out.npz"), "it is an existing directory")


def test_cost_model_save_onto_a_file_is_refused_before_writing(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "saved").write_text("mine")
    model = CostModel(TrainedRun({}, FeatureConfig(), source=str(tmp_path / "run")))
    with pytest.raises(OutputPathError, match="it is an existing file, not a directory"):
        model.save(tmp_path / "saved")
    assert (tmp_path / "saved").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "saved"]
