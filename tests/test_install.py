"""The CPU-only install (requirements-cpu.txt) lists what pyproject.toml does."""
from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")   # Python 3.11+
ROOT = Path(__file__).resolve().parents[1]


def _requirements(lines) -> set[str]:
    return {str(Requirement(line)) for line in lines}


def test_cpu_requirements_are_the_dependencies_and_test_extra_with_xgboost_cpu():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    own = Requirement(extras["test"][-1])
    assert own.name == project["name"]   # the test extra ends with the project's own extras
    wanted = [*project["dependencies"], *extras["test"][:-1],
              *(r for extra in sorted(own.extras) for r in extras[extra])]
    wanted = [r.replace("xgboost>=", "xgboost-cpu>=") for r in wanted]
    listed = [line for line in (ROOT / "requirements-cpu.txt").read_text().splitlines()
              if line and not line.startswith("#")]
    assert _requirements(listed) == _requirements(wanted)
    assert not any(Requirement(r).name == "xgboost" for r in listed)
