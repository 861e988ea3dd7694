"""The feature signature covers exactly the row code: edits elsewhere leave it unchanged."""
from __future__ import annotations

import shutil

import pytest

from features import FeatureConfig
from features.cache import FEATURES_DIR
from features.signature import feature_signature, row_modules


@pytest.fixture
def package(tmp_path):
    """A copy of the features package to edit (named `features`, as absolute imports say)."""
    copy = tmp_path / "features"
    shutil.copytree(FEATURES_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _edit(path):
    path.write_text(path.read_text() + "\n# an edit\n")


@pytest.mark.parametrize("module", ["feature_set.py", "node_files.py", "sample.py",
                                    "synth_graph.py", "data.py", "cache.py", "__init__.py"])
def test_editing_code_outside_the_row_code_keeps_the_signature(package, module):
    before = feature_signature(FeatureConfig(), package)
    _edit(package / module)
    assert feature_signature(FeatureConfig(), package) == before


@pytest.mark.parametrize("module", ["kernels.py", "table.py", "io.py", "per_config.py",
                                    "node_rows.py"])
def test_editing_the_row_code_changes_the_signature(package, module):
    before = feature_signature(FeatureConfig(), package)
    _edit(package / module)
    assert feature_signature(FeatureConfig(), package) != before


def test_settings_change_the_signature():
    assert feature_signature(FeatureConfig()) != feature_signature(FeatureConfig(seed=1))


def test_imports_are_followed_transitively(package):
    """A module the row code starts importing (even through another module) joins the hash."""
    (package / "helper.py").write_text("SCALE = 2\n")
    (package / "per_graph.py").write_text("from . import helper\n" +
                                          (package / "per_graph.py").read_text())
    assert "helper.py" in {p.name for p in row_modules(package)}
    before = feature_signature(FeatureConfig(), package)
    _edit(package / "helper.py")
    assert feature_signature(FeatureConfig(), package) != before


def test_a_name_imported_from_the_package_init_pulls_it_in(package):
    (package / "rows.py").write_text("from . import build_entry\n" +
                                     (package / "rows.py").read_text())
    names = {p.name for p in row_modules(package)}
    assert {"__init__.py", "data.py", "cache.py"} <= names
