"""A collection's train rows binned once by LightGBM and shared by every fit of a run.

Each seed fits a subset of the graphs (its early-stopping probe) and maybe all of them (its
refit): one `lightgbm.Dataset` holds the bins and every fit takes a subset of it, instead of
binning the float32 rows again for each fit (six times for three seeds). Rows read from a cache
entry are streamed into the bins part by part (`lightgbm.Sequence`), so the float32 matrix is
never whole in memory: tile's would be 3.95 GB on the full download, its bins a quarter of it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import lightgbm as lgb
import numpy as np

from features import FeatureSet, load_entry, read_meta
from features.cache.entries import entry_parts, part_rows
from features.rows.feature_set import in_family

from models.training.row_order import rows_in_order


class _OnePart:
    """The last part read, the only one held: LightGBM reads the parts in order, twice (a
    sample for the bin bounds, then every row)."""

    def __init__(self):
        self.part, self.rows = None, None

    def rows_of(self, part: Path, columns: list[str]) -> np.ndarray:
        if self.part != part:
            self.part, self.rows = None, None     # let the old one go before reading
            self.rows, self.part = part_rows(part, columns), part
        return self.rows


class PartRows(lgb.Sequence):
    """One entry part's rows, in `order` (a permutation of them, or None: as stored)."""

    batch_size = 65_536

    def __init__(self, part: Path, n_rows: int, columns: list[str], order, held: _OnePart):
        self.part, self.n_rows, self.columns, self.order, self.held = (part, n_rows, columns,
                                                                      order, held)

    def __len__(self) -> int:
        return self.n_rows

    def __getitem__(self, idx):
        rows = self.held.rows_of(self.part, self.columns)
        out = rows[idx] if self.order is None else rows[self.order[idx]]
        # one row is read for the sample that sets the bin bounds, which LightGBM takes as float64
        return out.astype(np.float64) if out.ndim == 1 else out


@dataclass
class BinnedRows:
    """rows: the targets and graphs (no feature columns) in the Dataset's row order; its graphs
    keep their positions and row ranges, their rows may be permuted within (sub-groups).
    dataset: the bins of every row, constructed, the float32 rows let go."""
    rows: FeatureSet
    dataset: lgb.Dataset
    columns: tuple[str, ...]
    matrix: FeatureSet | None = None   # the rows in memory, kept for fits that take them (a
                                       # cluster's refit: dask_train.py)

    @property
    def collection(self) -> str:
        return self.rows.collection

    def graph_set(self, graphs: np.ndarray | None, labels: np.ndarray) -> lgb.Dataset:
        """The Dataset of the given graph positions (None: all), labelled `labels` (one per row
        of self.rows). A subset is a copy of those rows' bins, let go with the fit."""
        if graphs is None:
            self.dataset.set_label(labels)
            return self.dataset
        used = self.rows.graph_rows(np.sort(np.asarray(graphs, np.int64)))
        subset = self.dataset.subset(used).construct()
        subset.set_label(labels[used])
        return subset


def bin_rows(source: FeatureSet | Path, columns: list[str], grouping, labels, params: dict,
             bare: FeatureSet | None = None) -> BinnedRows:
    """The `columns` of a FeatureSet's or a cache entry's rows binned with LightGBM `params`.
    grouping(rows) -> (order | None, group sizes | None) and labels(rows) -> (n,) are the first
    ranker's: its sub-groups are every fit's. bare: the source's targets and graphs when the
    caller has them already."""
    in_memory = isinstance(source, FeatureSet)
    if bare is None:
        bare = source if in_memory else load_entry(source, ())
    bare = bare_rows(bare)
    order, group = grouping(bare)
    rows = bare if order is None else _reordered(bare, order)
    common = dict(label=labels(rows), group=group, feature_name=safe_names(columns),
                  params=params, free_raw_data=True)
    if in_memory:
        X = source.X if tuple(columns) == source.columns else source.X[
            :, [source.columns.index(c) for c in columns]]
        with rows_in_order(X, order) as ordered:
            dataset = lgb.Dataset(ordered, **common).construct()
    else:
        dataset = lgb.Dataset(_part_sequences(source, list(columns), order), **common).construct()
    return BinnedRows(rows, dataset, tuple(columns))


def feature_columns(entry: Path, without=()) -> list[str]:
    """A cache entry's feature columns less those of the feature families `without`."""
    return [c for c in read_meta(entry)["columns"] if not any(in_family(c, f) for f in without)]


def bare_rows(data: FeatureSet) -> FeatureSet:
    """data's targets and graphs without its feature columns or node rows."""
    return replace(data, X=data.X[:, :0], columns=(), nodes=None)


def _reordered(bare: FeatureSet, order: np.ndarray) -> FeatureSet:
    """bare's rows in `order`, which permutes rows within their graphs only."""
    return replace(bare, X=bare.X[order], runtime=bare.runtime[order],
                   config_idx=bare.config_idx[order], dup_count=bare.dup_count[order])


def _part_sequences(entry: Path, columns: list[str], order) -> list[PartRows]:
    """One Sequence per part; `order` (None or a permutation within graphs, so within parts)
    cut into each part's own."""
    held, out, start = _OnePart(), [], 0
    for part, n in entry_parts(entry):
        local = None if order is None else order[start:start + n] - start
        if local is not None and (local.min(initial=0) < 0 or local.max(initial=-1) >= n):
            raise ValueError(f"{part}: the row order moves rows across parts")
        out.append(PartRows(part, n, columns, local, held))
        start += n
    return out


def safe_names(columns) -> list[str]:
    # LightGBM rejects JSON special characters in feature names.
    return [c.replace(".", "__") for c in columns]
