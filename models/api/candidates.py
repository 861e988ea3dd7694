"""Candidates to rank: one graph plus configs, no runtimes (they are what a ranking predicts).

From a file (`read_candidates`), from arrays an autotuner holds (`graph_from_arrays`), or from a
program's HLO text and a file of layouts for it (`read_program`), validated by the
loader's own rules (features/npz), into a test-split Graph: zero runtimes, every config a row;
`candidate_rows` turns it into the FeatureSet a model scores.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from features.hlo import read_hlo
from features.npz.find import collection_dir
from features.npz.graph import DataFormatError, Graph
from features.npz.member import read_node_config_feat
from features.npz.read import read_keys
from features.npz.validate import check_node_config_feat, expect, to_int8, validate_graph
from features.schema import LAYOUT_KEYS, N_LAYOUT_CONFIG_FEAT, N_TILE_CONFIG_FEAT, TILE_KEYS
from features.rows.feature_set import FeatureSet
from features.schema import COLLECTIONS, SPLITS, collection_kind, is_tile
from features.rows.table import FeatureConfig, GraphStatic, graph_table

CANDIDATE_KEYS = {"tile": TILE_KEYS[:4],
                  "layout": tuple(k for k in LAYOUT_KEYS if k != "config_runtime")}


def config_key(collection: str) -> str:
    """The array holding a collection's configs."""
    return "config_feat" if is_tile(collection) else "node_config_feat"


def read_candidates(path: Path, collection: str) -> Graph:
    """Read a file whose configs are to be ranked: validated like read_graph, but runtimes may be
    absent or zero; they are ignored."""
    path = Path(path)
    return _candidates(read_candidate_arrays(path, collection), collection, path)


def read_candidate_arrays(path: Path, collection: str) -> dict:
    """A file's arrays a ranking takes (CANDIDATE_KEYS), by name, not yet validated."""
    keys = CANDIDATE_KEYS[collection_kind(collection)]
    return read_keys(path, keys, lambda zf: read_node_config_feat(zf, path))


def is_program_text(path: Path) -> bool:
    """A file to read as HLO text: any but an npz (by its name or, under another name, its zip
    signature), so `.hlo` and an XLA dump's `.txt` both read."""
    path = Path(path)
    return path.suffix != ".npz" and not zipfile.is_zipfile(path)


def read_program(program: Path, configs: Path | None) -> tuple[dict, str]:
    """(arrays, name): a program's HLO text (features.hlo.read_hlo) with the layouts in
    `configs` (a .npy of (c, nc, 18) or of one config (nc, 18), or an npz holding
    node_config_feat) as its candidates, not yet validated, and the name its errors go by; a
    ValueError saying what to pass when `configs` is None."""
    program = Path(program)
    graph = read_hlo(program)
    nc = graph["node_config_ids"].size
    if configs is None:
        raise ValueError(f"{program} is a program's HLO text, which holds no configs to rank: "
                         f"pass --configs CONFIGS.npy, (c, {nc}, 18) integer layouts -1..5 for "
                         f"its {nc} configurable nodes (or an npz holding node_config_feat)")
    ncf = read_config_file(Path(configs))
    if ncf.ndim == 2:         # one config, (nc, 18): `tune`'s best.npy
        ncf = ncf[None]
    return {**graph, "node_config_feat": ncf}, f"{configs} (configs of {program})"


def read_config_file(path: Path) -> np.ndarray:
    """node_config_feat from an npz (read and checked as a TpuGraphs file's member), or a .npy
    holding the array alone (checked by graph_from_arrays)."""
    if zipfile.is_zipfile(path):
        return read_keys(path, ("node_config_feat",),
                         lambda zf: read_node_config_feat(zf, path))["node_config_feat"]
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError) as exc:   # not a .npy, or a pickled object array
        raise DataFormatError(f"{path}: not a .npy array nor an npz holding node_config_feat "
                              f"({exc})") from exc


def candidate_rows(g: Graph, cfg: FeatureConfig, static: GraphStatic | None = None,
                   reference=None) -> FeatureSet:
    """One graph's rows as a FeatureSet in memory, as a cache entry would hold them. `static`:
    table.graph_static(g, cfg) computed earlier for the same graph; `reference`:
    table.graph_reference, the statistics the rows are set against (default: g's own configs)."""
    X, columns, rows = graph_table(g, cfg, static, reference)
    return FeatureSet(X=X, runtime=rows.runtime, config_idx=rows.config_idx,
                      dup_count=rows.dup_count, ptr=np.array([0, X.shape[0]], np.int64),
                      graph_ids=(g.graph_id,), collection=g.collection, columns=tuple(columns))


def graph_from_arrays(arrays: dict, collection: str, *, name: str = "<arrays>") -> Graph:
    """Validate in-memory candidates exactly as a file's (shapes, dtypes, slot values -1..5);
    errors name `name`. node_splits may be (1, s) as in the files, 1-D, or absent (none known)."""
    path = Path(name)
    keys = CANDIDATE_KEYS[collection_kind(collection)]
    arrays = {k: np.asarray(v) for k, v in arrays.items() if v is not None}
    if "node_splits" in keys:
        splits = arrays.get("node_splits", np.zeros(0, np.int64))
        arrays["node_splits"] = splits.reshape(1, -1) if splits.ndim == 1 else splits
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise DataFormatError(f"{path}: missing array(s) {missing} for {collection}")
    if "node_config_feat" in keys:
        ncf = arrays["node_config_feat"]
        check_node_config_feat(ncf.shape, ncf.dtype, path)
        arrays["node_config_feat"] = to_int8(ncf, path, 0)
    return _candidates({k: arrays[k] for k in keys}, collection, path)


def _candidates(arrays: dict, collection: str, path: Path) -> Graph:
    """A test-split Graph: zero runtimes (and unit tile normalizers) filled in."""
    key = config_key(collection)
    shape = np.shape(arrays[key])
    c = shape[0] if shape else 0
    expect(c > 0, path, key, "at least one candidate config", f"shape {shape}")
    _check_per_candidate_axis(arrays, key, path)
    extra = {"config_runtime": np.zeros(c, np.int64)}
    if is_tile(collection):
        extra["config_runtime_normalizers"] = np.ones(c, np.int64)
    return validate_graph(Graph(path=path, collection=collection, split="test", **arrays, **extra))


def _check_per_candidate_axis(arrays: dict, key: str, path: Path) -> None:
    """Axis 1 of the configs against what it must hold. The count of candidates is read from
    axis 0, so a transposed array would otherwise be reported against a shape built from its
    own wrong axis ('expected (396, 396, 18)')."""
    shape = np.shape(arrays[key])
    if key == "config_feat":
        want, what = N_TILE_CONFIG_FEAT, "tile config features"
        order = ("c", str(N_TILE_CONFIG_FEAT))
    else:
        ids = np.shape(arrays["node_config_ids"])
        if len(ids) != 1:
            return   # the validator reports a node_config_ids that is not 1-D
        want, order = ids[0], ("c", "nc", str(N_LAYOUT_CONFIG_FEAT))
        what = "configurable nodes listed in node_config_ids"
    if len(shape) < 2 or shape[1] == want:
        return
    hint = ""
    if shape[0] == want:
        swapped = (order[1], order[0]) + order[2:]
        hint = (f". Did you pass ({', '.join(swapped)})? Candidates go first: "
                f"({', '.join(order)})")
    raise DataFormatError(f"{path}: axis 1 of {key} must be the {want} {what}; got "
                          f"{shape[1]} (shape {tuple(shape)}){hint}")


def candidate_kind(keys, path: Path) -> str:
    """'tile' or 'layout', from which config key is present (config_feat / node_config_feat)."""
    kinds = [kind for kind, key in (("tile", "config_feat"), ("layout", "node_config_feat"))
             if key in keys]
    if len(kinds) != 1:
        raise DataFormatError(f"{path}: expected exactly one of 'config_feat' (tile) or "
                              f"'node_config_feat' (layout), found {sorted(keys)}")
    return kinds[0]


def npz_keys(path: Path) -> list[str]:
    """The array names stored in an npz file."""
    try:
        with zipfile.ZipFile(path) as zf:
            return [name.removesuffix(".npy") for name in zf.namelist()]
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataFormatError(f"{path}: unreadable npz ({type(exc).__name__}: {exc})") from exc


def collection_from_path(path: Path) -> str | None:
    """The collection of a file in a TpuGraphs tree (.../layout/xla/random/test/x.npz), or None."""
    parent = Path(path).resolve().parent
    if parent.name not in SPLITS:
        return None
    for collection in COLLECTIONS:
        parts = collection_dir(collection).parts
        if parent.parent.parts[-len(parts):] == parts:
            return collection
    return None
