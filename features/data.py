"""Where the data comes from: a real TpuGraphs download, or the generated sample when none exists."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .io import DEFAULT_DATA_DIR, DataFormatError, resolve_npz_root
from .sample import SampleSpec, ensure_sample


@dataclass(frozen=True)
class DataSource:
    npz_root: Path     # the directory holding tile/ and layout/
    is_sample: bool
    description: str


def resolve_data(data_dir: str | os.PathLike | None, cache_root: Path, *,
                 env: dict | None = None, spec: SampleSpec = SampleSpec()) -> DataSource:
    """--data-dir, else $TPUGRAPHS_DIR, else ~/data/tpugraphs; a named directory must exist,
    while a missing default falls back to the generated sample (made once in the cache)."""
    env = os.environ if env is None else env
    named = data_dir or env.get("TPUGRAPHS_DIR")
    if named:
        root = resolve_npz_root(named)
        if root is None:
            raise DataFormatError(
                f"{named}: no TpuGraphs tree here (looked for tile/ or layout/ in it, in npz/ "
                f"and in npz_all/npz/)")
        return DataSource(root, False, f"TpuGraphs data at {root}")
    root = resolve_npz_root(DEFAULT_DATA_DIR)
    if root is not None:
        return DataSource(root, False, f"TpuGraphs data at {root}")
    sample_root = ensure_sample(Path(cache_root) / "sample", spec)
    return DataSource(sample_root, True,
                      f"No TpuGraphs data found (--data-dir, $TPUGRAPHS_DIR, {DEFAULT_DATA_DIR}); "
                      f"using the generated sample at {sample_root}")
