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


def test_versions_are_read_from_the_package_under_either_distribution_name():
    """xgboost-cpu installs the package `xgboost`, which importlib.metadata.version('xgboost')
    does not find: versions come from the imported package, the one way every record uses."""
    import xgboost

    from features.cache.store import versions
    from features.versions import library_versions
    from models.bench.stages import LIBRARIES, conditions

    assert library_versions("xgboost")["xgboost"] == xgboost.__version__
    recorded = conditions().versions
    assert recorded == library_versions(*LIBRARIES) and recorded["xgboost"] == xgboost.__version__
    assert versions() == library_versions("numpy", "numba", "polars")


def test_the_ci_installs_the_way_the_readme_quick_start_does():
    """CI runs the suite under the install the README recommends for a CPU machine."""
    import re

    ci = (ROOT / ".ci" / "run").read_text()
    quick_start = re.search(r"## Quick start\n\n```bash\n(.*?)```", (ROOT / "README.md")
                            .read_text(), re.S).group(1)
    installs = [re.sub(r"^python -m | --quiet| --disable-pip-version-check", "", line)
                for line in ci.splitlines() if line.startswith("python -m pip install")]
    assert installs == ["pip install -r requirements-cpu.txt", "pip install --no-deps -e ."]
    assert all(command in quick_start for command in installs)
