"""The generated sample: deterministic, in the real tree, with the cost model it claims."""
from __future__ import annotations

import re

import numpy as np

from features.npz.find import list_npz
from features.schema import COLLECTIONS, SPLITS
from models.sample.generate import ensure_sample, tiled_bytes

from .conftest import TINY


def test_sample_is_byte_identical_across_builds(tmp_path, tiny_npz):
    other = ensure_sample(tmp_path / "again", TINY)
    for collection in COLLECTIONS:
        for split in SPLITS:
            a, b = list_npz(tiny_npz, collection, split), list_npz(other, collection, split)
            assert [p.name for p in a] == [p.name for p in b]
            for x, y in zip(a, b):
                with np.load(x) as za, np.load(y) as zb:
                    for k in za.files:
                        np.testing.assert_array_equal(za[k], zb[k])


def test_test_names_are_32_hex_and_shared_by_default_and_random(tiny_npz):
    for source in ("xla", "nlp"):
        default = [p.stem for p in list_npz(tiny_npz, f"layout:{source}:default", "test")]
        random = [p.stem for p in list_npz(tiny_npz, f"layout:{source}:random", "test")]
        assert default == random and default
        assert all(re.fullmatch(r"[0-9a-f]{32}", s) for s in default)


def test_default_collections_repeat_the_all_default_config(tiny_npz):
    f = list_npz(tiny_npz, "layout:nlp:default", "train")[0]
    with np.load(f) as z:
        ncf = z["node_config_feat"]
    all_default = (ncf == -1).all(axis=(1, 2))
    assert all_default.sum() >= 40


def test_tiled_bytes_matches_hand_computation():
    # shape (3, 200, 5), layout minor-to-major [1, 2, 0]: minor dim 200 -> 256, 2nd-minor 5 -> 8
    layout = np.array([[1, 2, 0, -1, -1, -1]])
    got = tiled_bytes((3, 200, 5), layout, elem_bytes=2)
    assert got[0] == 3 * 256 * 8 * 2
    rank1 = tiled_bytes((130,), np.array([[0, -1, -1, -1, -1, -1]]), elem_bytes=4)
    assert rank1[0] == 256 * 1 * 4


def test_layout_runtimes_follow_the_cost_model(tiny_npz):
    """Configs that keep every node at its default layout pay no copies: they are never the
    slowest of a random-search graph."""
    f = list_npz(tiny_npz, "layout:xla:random", "train")[0]
    with np.load(f) as z:
        ncf, rt = z["node_config_feat"], z["config_runtime"]
    changed = (ncf[:, :, 0:6] >= 0).any(axis=2).sum(axis=1)
    assert np.corrcoef(changed, rt)[0, 1] > 0.0
