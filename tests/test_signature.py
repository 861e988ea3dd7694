"""The feature signature covers exactly the row code: edits elsewhere leave it unchanged."""
from __future__ import annotations

import shutil

import pytest

from features import FeatureConfig
from features.cache.store import FEATURES_DIR
from features.cache.signature import feature_signature, row_modules
from models.training.runs import MODELS_DIR, run_code_digest


@pytest.fixture
def package(tmp_path):
    """A copy of the features package to edit (named `features`, as absolute imports say)."""
    copy = tmp_path / "features"
    shutil.copytree(FEATURES_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _edit(path):
    path.write_text(path.read_text() + "\n# an edit\n")


@pytest.mark.parametrize("module", ["rows/feature_set.py", "cache/entries.py",
                                    "npz/data_source.py", "cache/store.py", "cache/build.py",
                                    "__init__.py"])
def test_editing_code_outside_the_row_code_keeps_the_signature(package, module):
    before = feature_signature(FeatureConfig(), package)
    _edit(package / module)
    assert feature_signature(FeatureConfig(), package) == before


@pytest.mark.parametrize("module", ["rows/row_kernels.py", "rows/table.py", "npz/read.py",
                                    "rows/per_config.py", "rows/node_rows.py", "schema.py"])
def test_editing_the_row_code_changes_the_signature(package, module):
    before = feature_signature(FeatureConfig(), package)
    _edit(package / module)
    assert feature_signature(FeatureConfig(), package) != before


def test_the_search_space_code_is_only_a_drawn_reference_runs_row_code(package):
    """The layouts a drawn reference is made of come from the tuner's layout space: editing it
    changes a drawn-reference run's rows, never a file-reference run's."""
    file_run, drawn_run = FeatureConfig(), FeatureConfig(reference="drawn")
    before = feature_signature(file_run, package), feature_signature(drawn_run, package)
    _edit(package / "graph" / "layout_space.py")
    assert feature_signature(file_run, package) == before[0]
    assert feature_signature(drawn_run, package) != before[1]


def test_settings_change_the_signature():
    assert feature_signature(FeatureConfig()) != feature_signature(FeatureConfig(seed=1))


def test_imports_are_followed_transitively(package):
    """A module the row code starts importing (even through another module) joins the hash."""
    (package / "helper.py").write_text("SCALE = 2\n")
    per_graph = package / "graph" / "per_graph.py"
    per_graph.write_text("from features import helper\n" + per_graph.read_text())
    assert "helper.py" in {p.name for p in row_modules(package)}
    before = feature_signature(FeatureConfig(), package)
    _edit(package / "helper.py")
    assert feature_signature(FeatureConfig(), package) != before


def test_a_name_imported_from_the_package_init_pulls_it_in(package):
    row_selection = package / "rows" / "row_selection.py"
    row_selection.write_text("from features import build_entry\n" + row_selection.read_text())
    names = {p.relative_to(package).as_posix() for p in row_modules(package)}
    assert {"__init__.py", "npz/data_source.py", "cache/store.py"} <= names


@pytest.fixture
def models_package(tmp_path):
    """A copy of the models package to edit."""
    copy = tmp_path / "models"
    shutil.copytree(MODELS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize("module", ["metrics.py", "training/lgbm.py", "training/family_split.py",
                                    "overrides.py"])
def test_editing_the_code_that_makes_a_run_changes_the_run_key(models_package, module):
    """The early-stopping metric (metrics.py) and what train imports make a run."""
    before = run_code_digest(models_package)
    _edit(models_package / module)
    assert run_code_digest(models_package) != before


@pytest.mark.parametrize("module", ["reporting/report.py", "serving/submission.py",
                                    "api/cost_model.py", "bench/run.py"])
def test_editing_code_that_reads_runs_keeps_the_run_key(models_package, module):
    before = run_code_digest(models_package)
    _edit(models_package / module)
    assert run_code_digest(models_package) == before
