"""Loader: discovery, real dtypes/shapes, and a clear error for every broken-file rule."""
from __future__ import annotations

import shutil
import zipfile

import numpy as np
import pytest

from features.io import (COLLECTIONS, SPLITS, DataFormatError, list_npz, read_graph,
                         resolve_npz_root)
from features.sample import write_npz


def _arrays(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_every_sample_file_reads_with_documented_dtypes(tiny_npz):
    for collection in COLLECTIONS:
        for split in SPLITS:
            files = list_npz(tiny_npz, collection, split)
            assert files, (collection, split)
            for f in files:
                g = read_graph(f, collection, split)
                n = g.node_feat.shape[0]
                assert g.node_feat.dtype == np.float32 and g.node_feat.shape == (n, 140)
                assert g.node_opcode.dtype == np.int64 and g.node_opcode.shape == (n,)
                assert g.edge_index.dtype == np.int64 and g.edge_index.shape[1] == 2
                assert g.config_runtime.dtype == np.int64
                if split == "test":
                    assert not g.config_runtime.any()
                if collection == "tile:xla":
                    assert g.config_feat.shape == (g.n_configs, 24)
                    assert g.node_config_feat is None
                else:
                    nc = g.node_config_ids.size
                    assert g.node_config_feat.dtype == np.int8
                    assert g.node_config_feat.shape == (g.n_configs, nc, 18)
                    assert g.node_splits.ndim == 1 and g.node_splits[0] == 0


def test_files_on_disk_have_the_real_dtypes(tiny_npz):
    f = list_npz(tiny_npz, "layout:nlp:random", "train")[0]
    a = _arrays(f)
    assert a["node_opcode"].dtype == np.uint8 and a["edge_index"].dtype == np.int64
    assert a["node_config_feat"].dtype == np.float32 and a["node_splits"].shape[0] == 1
    t = _arrays(list_npz(tiny_npz, "tile:xla", "test")[0])
    assert (t["config_runtime_normalizers"] == 1).all() and (t["config_runtime"] == 0).all()


@pytest.mark.parametrize("suffix", ["", "npz_all", "npz_all/npz"])
def test_root_is_accepted_at_three_levels(tiny_root, tiny_npz, suffix):
    assert resolve_npz_root(tiny_root / suffix) == tiny_npz


def test_missing_root_resolves_to_none(tmp_path):
    assert resolve_npz_root(tmp_path / "nothing") is None


def test_chunked_read_equals_whole_read(tiny_npz):
    f = list_npz(tiny_npz, "layout:xla:random", "train")[0]
    whole = _arrays(f)["node_config_feat"]
    for chunk in (1, 7, 10_000):
        g = read_graph(f, "layout:xla:random", "train", chunk_configs=chunk)
        np.testing.assert_array_equal(g.node_config_feat, whole.astype(np.int8))


@pytest.fixture
def layout_file(tiny_npz, tmp_path):
    src = list_npz(tiny_npz, "layout:xla:default", "train")[0]
    return _arrays(src), tmp_path / src.name


def _broken(layout_file, **changes):
    arrays, path = layout_file
    arrays = {**arrays, **changes}
    arrays = {k: v for k, v in arrays.items() if v is not None}
    write_npz(path, arrays)
    return path


@pytest.mark.parametrize("change, message", [
    (dict(node_config_feat=None), "missing key"),
    (dict(node_feat=np.zeros((5, 139), np.float32)), "'node_feat'"),
    (dict(node_opcode=np.zeros(3, np.uint8)), "'node_opcode'"),
    (dict(edge_index=np.array([[0, 10**6]])), "'edge_index'"),
    (dict(edge_index=np.array([[1, 1]])), "self-loop"),
    (dict(node_splits=np.array([0, 5])), "'node_splits'"),
    (dict(node_config_ids=np.array([0, 0])), "'node_config_ids'"),
    (dict(config_runtime=np.zeros(1, np.int64)), "config_runtime"),
])
def test_bad_layout_files_name_file_and_key(layout_file, change, message):
    path = _broken(layout_file, **change)
    with pytest.raises(DataFormatError, match=message) as err:
        read_graph(path, "layout:xla:default", "train")
    assert str(path) in str(err.value)


@pytest.mark.parametrize("bad_value", [7.0, -2.0, 0.5])
def test_layout_values_outside_minus1_to_5_are_rejected(layout_file, bad_value):
    ncf = layout_file[0]["node_config_feat"].copy()
    ncf[-1, 0, 3] = bad_value
    path = _broken(layout_file, node_config_feat=ncf)
    with pytest.raises(DataFormatError, match="node_config_feat.*-1..5"):
        read_graph(path, "layout:xla:default", "train", chunk_configs=16)


def test_runtime_of_wrong_length_or_dtype(layout_file):
    arrays, _ = layout_file
    path = _broken(layout_file, config_runtime=arrays["config_runtime"][:-1])
    with pytest.raises(DataFormatError, match="node_config_feat"):
        read_graph(path, "layout:xla:default", "train")
    path = _broken(layout_file, node_opcode=layout_file[0]["node_opcode"].astype(np.float32))
    with pytest.raises(DataFormatError, match="integer dtype"):
        read_graph(path, "layout:xla:default", "train")


def test_nonzero_runtime_in_test_split_is_rejected(layout_file):
    path = _broken(layout_file)
    with pytest.raises(DataFormatError, match="all zeros in a test file"):
        read_graph(path, "layout:xla:default", "test")


def test_truncated_file(layout_file, tmp_path):
    path = _broken(layout_file)
    data = path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match="cut.npz"):
        read_graph(cut, "layout:xla:default", "train")


def test_not_a_zip_file(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_text("hello")
    with pytest.raises(DataFormatError, match="x.npz.*unreadable"):
        read_graph(bad, "tile:xla", "train")


def test_tile_normalizers_must_be_positive(tiny_npz, tmp_path):
    arrays = _arrays(list_npz(tiny_npz, "tile:xla", "train")[0])
    arrays["config_runtime_normalizers"] = np.zeros_like(arrays["config_runtime_normalizers"])
    path = tmp_path / "t.npz"
    write_npz(path, arrays)
    with pytest.raises(DataFormatError, match="config_runtime_normalizers"):
        read_graph(path, "tile:xla", "train")


def test_unknown_collection_and_split(tiny_npz):
    with pytest.raises(ValueError, match="unknown collection"):
        list_npz(tiny_npz, "layout:xla", "train")
    with pytest.raises(ValueError, match="unknown split"):
        list_npz(tiny_npz, "tile:xla", "training")


def test_copied_tree_reads_the_same(tiny_root, tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(tiny_root / "npz_all", copy / "npz_all")
    root = resolve_npz_root(copy)
    assert [p.name for p in list_npz(root, "tile:xla", "test")] == \
        [p.name for p in list_npz(resolve_npz_root(tiny_root), "tile:xla", "test")]
    assert zipfile.is_zipfile(list_npz(root, "tile:xla", "test")[0])
