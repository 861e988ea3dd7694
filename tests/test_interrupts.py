"""Ctrl-C and SIGTERM (issue 41): a command stopped mid-build says so in one line, exits 130,
prints no traceback, leaves no process and nothing half-written, and a rerun resumes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import pipeline
from features.rows.compiled import NOTICE

REPO = Path(pipeline.__file__).resolve().parent

# `pipeline.py ARGS` with the worker pool used whatever the input's size (the tiny tree's files
# are far below PARALLEL_MIN_BYTES), so the signal also reaches pool workers, as a terminal's
# Ctrl-C reaches the whole process group. SIGINT handled as in a terminal's foreground job even
# when the tests run as a background job, which inherits it ignored (and `pipeline` leaves an
# ignored signal ignored): there the build could finish after its Ctrl-C.
POOLED = textwrap.dedent("""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import features.cache.build as build
    build.PARALLEL_MIN_BYTES = 0
    import pipeline
    sys.exit(pipeline.main(sys.argv[1:]))
""")


def _start_build(tiny_root: Path, cache: Path) -> subprocess.Popen:
    args = ["build-features", "--data-dir", str(tiny_root), "--cache-dir", str(cache),
            "--workers", "2"]
    return subprocess.Popen([sys.executable, "-c", POOLED, *args], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)   # its own process group, as a terminal's


def _group_gone(pgid: int, timeout: float = 20.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("signals", [
    [signal.SIGINT], [signal.SIGTERM],
    [signal.SIGTERM, signal.SIGTERM, signal.SIGINT],   # `timeout` forwarding, then a Ctrl-C
], ids=["SIGINT", "SIGTERM", "three signals"])
@pytest.mark.slow
def test_a_build_stopped_by_a_signal_says_one_line_and_leaves_nothing(signals, tiny_root,
                                                                      tmp_path):
    sig = signals[0]
    cache = tmp_path / "cache"
    proc = _start_build(tiny_root, cache)
    try:
        for line in proc.stdout:                 # the first entry done: mid-build from here
            if " graphs " in line:
                break
        assert proc.poll() is None, "the build ended before it could be interrupted"
        for i, each in enumerate(signals):       # the whole group: parent and pool workers
            if i:
                time.sleep(0.3)                  # while the first one's cleanup runs
            if proc.poll() is None:
                os.killpg(proc.pid, each)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    said = [s for s in err.strip().splitlines() if s != NOTICE]   # a cold cache's notice
    assert "Traceback" not in err and len(said) == 1, err
    assert f"interrupted ({sig.name})" in err and "a rerun builds only the rest" in err
    assert _group_gone(proc.pid), "a process of the interrupted build is still running"
    assert not [p for p in cache.rglob("*") if ".tmp-" in p.name], "temporaries were left"
    if len(signals) == 1:
        return     # the resume is checked once (a whole build): where cleanup was interrupted
    rerun = subprocess.run([sys.executable, str(REPO / "pipeline.py"), "build-features",
                            "--data-dir", str(tiny_root), "--cache-dir", str(cache),
                            "--workers", "1"], cwd=REPO, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "cached" in rerun.stdout                # the entries finished before are reused


def test_an_interrupted_train_says_its_features_resume_and_its_training_starts_over(
        trained, monkeypatch, capsys):
    """Ctrl-C while models train (KeyboardInterrupt, as the signal raises it): the line says
    what a rerun takes up (the cached features) and what it does again (every model)."""
    import models.training.runs as runs

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(runs, "train_run", stopped)
    cache, common = trained
    assert pipeline.main(["train", *common, "--collections", "tile:xla"]) == 130
    said = capsys.readouterr().err.strip().splitlines()
    assert said == ["interrupted (SIGINT): `pipeline.py train` stopped; nothing half-written "
                    "was kept; the feature files it finished are cached, so a rerun builds only "
                    "the rest; training starts over (no model of an unfinished run is kept)"]
