"""Loader: discovery, real dtypes/shapes, and a clear error for every broken-file rule."""
from __future__ import annotations

import os
import shutil
import zipfile

import numpy as np
import pytest

from features.npz import inflate
from features.npz.find import list_npz, resolve_npz_root
from features.npz.graph import DataFormatError
from features.npz.read import read_graph
from features.schema import COLLECTIONS, SPLITS
from models.sample.generate import write_npz


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


def test_a_relative_data_dir_names_the_same_data_from_anywhere(tiny_root, tiny_npz, tmp_path,
                                                               monkeypatch):
    """What a command prints and records of its data (the description tune-sim compares
    draws by, the run's data dir) does not depend on the directory it was started in."""
    from features.npz.data_source import resolve_data
    monkeypatch.chdir(tiny_root.parent)
    here = resolve_data(tiny_root.name)
    monkeypatch.chdir(tmp_path)
    there = resolve_data(os.path.relpath(tiny_root, tmp_path))
    assert here.npz_root == there.npz_root == tiny_npz and here.npz_root.is_absolute()
    assert here.description == there.description == f"TpuGraphs data at {tiny_npz}"


def test_missing_root_resolves_to_none(tmp_path):
    assert resolve_npz_root(tmp_path / "nothing") is None


@pytest.mark.parametrize("savez", [np.savez_compressed, np.savez])   # deflated and stored
def test_read_in_pieces_equals_numpy_load(tiny_npz, tmp_path, savez, monkeypatch):
    monkeypatch.setattr(inflate, "INPUT_BYTES", 64)     # the deflated input is refilled often
    arrays = _arrays(list_npz(tiny_npz, "layout:xla:random", "train")[0])
    savez(tmp_path / "g.npz", **arrays)
    for piece_bytes in (4, 1000, 2**30):     # one value per piece, a few hundred, the whole file
        g = read_graph(tmp_path / "g.npz", "layout:xla:random", "train", piece_bytes=piece_bytes)
        np.testing.assert_array_equal(g.node_config_feat,
                                      arrays["node_config_feat"].astype(np.int8))


@pytest.mark.parametrize("stored", [np.asfortranarray, lambda a: a.astype(">f4"),
                                    lambda a: a.astype(np.float16), lambda a: a.astype(np.int64)])
def test_other_layouts_and_dtypes_of_node_config_feat_read_the_same(layout_file, stored):
    arrays, path = layout_file
    ncf = arrays["node_config_feat"]
    np.savez_compressed(path, **{**arrays, "node_config_feat": stored(ncf)})
    for packed_dir in (None, path.parent / "packed"):      # in memory, and the int8 copy
        g = read_graph(path, "layout:xla:default", "train", packed_dir=packed_dir)
        np.testing.assert_array_equal(g.node_config_feat, ncf.astype(np.int8))


def test_a_wrong_crc_is_an_error_naming_the_file(layout_file):
    path, raw, _, _ = _deflated(layout_file)
    with zipfile.ZipFile(path) as zf:
        crc = zf.getinfo("node_config_feat.npy").CRC
    central = raw.rfind(b"PK\x01\x02", 0, raw.rfind(b"node_config_feat.npy"))
    assert int.from_bytes(raw[central + 16:central + 20], "little") == crc
    raw[central + 16:central + 20] = (crc ^ 1).to_bytes(4, "little")     # the data is intact
    path.write_bytes(bytes(raw))
    _fails_naming_the_file(path, "CRC-32")


def test_a_prefix_read_is_the_first_configs_of_a_whole_read(tiny_npz, tmp_path):
    f = list_npz(tiny_npz, "layout:xla:random", "train")[0]
    whole = _arrays(f)
    k = whole["config_runtime"].size // 3
    packed = tmp_path / "packed"
    for packed_dir in (None, packed, packed):       # in memory, a prefix copy, then reusing it
        g = read_graph(f, "layout:xla:random", "train", packed_dir=packed_dir, max_configs=k)
        np.testing.assert_array_equal(g.node_config_feat, whole["node_config_feat"][:k])
        np.testing.assert_array_equal(g.config_runtime, whole["config_runtime"][:k])
    read_graph(f, "layout:xla:random", "train", packed_dir=packed)     # the whole file's copy
    from_whole = read_graph(f, "layout:xla:random", "train", packed_dir=packed, max_configs=k)
    np.testing.assert_array_equal(from_whole.node_config_feat, whole["node_config_feat"][:k])
    many = read_graph(f, "layout:xla:random", "train", max_configs=10**6)    # more than it has
    assert many.n_configs == whole["config_runtime"].size


def test_a_prefix_read_still_checks_runtimes_against_configs(layout_file):
    arrays, _ = layout_file
    path = _broken(layout_file, config_runtime=arrays["config_runtime"][:-1])
    _fails_naming_the_file(path, "config_runtime", max_configs=2)


def _fails_naming_the_file(path, match: str, **read) -> None:
    with pytest.raises(DataFormatError, match=match) as err:
        read_graph(path, "layout:xla:default", "train", **read)
    assert str(path) in str(err.value)


def _deflated(layout_file):
    """The layout file, written deflated, and where node_config_feat's deflated bytes lie."""
    arrays, path = layout_file
    np.savez_compressed(path, **arrays)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("node_config_feat.npy")
    raw = bytearray(path.read_bytes())
    name_len, extra_len = np.frombuffer(raw[info.header_offset + 26:info.header_offset + 30],
                                        "<u2")
    return path, raw, info.header_offset + 30 + int(name_len) + int(extra_len), info.compress_size


def test_corrupt_node_config_feat_is_an_error_naming_the_file(layout_file):
    path, raw, start, size = _deflated(layout_file)
    raw[start + size // 2] ^= 0xFF          # a flipped byte: a bad stream or a CRC mismatch
    path.write_bytes(bytes(raw))
    _fails_naming_the_file(path, "deflate stream|CRC-32")


def test_truncated_node_config_feat_is_an_error_naming_the_file(layout_file):
    arrays, path = layout_file
    ncf = arrays["node_config_feat"].astype(np.float32)
    np.savez_compressed(path, **{k: v for k, v in arrays.items() if k != "node_config_feat"})
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as zf, \
            zf.open("node_config_feat.npy", "w") as fp:
        np.lib.format.write_array_header_1_0(fp, np.lib.format.header_data_from_array_1_0(ncf))
        fp.write(ncf.tobytes()[:ncf.nbytes // 2])      # the header promises twice as much
    _fails_naming_the_file(path, "node_config_feat.*ends early")


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


@pytest.mark.parametrize("bad_value", [7.0, -2.0, 0.5, np.nan, np.inf, 1e30])
def test_layout_values_outside_minus1_to_5_are_rejected(layout_file, bad_value):
    ncf = layout_file[0]["node_config_feat"].copy()
    ncf[-1, 0, 3] = bad_value
    path = _broken(layout_file, node_config_feat=ncf)
    last = tuple(n - 1 for n in ncf.shape[:1]) + (0, 3)
    for piece_bytes in (8, 2**30):       # the bad value's index is its index in the whole array
        with pytest.raises(DataFormatError, match=rf"node_config_feat.*-1..5.*{last}"):
            read_graph(path, "layout:xla:default", "train", piece_bytes=piece_bytes)


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


@pytest.fixture
def tile_file(tiny_npz, tmp_path):
    src = list_npz(tiny_npz, "tile:xla", "train")[0]
    return _arrays(src), tmp_path / src.name


def _with_value(file, key, index, value, dtype=None):
    arrays, _ = file
    arr = arrays[key].astype(dtype or arrays[key].dtype)
    arr[index] = value
    return _broken(file, **{key: arr})


@pytest.mark.parametrize("key, index, value, shown", [
    ("node_feat", (2, 28), np.nan, "nan"),
    ("node_feat", (0, 93), 1e30, "1e+30"),      # was an OverflowError in per_config._roles
    ("node_feat", (1, 27), -np.inf, "-inf"),
    ("node_feat", (3, 136), 9.0, "9"),        # a dimension index beyond 0..5
    ("node_feat", (3, 134), -1.0, "-1"),
])
def test_bad_node_feat_values_name_file_key_index_and_value(layout_file, key, index, value,
                                                            shown):
    path = _with_value(layout_file, key, index, value)
    with pytest.raises(DataFormatError) as err:
        read_graph(path, "layout:xla:default", "train")
    assert f"{path}: key '{key}'" in str(err.value)
    assert f"found {shown} at index {index}" in str(err.value)


@pytest.mark.parametrize("key, index, value, shown", [
    ("config_feat", (4, 9), np.inf, "inf"),     # inf reached tile_full as an IndexError
    ("config_feat", (0, 0), np.nan, "nan"),
    ("config_feat", (1, 15), 1e30, "1e+30"),
    ("config_feat", (2, 8), -4.0, "-4"),
    ("node_feat", (0, 134), np.inf, "inf"),
    ("node_feat", (1, 28), 1e300, "1e+300"),     # float64 on disk: reported before the cast
])
def test_bad_tile_values_name_file_key_index_and_value(tile_file, key, index, value, shown):
    path = _with_value(tile_file, key, index, value, np.float64 if value == 1e300 else None)
    with pytest.raises(DataFormatError) as err:
        read_graph(path, "tile:xla", "train")
    assert f"{path}: key '{key}'" in str(err.value)
    assert f"found {shown} at index {index}" in str(err.value)


def test_all_nan_layout_node_feat_names_the_file(layout_file):
    arrays, _ = layout_file
    path = _broken(layout_file, node_feat=np.full_like(arrays["node_feat"], np.nan))
    with pytest.raises(DataFormatError, match=f"{path}: key 'node_feat'.*nan at index \\(0, 0\\)"):
        read_graph(path, "layout:xla:default", "train")


def test_values_at_the_bounds_are_read_and_give_finite_features(tile_file, layout_file):
    """The largest magnitudes the format allows pass the loader and the feature code."""
    from features import FeatureConfig
    from features.rows.table import graph_table

    arrays, _ = tile_file
    config_feat = arrays["config_feat"].copy()
    config_feat[0, 15] = np.float32(2.0**62)
    node_feat = arrays["node_feat"].copy()
    node_feat[0, 28], node_feat[0, 61] = np.float32(2.0**62), -39.0
    for file, collection in ((_broken(tile_file, config_feat=config_feat, node_feat=node_feat),
                              "tile:xla"),
                             (_with_value(layout_file, "node_feat", (0, 28), 2.0**62),
                              "layout:xla:default")):
        X, _, _ = graph_table(read_graph(file, collection, "train"), FeatureConfig())
        assert np.isfinite(X).all(), collection


def _every_third(runtime):
    return np.arange(0, runtime.size, 3)


@pytest.mark.parametrize("piece_bytes", [1, 5000, 2**30])   # a config a piece, several, all
def test_a_read_that_keeps_some_configs_holds_them_and_what_all_of_them_give(
        tiny_npz, tmp_path, piece_bytes):
    f = list_npz(tiny_npz, "layout:nlp:default", "train")[0]
    whole = _arrays(f)
    ncf = whole["node_config_feat"].astype(np.int8)
    c, nc = ncf.shape[:2]
    g = read_graph(f, "layout:nlp:default", "train", piece_bytes=piece_bytes, keep=_every_third,
                   packed_dir=tmp_path / "packed")
    np.testing.assert_array_equal(g.config_index, np.arange(0, c, 3))
    np.testing.assert_array_equal(g.node_config_feat, ncf[::3])
    np.testing.assert_array_equal(g.config_runtime, whole["config_runtime"])
    # slots set: per node and section, the most of its 6 values any config sets (>= 0)
    np.testing.assert_array_equal(g.slots(), (ncf.reshape(c, nc, 3, 6) >= 0).sum(-1).max(0))
    # equal configs hash equal, different ones differently
    same = (ncf.reshape(c, 1, -1) == ncf.reshape(1, c, -1)).all(-1)
    np.testing.assert_array_equal(g.row_hashes[:, None] == g.row_hashes[None, :], same)
    np.testing.assert_array_equal(g.held(np.array([3, 6])), [1, 2])
    with pytest.raises(ValueError, match="not kept"):
        g.held(np.array([1]))
    assert not (tmp_path / "packed").exists()          # nothing is written for a partial read


def test_a_read_that_keeps_some_configs_checks_every_value(layout_file):
    ncf = layout_file[0]["node_config_feat"].copy()
    ncf[-1, 0, 3] = 9.0                                  # in a config the read does not keep
    path = _broken(layout_file, node_config_feat=ncf)
    last = (ncf.shape[0] - 1, 0, 3)
    with pytest.raises(DataFormatError, match=rf"node_config_feat.*-1..5.*{last}") as err:
        read_graph(path, "layout:xla:default", "train", keep=lambda rt: np.array([0]))
    assert str(path) in str(err.value)


def test_a_read_that_keeps_some_configs_checks_runtimes_against_configs(layout_file):
    arrays, _ = layout_file
    path = _broken(layout_file, config_runtime=arrays["config_runtime"][:-1])
    _fails_naming_the_file(path, "config_runtime", keep=lambda rt: np.array([0]))
