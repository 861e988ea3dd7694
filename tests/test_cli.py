"""The command line: typed settings checked before any work, range-checked numbers, no ignored
options, and a README whose options exist on their commands and whose command list has them all."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pipeline

README = Path(__file__).resolve().parents[1] / "README.md"
# An option of a command: never an underscore (XLA_FLAGS="--xla_dump_to=..." is not one)
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*(?![\w])")
PIP = re.compile(r"pip install[^`\n&;|]*")


def command_options() -> dict[str, set[str]]:
    """Every subcommand and its options, read from the parser itself."""
    parser = pipeline.build_parser()
    sub = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    return {name: {o for action in p._actions for o in action.option_strings
                   if o.startswith("--") and o != "--help"}
            for name, p in sub.choices.items()}


def readme_blocks(text: str) -> list[tuple[str, str]]:
    """(section heading, block) pairs: paragraphs, fenced code blocks, and each table row."""
    blocks, section, current, fenced = [], "", [], False
    for line in text.splitlines() + [""]:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and (not line.strip() or line.startswith(("#", "|"))):
            if current:
                blocks.append((section, "\n".join(current)))
                current = []
            if line.startswith("#"):
                section = line
            elif line.startswith("|"):
                blocks.append((section, line))
            continue
        current.append(line)
    return blocks


def documented_options(text: str, commands) -> tuple[dict[str, set[str]], list[str]]:
    """command -> options the README names for it, and options it names for no command.

    An option belongs to the command it follows in `pipeline.py CMD ...` or a code span
    starting with a command's name (`train --ranker`); any other option in a paragraph or
    table row belongs to every command that block names, else to those named by the nearest
    earlier block of the same section."""
    names = "|".join(re.escape(c) for c in sorted(commands, key=len, reverse=True))
    segment = re.compile(rf"pipeline\.py\s+({names})\b([^`\n&;|]*)|`({names})\b([^`]*)`")
    found = {c: set() for c in commands}
    orphans, inherited = [], {}
    for section, block in readme_blocks(text):
        block = PIP.sub(" ", block)       # an install line's options are pip's
        named = set()
        for m in segment.finditer(block):
            command, rest = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            named.add(command)
            found[command] |= set(OPTION.findall(rest))
        rest_of_block = segment.sub(" ", block)
        owners = named or inherited.get(section, set())
        if named:
            inherited[section] = named
        for option in OPTION.findall(rest_of_block):
            if not owners:
                orphans.append(option)
            for command in owners:
                found[command].add(option)
    return found, orphans


def test_readme_options_exist_on_their_commands_and_every_command_points_to_its_help():
    """The README is an overview: each option it names is one its command has, and each command
    is in its command list, which sends the reader to --help for the options (checked above
    and below: every option has help text with its default)."""
    actual = command_options()
    text = README.read_text()
    documented, orphans = documented_options(text, actual)
    documented = {c: found - {"--help"} for c, found in documented.items()}   # every command
    assert not orphans, f"README names {orphans} without saying for which command"
    for command, options in actual.items():
        assert documented[command] <= options, \
            f"README names {sorted(documented[command] - options)} for `{command}`, which " \
            f"does not have them"
    listed = text[text.index("## Commands"):].split("\n## ")[0]
    assert "--help" in listed
    for command in actual:
        assert f"| `python pipeline.py {command}` |" in listed, f"`{command}` not in the list"


def test_the_readme_check_catches_an_option_a_command_lacks():
    """The fault this guards against: `--no-pack` documented for commands without it."""
    text = "`build-features` and `bench` keep int8 copies (`--no-pack` to skip).\n"
    documented, _ = documented_options(text, ["build-features", "bench"])
    assert documented["bench"] == {"--no-pack"}
    assert "--no-pack" not in command_options()["bench"]


@pytest.mark.parametrize("argv, message", [
    (["train", "--set", "num_leaves=abc"],
     "LambdaRankParams.num_leaves must be of type int, got 'abc'"),
    (["train", "--set", "bogus=1"], "unknown LambdaRankParams setting 'bogus'; valid: "
                                    "n_estimators (int)"),
    (["train", "--ranker", "xgboost", "--set", "num_leaves=7"], "unknown XGBoostParams"),
    (["train", "--set", "num_leaves=1"], "num_leaves must be >= 2"),
    (["train", "--set", "learning_rate=nan"], "learning_rate must be of type float"),
    (["train", "--set", "seed=3"], "use --seed"),
    (["train", "--set", "gain=cubic"], "gain must be"),
    (["train", "--feature", "max_valid_configs=many"],
     "max_valid_configs must be of type int"),
    (["build-features", "--feature", "bogus=1"], "unknown FeatureConfig setting 'bogus'"),
    (["build-features", "--feature", "fastest_fraction=2"], "fastest_fraction must be in [0, 1]"),
    (["build-features", "--feature", "seed"], "expected KEY=VALUE"),
])
def test_bad_settings_fail_before_any_work(argv, message, tmp_path, capsys):
    """No data is resolved, no sample generated, nothing built before the check."""
    code = pipeline.main([*argv, "--cache-dir", str(tmp_path / "cache"),
                          "--data-dir", str(tmp_path / "absent")])
    err = capsys.readouterr()
    assert code == 2 and message in err.err
    assert "TpuGraphs data" not in err.out and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("argv", [
    ["build-features", "--workers", "0"], ["build-features", "--workers", "-3"],
    ["train", "--folds", "-1"], ["train", "--folds", "1"], ["train", "--seeds", "0"],
    ["train", "--seed", "-1"], ["bench", "--workers", "0"],
    ["submit", "--feature", "feature_set=basic"], ["bench", "--data-dir", "x"],
    ["bench", "--collections", "tile:xla"], ["bench", "--feature", "seed=1"],
    ["submit", "--collections", "tile:xla"],
])
def test_out_of_range_and_ignored_options_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        pipeline.main(argv)
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err


@pytest.mark.parametrize("command, keys", [
    ("train", ["num_leaves (int, default 31)", "learning_rate (float, default 0.1)",
               "max_depth (int, default 6)", "n_grades (int, default layout 64, tile 31)",
               "gain (str: linear|exponential, default layout 'linear', tile 'exponential')",
               "oversize (str: split|bag, default 'split')",
               "feature_set (str: basic|full, default 'full')"]),
    ("build-features", ["max_valid_configs (int, default 1000)",
                        "feature_set (str: basic|full, default 'full')"]),
])
def test_help_lists_the_valid_keys_types_allowed_values_and_defaults(command, keys, capsys):
    with pytest.raises(SystemExit):
        pipeline.main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for key in keys:
        assert key in out


def _subparsers() -> dict:
    parser = pipeline.build_parser()
    return next(a for a in parser._actions if a.choices and isinstance(a.choices, dict)).choices


def _option_help(command: str) -> dict[str, str]:
    """--option -> its help text as --help prints it (%(default)s filled in), one line."""
    p = _subparsers()[command]
    formatter = p._get_formatter()
    return {a.option_strings[0] if a.option_strings else a.dest:
            " ".join(formatter._expand_help(a).split()) if a.help else ""
            for a in p._actions if a.dest != "help"}


@pytest.mark.parametrize("command", list(pipeline.COMMANDS))
def test_every_option_has_help_with_its_default_and_allowed_values(command):
    p = _subparsers()[command]
    shown = _option_help(command)
    for action in p._actions:
        if action.dest == "help":
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        text = shown[name]
        assert text, f"{command} {name} has no help text"
        if not action.option_strings or action.nargs == 0:   # a positional or a flag
            continue
        assert "default" in text, f"{command} {name}: help does not say its default"
        if isinstance(action.default, (int, float, str, Path)) and action.default != "":
            assert str(action.default) in text, f"{command} {name}: default not shown"
        for value in action.choices or ():
            assert value in text, f"{command} {name}: allowed value {value!r} not listed"


def test_the_two_seeds_say_which_does_what():
    help_of = _option_help("train")
    assert "--feature seed=" in help_of["--seed"] and "train --seed" in help_of["--feature"]
    assert "model" in help_of["--seed"] and "rows" in help_of["--seed"]


@pytest.mark.parametrize("command", ["rank", "report"])
def test_cache_dir_of_a_reading_command_says_only_what_it_reads(command):
    text = _option_help(command)["--cache-dir"]
    assert "runs/" in text and "newest" in text
    assert not any(word in text for word in ("feature", "sample", "kept", "made"))


def test_the_train_table_has_a_legend_for_its_columns_and_their_dashes(trained_run):
    from dataclasses import replace

    from models.training.run_files import format_table
    from models.training.run_record import RunRecord

    record = RunRecord.read(trained_run)   # default seeds, no --folds
    seeds = record.seeds
    table = format_table(record)
    legend = " ".join(table[table.index("columns:"):].split())
    for column in ("scored / unscrd =", "mean, min, max =", "seed sd =", "random =", "cv =",
                   "sec ="):
        assert column in legend
    assert f"seed sd = spread of the per-seed means (sample sd (n - 1) over the {seeds} models " \
        f"of --seeds {seeds})" in legend
    assert "cv = held-out-family mean ('-': no cross-validation, --folds K for one)" in legend
    rows = [line.split() for line in table.splitlines() if line.startswith(
        tuple(record.collections))]
    assert [row[-2] for row in rows] == ["-"] * len(record.collections)   # the cv column
    sds = [f"{np.std(m['seed_means'], ddof=1):.3f}" for m in record.metrics.values()]
    assert [row[-4] for row in rows] == sds   # seed sd
    record = replace(record, train_config={**record.train_config, "seeds": 1, "folds": 5})
    legend = " ".join(format_table(record).split())
    assert "(0.000: one model, --seeds 1)" in legend and "over --folds 5" in legend


NOT_LOADED = textwrap.dedent("""
    import sys
    import pipeline
    code = pipeline.main(sys.argv[1:])
    loaded = lambda *names: sorted(m for m in sys.modules if m.split(".")[0] in names)
    print(code, loaded("dask", "distributed"), loaded("lightgbm", "xgboost"))
""")


@pytest.mark.slow
def test_a_build_imports_neither_dask_without_a_scheduler_nor_the_rankers(tiny_root, tmp_path):
    """The dask extra is optional: a build without --scheduler must not even import it; nor
    LightGBM and XGBoost, seconds of start-up a build has no use for."""
    out = subprocess.run([sys.executable, "-c", NOT_LOADED, "build-features", "--data-dir",
                          str(tiny_root), "--cache-dir", str(tmp_path), "--collections",
                          "tile:xla", "--splits", "valid", "--workers", "1"],
                         capture_output=True, text=True, timeout=300,
                         cwd=Path(pipeline.__file__).parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0 [] []"
