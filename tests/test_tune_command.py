"""`pipeline.py tune` end to end on the generated sample: a measure command that counts what it
measures, a run killed midway and resumed, bad commands, an HLO program."""
from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

import pipeline
from features.hlo import read_hlo
from features.npz.find import list_npz
from models.api import CostModel
from models.tuning.database import LOG, MeasurementLog
from models.tuning.job import TuneJob, tune_program
from models.tuning.runner import MeasureCommandError, run_command
from models.tuning.tuner import CAUSES, TuneSettings

ROOT = Path(__file__).resolve().parents[1]
HLO = ROOT / "tests" / "data" / "hlo" / "jax_conv_dot.hlo"

# Runtimes a known function of the config (each set group 1% slower, the first few nodes' output
# groups faster when set), noise drawn from the config's bytes: measuring a config again gives
# the same number. Every measured config is appended to $CALLS (one line each) once the runtimes
# are printed; with $HANG_AT, the batch after that many is never answered: the script writes
# the file $HANG_MARKER and sleeps (the run is killed while measuring), or, with $GO, waits until
# the file $GO exists.
MEASURE = r'''
import hashlib, os, sys, time
import numpy as np
configs = np.load(sys.argv[-1])
calls = os.environ["CALLS"]
batches = calls + ".batches"
done = open(batches).read().count("\n") if os.path.exists(batches) else 0
hang = os.environ.get("HANG_AT")
if hang and done >= int(hang):
    open(os.environ["HANG_MARKER"], "w").write("measuring")
    go = os.environ.get("GO")
    for _ in range(6000):
        if go and os.path.exists(go):
            break
        time.sleep(0.1)
set_groups = (configs.reshape(len(configs), -1, 3, 6)[..., 0] >= 0)
log_t = 0.01 * set_groups.sum(axis=(1, 2)) - 0.05 * set_groups[:, :4, 0].sum(axis=1)
keys = [hashlib.blake2b(c.tobytes(), digest_size=8).hexdigest() for c in configs]
noise = [int(k[:8], 16) / 2**32 - 0.5 for k in keys]
for t, e in zip(log_t, noise):
    print(1000.0 * np.exp(t + 0.01 * e))
with open(calls, "a") as f:
    f.writelines(k + "\n" for k in keys)
with open(batches, "a") as f:
    f.write("batch\n")
'''


@pytest.fixture(scope="module")
def measure_script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("measure") / "measure.py"
    path.write_text(MEASURE)
    return path


@pytest.fixture(scope="module")
def program(tiny_npz) -> Path:
    return list_npz(tiny_npz, "layout:xla:default", "valid")[0]


def _tune(run, program, command, out, budget=30, env=None, popen=False, extra=()):
    args = ["tune", str(program), "--measure", command, "--budget", str(budget), "--out",
            str(out), "--run", str(run), "--cache-dir", str(out.parent / "cache"),
            "--model-seeds", "1", *extra]
    if popen:   # its own session: the kill takes the measure command with it
        return subprocess.Popen([sys.executable, str(ROOT / "pipeline.py"), *args],
                                env={**os.environ, **(env or {})}, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    # The rest in this process (no start-up of seconds): what the command prints and returns;
    # the measure command inherits the environment given.
    printed, said = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env or {}), redirect_stdout(printed), \
            redirect_stderr(said):
        code = pipeline.main(args)
    return subprocess.CompletedProcess(args, code, printed.getvalue(), said.getvalue())


def _calls(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _command(script: Path) -> str:
    return f"{sys.executable} {script}"


@pytest.mark.slow
def test_a_killed_run_resumes_without_measuring_anything_twice(trained_run, program,
                                                               measure_script, tmp_path):
    whole = _tune(trained_run, program, _command(measure_script), tmp_path / "whole",
                  env={"CALLS": str(tmp_path / "whole.calls")})
    assert whole.returncode == 0, whole.stderr
    expected = _calls(tmp_path / "whole.calls")
    assert len(expected) == 30

    out, calls, marker = tmp_path / "cut", tmp_path / "cut.calls", tmp_path / "hanging"
    proc = _tune(trained_run, program, _command(measure_script), out, popen=True,
                 env={"CALLS": str(calls), "HANG_AT": "3", "HANG_MARKER": str(marker)})
    _wait_for(marker, proc)
    os.killpg(proc.pid, signal.SIGKILL)     # mid-batch: the fourth batch never answered
    proc.wait()
    before = _calls(calls)
    assert len(before) == 1 + 2 * TuneSettings.batch      # the default, then two batches
    assert not (out / "best.json").exists()

    resumed = _tune(trained_run, program, _command(measure_script), out,
                    env={"CALLS": str(calls)})
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} measurements to replay" in resumed.stdout
    after = _calls(calls)
    # the command measured exactly what the uninterrupted run measured, each once, in order
    assert after == expected
    assert json.loads((out / "best.json").read_text())["best"] == \
        json.loads((tmp_path / "whole" / "best.json").read_text())["best"]

    again = _tune(trained_run, program, _command(measure_script), out,
                  env={"CALLS": str(calls)})
    assert again.returncode == 0 and _calls(calls) == expected    # finished: all replayed


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.time() + 300
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert path.exists(), proc.communicate()


@pytest.mark.slow
def test_a_second_tune_into_the_same_out_is_refused_while_the_first_runs(
        trained_run, program, measure_script, tmp_path):
    """Two tunes into one --out at once (the first in a thread of this process, as `tune` runs
    it; a lock is the same between two processes): the second is refused in one line before it
    loads a model or touches the state; the first measures on to the end, and a rerun resumes
    from all it measured."""
    out, calls, marker, go = (tmp_path / "out", tmp_path / "calls", tmp_path / "measuring",
                              tmp_path / "go")
    # the first's command pauses in its second batch until the file `go` exists
    pausing = (f"CALLS={calls} HANG_AT=1 HANG_MARKER={marker} GO={go} "
               f"{_command(measure_script)}")
    job = TuneJob(program, pausing, 12, out)
    model = CostModel.load(trained_run, seeds=1)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(tune_program, model, job, str(trained_run), log=lambda line: None)
        try:
            while not marker.exists() and not first.done():
                time.sleep(0.05)
            assert marker.exists(), first.result()
            log = (out / "state" / LOG).read_bytes()
            second = _tune(trained_run, program, _command(measure_script), out, budget=12,
                           env={"CALLS": str(tmp_path / "second.calls")})
        finally:
            go.touch()                  # the first measures on
        assert second.returncode == 2 and second.stdout == ""
        assert second.stderr.splitlines() == [
            f"error: {out}: another tune is running in this directory (process {os.getpid()}); "
            f"wait for it to end or tune into another --out directory"], second.stderr
        assert not (tmp_path / "second.calls").exists()
        assert (out / "state" / LOG).read_bytes() == log
        first.result(timeout=300)
    measured = _calls(calls)
    assert len(measured) == 12 and (out / "best.json").exists()

    rerun = _tune(trained_run, program, pausing, out, budget=12)   # the command it began with
    assert rerun.returncode == 0, rerun.stderr
    assert "12 measurements to replay" in rerun.stdout
    assert _calls(calls) == measured     # all of it replayed from the state, nothing again


@pytest.mark.slow
def test_the_outputs_say_what_was_found_and_how(trained_run, program, measure_script,
                                                tmp_path):
    out = tmp_path / "out"
    done = _tune(trained_run, program, _command(measure_script), out, budget=20,
                 env={"CALLS": str(tmp_path / "calls")})
    assert done.returncode == 0, done.stderr
    assert "best so far" in done.stderr and "20/20 measured" in done.stderr
    assert "--feature reference=drawn" in done.stdout   # a file-reference run: the note
    with np.load(program) as z:
        nc = z["node_config_ids"].size
    best = np.load(out / "best.npy")
    assert best.shape == (nc, 18) and best.dtype == np.int8
    record = json.loads((out / "best.json").read_text())
    assert record["made_by"]["seed"] == 0 and record["made_by"]["run"] == str(trained_run)
    assert record["made_by"]["settings"]["batch"] == TuneSettings.batch
    assert record["measurements"] == 20
    evidence = record["evidence"]     # the best other config against the default
    returned = record["best"] != [[-1] * 18] * nc
    assert evidence is None or (set(evidence) == {"speedup", "z", "needed"}
                                and (evidence["z"] > evidence["needed"]) == returned)
    kept = record["kept_default"]     # why the default was kept, when it was
    assert (kept is None) == returned
    assert kept is None or (kept["cause"] in CAUSES and kept["picks"] > 0 and (
        kept["cause"] == "unconfirmed") == (evidence is not None or kept["measured_faster"] > 0))
    assert np.array_equal(np.array(record["best"], np.int8), best)
    assert record["best_runtime"] <= record["default_runtime"]
    assert (out / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    configs, runtimes = MeasurementLog(out / "state" / LOG, nc).read()
    assert len(runtimes) == 20 and (configs[0] == -1).all()
    assert any((c == best).all() for c in configs)


@pytest.mark.slow
def test_the_random_strategy_is_chosen_on_the_command_line_and_recorded(
        trained_run, program, measure_script, tmp_path):
    """--strategy random searches within the budget and says so in best.json; a rerun into the
    same state with the evolutionary one is refused (its measurements are another search's)."""
    out, env = tmp_path / "out", {"CALLS": str(tmp_path / "calls")}
    done = _tune(trained_run, program, _command(measure_script), out, budget=15, env=env,
                 extra=["--strategy", "random"])
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "best.json").read_text())
    assert record["made_by"]["settings"]["strategy"] == "random"
    assert record["measurements"] <= 15
    again = _tune(trained_run, program, _command(measure_script), out, budget=15, env=env)
    assert again.returncode == 2 and "settings" in again.stderr


@pytest.mark.slow
def test_a_state_from_before_a_setting_existed_resumes_with_its_default(
        trained_run, program, measure_script, tmp_path):
    """A state started before TuneSettings.strategy existed ran the evolutionary search, the
    default: it resumes; a rerun with the random strategy is refused naming the setting."""
    from models.tuning.database import SESSION, STATE
    out, env = tmp_path / "out", {"CALLS": str(tmp_path / "calls")}
    assert _tune(trained_run, program, _command(measure_script), out, budget=10,
                 env=env).returncode == 0
    session = out / STATE / SESSION
    identity = json.loads(session.read_text())
    del identity["settings"]["strategy"]
    session.write_text(json.dumps(identity))
    again = _tune(trained_run, program, _command(measure_script), out, budget=10, env=env)
    assert again.returncode == 0 and "resuming from" in again.stdout, again.stderr
    other = _tune(trained_run, program, _command(measure_script), out, budget=10, env=env,
                  extra=["--strategy", "random"])
    assert other.returncode == 2 and "settings.strategy = 'evolutionary'" in other.stderr


@pytest.mark.slow
def test_a_bad_measure_command_is_one_clear_line(trained_run, program, measure_script,
                                                 tmp_path):
    """The first measurement (the default) goes through; then the command fails the first
    batch after it: one line naming the command and what was wrong, the good measurement
    kept, and the command, fixed in place, resumes from it."""
    bad, once = tmp_path / "bad.py", tmp_path / "once"
    bad.write_text(f"import os, sys\n"
                   f"if os.path.exists({str(once)!r}):\n    sys.exit(3)\n"
                   f"open({str(once)!r}, 'w').close()\nprint(5.0)\n")
    out = tmp_path / "out"
    failed = _tune(trained_run, program, _command(bad), out)
    assert failed.returncode == 2
    lines = failed.stderr.strip().splitlines()
    error = [s for s in lines if s.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in failed.stderr, failed.stderr
    assert str(bad) in error[0] and "exited with status 3" in error[0]
    assert "measurements made before it: 1" in error[0]
    bad.write_text(measure_script.read_text())          # the same command, now measuring
    resumed = _tune(trained_run, program, _command(bad), out,
                    env={"CALLS": str(tmp_path / "calls")})
    assert resumed.returncode == 0, resumed.stderr
    assert "1 measurements to replay" in resumed.stdout
    assert len(_calls(tmp_path / "calls")) == 29


@pytest.mark.parametrize("answer, says", [
    ("print(1.0, 2.0, sep=chr(10))", "printed 2 runtime lines for 8 configs"),
    ("print(*['fast'] * 8, sep=chr(10))", "line 1 is not a number: 'fast'"),
    ("print(*[1.0] * 7, -2.0, sep=chr(10))", "line 8 is not a positive runtime: '-2.0'"),
    ("print(*[1.0] * 7, 'nan', sep=chr(10))", "line 8 is not a positive runtime: 'nan'"),
    ("import sys; sys.exit(3)", "exited with status 3"),
])
def test_what_a_measure_command_printed_wrong_is_named(tmp_path, answer, says):
    """The command's answer is read as tune reads it (the test above shows the error reaching
    the user as one line)."""
    script = tmp_path / "answer.py"
    script.write_text(answer + "\n")
    with pytest.raises(MeasureCommandError, match=re.escape(says)) as caught:
        run_command(_command(script), np.full((8, 3, 18), -1, np.int8), tmp_path)
    assert str(script) in str(caught.value)


def test_an_hlo_program_is_tuned(trained_run, measure_script, tmp_path):
    out = tmp_path / "hlo"
    done = _tune(trained_run, HLO, _command(measure_script), out, budget=12,
                 env={"CALLS": str(tmp_path / "calls")})
    assert done.returncode == 0, done.stderr
    nc = read_hlo(HLO)["node_config_ids"].size
    assert np.load(out / "best.npy").shape == (nc, 18)
    assert len(_calls(tmp_path / "calls")) == 12


@pytest.mark.slow
def test_a_rerun_with_other_settings_is_refused(trained_run, program, measure_script, tmp_path):
    out = tmp_path / "out"
    env = {"CALLS": str(tmp_path / "calls")}
    assert _tune(trained_run, program, _command(measure_script), out, budget=10,
                 env=env).returncode == 0
    other = _tune(trained_run, program, _command(measure_script), out, budget=12, env=env)
    assert other.returncode == 2
    assert "was started with budget = 10, not 12" in other.stderr


README = ROOT / "README.md"


def _readme_tune_line() -> str:
    return next(line for line in README.read_text().splitlines()
                if line.startswith("python pipeline.py tune data_cache/sample/"))


def test_the_readme_tune_example_runs_with_the_toy_measure(trained_run, program, tmp_path,
                                                          monkeypatch):
    """The README's `tune` line: its program is a file the quick start's sample holds, and its
    measure command (the toy stand-in for hardware) runs as written, here on the tiny sample."""
    from features.npz.find import collection_dir
    from models.sample.generate import _name
    words = shlex.split(_readme_tune_line())
    file = Path(words[3])
    xla_valid = collection_dir("layout:xla:default")
    assert file == Path("data_cache/sample/npz_all/npz") / xla_valid / "valid" / \
        f"{_name(None, 'xla', 'valid', 0)}.npz"
    command = words[words.index("--measure") + 1]
    assert command.startswith("python ")
    monkeypatch.chdir(ROOT)       # the script's path in the README is relative to the clone
    out = tmp_path / "tuned"
    done = _tune(trained_run, program, sys.executable + command[len("python"):], out, budget=12)
    assert done.returncode == 0, done.stderr
    best = json.loads((out / "best.json").read_text())
    assert best["measurements"] == 12 and "toy_measure" in best["made_by"]["measure"]
    # its notice that it is not hardware reaches the user, once, not once a batch
    assert done.stderr.count("not a TPU") == 1, done.stderr


def test_the_toy_measure_says_it_is_not_hardware_and_prints_one_runtime_a_config(tmp_path):
    configs = np.full((3, 4, 18), -1, np.int8)
    configs[1, 0, :2] = [1, 0]
    np.save(tmp_path / "c.npy", configs)
    done = subprocess.run([sys.executable, str(ROOT / "models/tuning/toy_measure.py"),
                           str(tmp_path / "c.npy")], capture_output=True, text=True)
    assert done.returncode == 0 and "not a TPU" in done.stderr
    runtimes = [float(line) for line in done.stdout.split()]
    assert len(runtimes) == 3 and runtimes[0] == runtimes[2] == 1.0 and runtimes[1] != 1.0


@pytest.mark.slow
def test_a_rerun_with_another_measure_command_is_refused_naming_both(
        trained_run, program, measure_script, tmp_path):
    """The state knows what measured it: another command is refused in one line naming both;
    --restart starts a new state with it; the same command resumes."""
    out, first, other = tmp_path / "out", _command(measure_script), \
        f"{_command(measure_script)} --on-other-hardware"
    env = {"CALLS": str(tmp_path / "calls")}
    assert _tune(trained_run, program, first, out, budget=10, env=env).returncode == 0
    refused = _tune(trained_run, program, other, out, budget=10,
                    env={"CALLS": str(tmp_path / "other.calls")})
    assert refused.returncode == 2 and not (tmp_path / "other.calls").exists()
    line, = [s for s in refused.stderr.splitlines() if s.startswith("error:")]
    assert f"measure = {first!r}, not {other!r}" in line and "--restart" in line
    restarted = _tune(trained_run, program, other, out, budget=10, extra=["--restart"],
                      env={"CALLS": str(tmp_path / "other.calls")})
    assert restarted.returncode == 0, restarted.stderr
    assert "resuming" not in restarted.stdout and len(_calls(tmp_path / "other.calls")) == 10
    assert json.loads((out / "state" / "session.json").read_text())["measure"] == other
    resumed = _tune(trained_run, program, other, out, budget=10,
                    env={"CALLS": str(tmp_path / "other.calls")})
    assert resumed.returncode == 0 and "10 measurements to replay" in resumed.stdout
    assert len(_calls(tmp_path / "other.calls")) == 10          # nothing measured again


def test_a_failed_start_leaves_no_lock_or_state(trained_run, program, tmp_path):
    """A program that does not parse, or a command failing on its first measurement: one line,
    and --out holds nothing a rerun would trip on (no state/lock, no empty session)."""
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0\n}\n")
    out = tmp_path / "out"
    failed = _tune(trained_run, bad, "true", out)
    assert failed.returncode == 2 and str(bad) in failed.stderr
    assert not (out / "state").exists()
    failing = tmp_path / "fail.py"
    failing.write_text("import sys; sys.exit(4)\n")
    failed = _tune(trained_run, program, _command(failing), out)
    assert failed.returncode == 2 and "exited with status 4" in failed.stderr
    assert "measurements made before it: 0" in failed.stderr and "kept in" not in failed.stderr
    assert not (out / "state").exists()


def test_a_kept_default_is_said_with_what_was_found_and_how_sure():
    from models.tuning.job import kept_default_line
    from models.tuning.tuner import Evidence, Verdict
    e = Evidence(speedup=1.0138, z=0.97, needed=1.96)
    line = kept_default_line(Verdict("unconfirmed", 90, 40, 3), e)
    assert line.startswith("kept the compiler default") and "1.014x faster" in line
    assert "1.0 standard errors" in line and "2.0 were needed" in line
    line = kept_default_line(Verdict("unconfirmed", 90, 40, 2), None)
    assert "2 of the 90 configs it chose measured faster once and not when measured" in line
    line = kept_default_line(Verdict("mispredicted", 90, 37, 0), None)
    assert "expected 37 of the 90 configs it chose to beat it" in line
    assert "misjudges this program" in line
    line = kept_default_line(Verdict("none predicted", 90, 0, 0), None)
    assert "expected none of the 90 configs" in line


@pytest.mark.parametrize("content", [b"PK\x03\x04not a zip", b"not an npz at all\n"])
def test_a_damaged_npz_program_is_refused_naming_it(content, tmp_path):
    from models.tuning.job import load_program
    path = tmp_path / "program.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"{path}: unreadable npz"):
        load_program(path)
    np.savez(path, node_feat=np.zeros((2, 140)))
    with pytest.raises(ValueError, match=f"{path}: missing key\\(s\\) \\['node_opcode'"):
        load_program(path)
