"""Where the data comes from: the TpuGraphs tree a user names or keeps at the default place.

What to do when there is none (make the generated sample) is the command line's decision.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from features.digest import fingerprint
from features.npz.find import DEFAULT_DATA_DIR, collection_dir, list_npz, resolve_npz_root
from features.npz.graph import DataFormatError
from features.schema import COLLECTIONS

SAMPLE_SUBMISSION = "sample_submission.csv"


@dataclass(frozen=True)
class DataSource:
    npz_root: Path     # the directory holding tile/ and layout/
    is_sample: bool
    description: str

    def collections(self) -> list[str]:
        """The collections this data holds: those whose directory exists."""
        return [c for c in COLLECTIONS if (self.npz_root / collection_dir(c)).is_dir()]

    def train_fingerprint(self, collection: str) -> str:
        """Identity of a collection's train file set (names and sizes, not paths or mtimes,
        so a copied or moved download is the same data)."""
        files = list_npz(self.npz_root, collection, "train")
        return fingerprint(sample=self.is_sample,
                           files=[(f.name, f.stat().st_size) for f in files])

    @property
    def sample_submission(self) -> Path | None:
        """The download's sample_submission.csv: beside npz_all/ (or npz/), if present."""
        root = self.npz_root
        candidates = [root]
        if root.name == "npz":
            candidates.insert(0, root.parent)
            if root.parent.name == "npz_all":
                candidates.insert(0, root.parent.parent)
        return next((c / SAMPLE_SUBMISSION for c in candidates
                     if (c / SAMPLE_SUBMISSION).is_file()), None)


def resolve_data(data_dir: str | os.PathLike | None, *, env: dict | None = None,
                 ) -> DataSource | None:
    """--data-dir, else $TPUGRAPHS_DIR, else ~/data/tpugraphs; a named directory must exist,
    while a missing default gives None."""
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
    return None if root is None else DataSource(root, False, f"TpuGraphs data at {root}")


def sample_source(sample_root: Path) -> DataSource:
    """The generated sample (models/sample/generate.py) at sample_root, announced as such."""
    return DataSource(sample_root, True,
                      f"No TpuGraphs data found (--data-dir, $TPUGRAPHS_DIR, {DEFAULT_DATA_DIR}); "
                      f"using the generated sample at {sample_root}")
