"""A TpuGraphs file's arrays as a `Graph`, under the dataset's own key names, and the error a file
that breaks the format raises."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from features.npz import read_kernels
from features.schema import N_LAYOUT_CONFIG_FEAT, N_TILE_CONFIG_FEAT, is_tile


class DataFormatError(ValueError):
    """A data file or directory does not match the TpuGraphs format; the message names it."""


def collect_format_error(exc: BaseException | None, errors: list) -> None:
    """What a build does with one file's outcome: a file that breaks the format is listed with
    the others (each is reported after every other file is built); anything else stops it."""
    if isinstance(exc, DataFormatError):
        errors.append(exc)
    elif exc is not None:
        raise exc


# Configs are decompressed and featurized in chunks of about this many megabytes of
# node_config_feat as float32: a count of configs would be ~0.9 GB at 4,096 configs x 3,000
# configurable nodes, and ~1 MB on a small graph.
DEFAULT_CHUNK_MB = 128.0


class Graph(NamedTuple):
    """One npz file. Layout-only keys are None for tile files and vice versa.

    Shapes: node_feat (n, 140) float32; node_opcode (n,) int64; edge_index (m, 2) int64 with row
    [u, v] meaning u consumes v; config_runtime (c,) int64 (zeros in test);
    tile: config_feat (c, 24) float32, config_runtime_normalizers (c,) int64;
    layout: node_config_ids (nc,) int64, node_config_feat (c, nc, 18) int8, node_splits (s,) int64.

    A layout read that keeps only some configs (read_graph's `keep`) holds node_config_feat
    (k, nc, 18) of the configs at file positions config_index (k,), ascending, and what it
    computed over every config on the way: row_hashes (c,) uint64 (read_kernels.row_hash, the dedup
    key) and config_slots (nc, 3) (read_kernels.slots_set). config_runtime still has all c.
    """

    path: Path
    collection: str
    split: str
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    config_runtime: np.ndarray
    config_feat: np.ndarray | None = None
    config_runtime_normalizers: np.ndarray | None = None
    node_config_ids: np.ndarray | None = None
    node_config_feat: np.ndarray | None = None
    node_splits: np.ndarray | None = None
    config_index: np.ndarray | None = None
    row_hashes: np.ndarray | None = None
    config_slots: np.ndarray | None = None

    @property
    def graph_id(self) -> str:
        return self.path.stem

    def held(self, positions: np.ndarray) -> np.ndarray:
        """node_config_feat's row of each config at the given file positions."""
        positions = np.asarray(positions, np.int64)
        if self.config_index is None:
            return positions
        at = np.searchsorted(self.config_index, positions)
        if positions.size and (at.max() >= self.config_index.size
                               or np.any(self.config_index[at] != positions)):
            raise ValueError(f"{self.path}: configs {positions[:8]}... were not kept by the read")
        return at

    def with_configs(self, configs: np.ndarray, runtime: np.ndarray | None = None) -> "Graph":
        """This graph holding other configs (and their runtimes; zeros when unknown)."""
        c = configs.shape[0]
        runtime = np.zeros(c, np.int64) if runtime is None else np.asarray(runtime)
        held = dict(config_runtime=runtime, config_index=None, row_hashes=None, config_slots=None)
        if is_tile(self.collection):
            return self._replace(config_feat=configs,
                                 config_runtime_normalizers=np.ones(c, np.int64), **held)
        return self._replace(node_config_feat=configs, **held)

    def slots(self) -> np.ndarray:
        """(nc, 3) read_kernels.slots_set over every config of the file."""
        if self.config_slots is not None:
            return self.config_slots
        return read_kernels.slots_set(self.node_config_feat)

    @property
    def n_configs(self) -> int:
        return int(self.config_runtime.shape[0])

    def chunk_configs(self, chunk_mb: float) -> int:
        """Configs per chunk of chunk_mb megabytes (see chunk_rows)."""
        per_config = (N_TILE_CONFIG_FEAT if self.config_feat is not None
                      else self.node_config_feat.shape[1] * N_LAYOUT_CONFIG_FEAT)
        return chunk_rows(per_config, chunk_mb)


def chunk_rows(values_per_config: int, chunk_mb: float) -> int:
    """How many configs of `values_per_config` float32 values fill chunk_mb megabytes (>= 1)."""
    return max(1, int(chunk_mb * 2**20) // max(4 * values_per_config, 1))
