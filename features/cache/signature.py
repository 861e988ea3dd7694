"""The feature signature: a hash of the settings and of exactly the code that computes rows.

The row code is `rows/table.py` (one input file -> its rows), `rows/node_rows.py` (the node
learner's rows, made beside them) and every module of `features/` they import, directly or not,
read with `ast` so nothing is executed. The cache machinery, the HLO reader, the sample generator
and the benchmark are outside it: editing them leaves feature caches and trained runs valid,
while an edit to a kernel invalidates both.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import asdict
from pathlib import Path

from features.cache.store import FEATURES_DIR, SCHEMA, fingerprint

ROW_CODE_ROOTS = ("rows/table.py", "rows/node_rows.py")
# Row code only a fixed reference reads (FeatureConfig.reference "drawn": the layouts drawn from
# a graph's space): the tuner's moves live there, and editing them leaves file-reference rows as
# they were
DRAWN_REFERENCE_CODE = ("graph/layout_space.py",)


def feature_signature(cfg, pkg_dir: Path = FEATURES_DIR) -> str:
    """Hash of the row code and settings: models trained on one signature only fit it."""
    return fingerprint(schema=SCHEMA, code=row_code_digest(pkg_dir, cfg.reference != "file"),
                       settings=asdict(cfg))


def row_code_digest(pkg_dir: Path = FEATURES_DIR, drawn: bool = True) -> str:
    """sha256 over the row code's modules, by path relative to the package and content; without
    DRAWN_REFERENCE_CODE (and what only it imports) unless `drawn`."""
    return code_digest(row_modules(pkg_dir, drawn), pkg_dir)


def code_digest(modules: set[Path], pkg_dir: Path) -> str:
    """sha256 over modules of a package, by path relative to it and content."""
    pkg_dir = Path(pkg_dir).resolve()
    h = hashlib.sha256()
    for f in sorted(modules):
        h.update(f.relative_to(pkg_dir).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def row_modules(pkg_dir: Path = FEATURES_DIR, drawn: bool = True) -> set[Path]:
    """ROW_CODE_ROOTS and every module of the package they import, transitively (not following
    DRAWN_REFERENCE_CODE unless `drawn`)."""
    skip = () if drawn else [Path(pkg_dir) / m for m in DRAWN_REFERENCE_CODE]
    return imported_modules([Path(pkg_dir) / root for root in ROW_CODE_ROOTS], pkg_dir, skip)


def imported_modules(roots: list[Path], pkg_dir: Path, skip=()) -> set[Path]:
    """The root modules and every module of the package `pkg_dir` they import, transitively,
    read with `ast` (nothing runs), except the modules in `skip`. The package's __init__ counts
    only where a name is imported from it (`from . import x` with x defined there), not merely
    because importing a submodule runs it."""
    pkg_dir = Path(pkg_dir).resolve()
    seen, todo = {Path(m).resolve() for m in skip}, [Path(r).resolve() for r in roots]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += _imported(module, pkg_dir)
    return seen - {Path(m).resolve() for m in skip}


def _imported(module: Path, pkg_dir: Path) -> list[Path]:
    out = []
    for node in ast.walk(ast.parse(module.read_text(), filename=str(module))):
        if isinstance(node, ast.ImportFrom):
            base = _import_base(node, module, pkg_dir)
            if base is None:
                continue
            names = [_module_file(base / a.name, pkg_dir) for a in node.names]
            out += [m for m in names if m]
            if not all(names):
                out.append(_module_file(base, pkg_dir))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == pkg_dir.name:
                    out.append(_module_file(pkg_dir.parent.joinpath(*parts), pkg_dir))
    return [m for m in out if m]


def _import_base(node: ast.ImportFrom, module: Path, pkg_dir: Path) -> Path | None:
    """The path (package dir or module without .py) an ImportFrom reads from, if ours."""
    parts = node.module.split(".") if node.module else []
    if node.level:
        base = module.parent
        for _ in range(node.level - 1):
            base = base.parent
        return base.joinpath(*parts)
    if parts and parts[0] == pkg_dir.name:
        return pkg_dir.parent.joinpath(*parts)
    return None


def _module_file(path: Path, pkg_dir: Path) -> Path | None:
    """path/__init__.py or path.py when it exists inside the package, else None."""
    for candidate in (path / "__init__.py", path.with_name(path.name + ".py")):
        if candidate.is_file() and candidate.resolve().is_relative_to(pkg_dir):
            return candidate.resolve()
    return None
