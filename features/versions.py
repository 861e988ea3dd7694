"""Library versions, recorded one way wherever they are recorded (feature cache keys, run.json,
bench conditions)."""
from __future__ import annotations

import importlib
import platform


def library_versions(*names: str) -> dict[str, str]:
    """name -> version of each library, read from the imported package's `__version__`, and
    python's. Not importlib.metadata: that asks for a distribution, and xgboost-cpu (the CPU
    install) installs the package `xgboost` under another distribution name."""
    found = {name: str(importlib.import_module(name).__version__) for name in names}
    return {**found, "python": platform.python_version()}
