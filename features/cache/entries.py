"""Reading a feature cache entry: its parquet parts (table.write_part) back into one FeatureSet.

Kept apart from the row code (table.py and what it imports, hashed into the feature
signature), so how entries are read can change without discarding cached features. Every
part is checked against the size and checksum meta.json recorded (features/cache/integrity.py)
before it is read: a damaged entry is never read as data.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl

from features.cache import integrity
from features.cache.store import DamagedCacheError
from features.rows.feature_set import FeatureSet
from features.rows.node_rows import NodeRows

# A part's node rows (NODE_ROW_COLLECTIONS) sit beside its parquet file: part-00000.nodes.npz
NODES_SUFFIX = ".nodes.npz"


# Rows converted from a part's frame into X at a time: converting a whole part at once held a
# third copy of it (loading a 155 MB tile valid part peaked 468 MB over the process; 380 MB
# in slices of this many rows). polars lays the slice out row by row itself (order="c"):
# numpy copying polars' column-major slice into X took twice as long (0.80 against 0.37 s
# for the 385,457 x 347 dev tile train rows).
ROWS_PER_COPY = 65_536
# Each row's target and bookkeeping, beside its feature columns
PER_ROW = {"runtime": np.float64, "config_idx": np.int64, "dup_count": np.int32}


def read_meta(entry: Path) -> dict:
    """An entry's meta.json; DamagedCacheError if it cannot be read."""
    path = Path(entry) / "meta.json"
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedCacheError(path, f"damaged cache file (unreadable: {exc})",
                                _rebuild_command(entry, {})) from None


def check_entry(entry: Path, meta: dict | None = None) -> list[Path]:
    """The entry's parquet parts, in order, once every file meta.json records is checked."""
    meta = read_meta(entry) if meta is None else meta
    sums = meta.get("sums")
    if not isinstance(sums, dict):
        raise DamagedCacheError(Path(entry) / "meta.json", "no checksums recorded (written "
                                "by an older version)", _rebuild_command(entry, meta))
    for name, record in sums.items():
        integrity.verify(Path(entry) / name, record, _rebuild_command(entry, meta))
    return sorted(Path(entry) / name for name in sums if name.endswith(".parquet"))


def _rebuild_command(entry: Path, meta: dict) -> str:
    """What builds a damaged entry again (build_entry checks what it finds in the cache)."""
    which = (f" --collections {meta['collection']} --splits {meta['split']}"
             if "collection" in meta and "split" in meta else "")
    return (f"build it again with: python pipeline.py build-features --cache-dir "
            f"{Path(entry).parent.parent}{which}")


def default_config_rows(entry: Path) -> np.ndarray:
    """(n_rows,) bool: Rows.is_default of an entry's rows, in their order."""
    return np.concatenate([pl.read_parquet(p, columns=["is_default"])["is_default"].to_numpy()
                           for p in check_entry(entry)] or [np.zeros(0, bool)])


def node_arrays(nodes: NodeRows | None, prefix: str = "node_") -> dict[str, np.ndarray]:
    """A graph's node rows as plain arrays under prefixed names (none when it has none)."""
    return {} if nodes is None else {prefix + k: v for k, v in nodes._asdict().items()}


def read_nodes(z, prefix: str = "node_") -> NodeRows | None:
    """node_arrays read back from an open npz."""
    if prefix + NodeRows._fields[0] not in z:
        return None
    return NodeRows(*(z[prefix + k] for k in NodeRows._fields))


def _part_nodes(part: Path, n_graphs: int) -> list[NodeRows | None]:
    """The node rows of a part's graphs, from the file beside it (None each when it has none)."""
    path = part.with_suffix(NODES_SUFFIX)
    if not path.exists():
        return [None] * n_graphs
    with np.load(path, allow_pickle=False) as z:
        return [read_nodes(z, f"{i}.") for i in range(n_graphs)]


def copy_rows(frame: pl.DataFrame, columns: list[str], out: np.ndarray) -> None:
    """frame's `columns` into out, (frame.height, len(columns)) float32, ROWS_PER_COPY rows at
    a time."""
    for i in range(0, frame.height if columns else 0, ROWS_PER_COPY):
        rows = frame.slice(i, ROWS_PER_COPY)
        out[i:i + rows.height] = rows.select(columns).to_numpy(order="c")


def part_rows(part: Path, columns: list[str]) -> np.ndarray:
    """One part's rows of `columns`, (rows, columns) float32 in C order."""
    frame = pl.read_parquet(part, columns=list(columns))
    out = np.empty((frame.height, len(columns)), np.float32)
    copy_rows(frame, list(columns), out)
    return out


def entry_parts(entry: Path) -> list[tuple[Path, int]]:
    """The entry's checked parquet parts, in order, with the rows of each."""
    return [(p, sum(json.loads(p.with_suffix(".json").read_text())["sizes"]))
            for p in check_entry(entry)]


def read_parts(entry: Path, collection: str, columns: list[str], meta: dict) -> FeatureSet:
    """An entry's rows. X is filled part by part, a part in slices of rows: one frame of the
    whole entry beside X doubled the peak. A 510 MB dev tile X loaded into a 285 MB process
    left 1,369 MB resident as one frame, 1,136 MB part by part, and 664 MB once polars also
    returned the pages it freed (features/__init__.py)."""
    parts = check_entry(entry, meta)
    infos = [json.loads(p.with_suffix(".json").read_text()) for p in parts]
    sizes = [s for info in infos for s in info["sizes"]]
    ptr = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    X = np.empty((int(ptr[-1]), len(columns)), np.float32)
    got = {name: [np.zeros(0, dtype)] for name, dtype in PER_ROW.items()}
    start = 0
    for p in parts:
        frame = pl.read_parquet(p, columns=[*columns, *PER_ROW])
        copy_rows(frame, columns, X[start:start + frame.height])
        for name in PER_ROW:
            got[name].append(frame[name].to_numpy())
        start += frame.height
    nodes = [n for p, info in zip(parts, infos) for n in _part_nodes(p, len(info["graph_ids"]))]
    return FeatureSet(X=X, **{name: np.concatenate(a).astype(PER_ROW[name], copy=False)
                              for name, a in got.items()},
                      ptr=ptr, graph_ids=tuple(gid for info in infos for gid in info["graph_ids"]),
                      collection=collection, columns=tuple(columns),
                      meta={**meta, "file_configs": [n for i in infos for n in i["configs"]]},
                      nodes=tuple(nodes) if nodes and all(n is not None for n in nodes) else None)


def read_part_sets(entry: Path, collection: str, columns: list[str],
                   meta: dict) -> Iterator[FeatureSet]:
    """An entry's rows a part at a time, each part a FeatureSet of its own whole graphs: what
    scoring a split needs without ever holding its whole matrix (a full tile test split is
    1.7 GB of rows)."""
    for p in check_entry(entry, meta):
        info = json.loads(p.with_suffix(".json").read_text())
        frame = pl.read_parquet(p, columns=[*columns, *PER_ROW])
        X = np.empty((frame.height, len(columns)), np.float32)
        copy_rows(frame, columns, X)
        per_row = {name: frame[name].to_numpy().astype(dtype) for name, dtype in PER_ROW.items()}
        del frame
        nodes = _part_nodes(p, len(info["graph_ids"]))
        part = FeatureSet(X=X, **per_row,
                          ptr=np.concatenate([[0], np.cumsum(info["sizes"], dtype=np.int64)]),
                          graph_ids=tuple(info["graph_ids"]), collection=collection,
                          columns=tuple(columns), meta={**meta, "file_configs": info["configs"]},
                          nodes=tuple(nodes) if nodes and all(n is not None for n in nodes)
                          else None)
        del X, per_row, nodes     # a suspended generator keeps its locals: one part at a time
        yield part
        del part
