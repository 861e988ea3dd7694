"""The HLO reader (features/hlo) against the dataset's encoding.

1. Every dev program (tpugraphs_dev/hlo/<stem>.hlo) gives exactly the arrays of its npz files.
2. Small programs under tests/data/hlo, with arrays worked out by hand from the text and the
   format reference (shared/tpugraphs_format.md sections 3-5): literal opcode ids, edges and
   column numbers, not produced by the reader.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from features.hlo import read_hlo, write_layout_npz
from features.schema import GRAPH_KEYS

from models.training.family_split import graph_family

from .conftest import DEV, DEV_NEW_FAMILIES

DATA = Path(__file__).parent / "data" / "hlo"
DTYPES = {"node_opcode": np.uint8, "node_feat": np.float32, "edge_index": np.int64,
          "node_config_ids": np.int64, "node_splits": np.int64}


# ---------------------------------------------------------------- 1. the dev programs
def _dev_stems() -> list[str]:
    return sorted(p.stem for p in (DEV / "hlo").glob("*.hlo"))


def _npz_files(stem: str) -> list[Path]:
    return sorted((DEV / "npz_all" / "npz" / "layout").glob(f"*/*/*/{stem}.npz"))


def test_every_dev_layout_graph_has_its_hlo(dev_npz):
    npz_stems = {p.stem for p in (dev_npz / "layout").glob("*/*/*/*.npz")}
    assert set(_dev_stems()) == npz_stems
    # 83 programs of the first dev set, and an inference and a training step of each new family
    new = {s for s in npz_stems if graph_family(s) in sum(DEV_NEW_FAMILIES.values(), ())}
    assert len(npz_stems) == 105 and len(new) == 22


@pytest.mark.parametrize("stem", _dev_stems() or ["(no dev data)"])
def test_dev_program_matches_its_npz_files(stem, dev_npz):
    graph = read_hlo(DEV / "hlo" / f"{stem}.hlo")
    files = _npz_files(stem)
    assert len(files) >= 2  # a default and a random file share the program
    for path in files:
        with np.load(path) as z:
            for key in GRAPH_KEYS:
                expected = z[key]
                assert graph[key].dtype == expected.dtype, (path, key)
                assert graph[key].shape == expected.shape, (path, key)
                if key == "node_feat":
                    diff = np.argwhere(graph[key] != expected)
                    assert diff.size == 0, f"{path}: (node, column) differ: {diff[:10].tolist()}"
                else:
                    assert np.array_equal(graph[key], expected), (path, key)


# ---------------------------------------------------------------- 2. hand-checked programs
# Opcode ids (format reference section 5)
PARAMETER, ADD, MAXIMUM, CONVOLUTION, CONSTANT, REDUCE_WINDOW = 63, 2, 57, 26, 24, 72
GTE, BROADCAST, TUPLE, COMPARE, WHILE, REDUCE, RESHAPE = 45, 13, 100, 20, 102, 70, 75
SLICE, PAD, DYNAMIC_SLICE, SORT, IOTA, CONCATENATE, CUSTOM_CALL, AFTER_ALL = \
    92, 62, 35, 93, 48, 22, 31, 4
CONVERT, DOT, SUBTRACT, EXPONENTIAL, DIVIDE = 25, 34, 95, 37, 32
# node_feat columns (section 4.3): one-hot element types, and the products of empty lists,
# which are 1 (with column 28, a scalar's volume).
PRED, S32, F32, BF16, TUPLE_T, TOKEN = 3, 6, 13, 15, 18, 20
ONES = (28, 44, 52, 60, 68, 76, 84, 112, 116, 120, 124, 128, 132)


def row(values: dict[int, float]) -> np.ndarray:
    """The full expected 140 columns of a node: 0 except the products of empty lists (1) and
    the given columns."""
    out = np.zeros(140, np.float32)
    out[list(ONES)] = 1
    for column, value in values.items():
        out[column] = value
    return out


def dims(*sizes, layout=None) -> dict[int, float]:
    """Columns of an array shape: dims 21-26, their sum 27 and product 28, layout 134-139."""
    values = {21 + i: s for i, s in enumerate(sizes)}
    values.update({27: sum(sizes), 28: float(np.prod(sizes))})
    layout = tuple(range(len(sizes) - 1, -1, -1)) if layout is None else layout
    values.update({134 + i: d for i, d in enumerate(layout)})
    return values


def check_rows(graph, expected: dict[int, dict], skip=()):
    for node, values in expected.items():
        got, want = graph["node_feat"][node], row(values)
        bad = [c for c in range(140) if got[c] != want[c] and (node, c) not in skip]
        assert not bad, f"node {node}: columns {bad}: got {got[bad]}, expected {want[bad]}"


def check_arrays(graph, opcodes, edges, config_ids, splits, roots):
    for key, dtype in DTYPES.items():
        assert graph[key].dtype == dtype, key
    assert graph["node_opcode"].tolist() == opcodes
    assert graph["edge_index"].tolist() == sorted(edges)
    assert graph["node_config_ids"].tolist() == config_ids
    assert graph["node_splits"].tolist() == [splits]
    assert graph["node_feat"].shape == (len(opcodes), 140)
    assert np.flatnonzero(graph["node_feat"][:, 0]).tolist() == roots


def test_convolution_window_fields_old_style_names():
    """conv_window.hlo: max_region.1 (nodes 0-2) first, then the entry; the pool's edge goes
    to max_region's root."""
    g = read_hlo(DATA / "conv_window.hlo")
    check_arrays(g, [PARAMETER, PARAMETER, MAXIMUM, PARAMETER, PARAMETER, CONVOLUTION, CONSTANT,
                     REDUCE_WINDOW],
                 [[2, 0], [2, 1], [5, 3], [5, 4], [7, 5], [7, 6], [7, 2]],
                 config_ids=[5], splits=[0, 8], roots=[2, 7])
    conv = {BF16: 1, **dims(2, 2, 7, 4),
            # size 3x3; stride 2x2; pad 1_-1 x 0_1; rhs_dilate (window) 2x1; lhs_dilate (base) 1x2
            37: 3, 38: 3, 43: 6, 44: 9, 45: 2, 46: 2, 51: 4, 52: 4,
            53: 1, 54: 0, 59: 1, 60: 0, 61: -1, 62: 1, 67: 0, 68: -1,
            69: 2, 70: 1, 75: 3, 76: 2, 77: 1, 78: 2, 83: 3, 84: 2,
            85: 0, 86: 1, 91: 1, 92: 1,  # rhs_reversal=0x1: one true, one false
            # b01f_01io->b01f
            93: 0, 94: 3, 95: 1, 96: 2, 99: 2, 100: 3, 101: 0, 102: 1, 105: 0, 106: 3,
            107: 1, 108: 1}  # group counts default to 1 on a convolution
    pool = {0: 1, BF16: 1, **dims(2, 1, 7, 4),
            37: 1, 38: 2, 39: 1, 40: 1, 43: 5, 44: 2, 45: 1, 46: 2, 47: 1, 48: 1, 51: 5, 52: 2,
            60: 0, 68: 0,  # no padding: sums 0, and products of four 0s
            69: 1, 70: 1, 71: 1, 72: 1, 75: 4, 77: 1, 78: 1, 79: 1, 80: 1, 83: 4, 92: 4}
    check_rows(g, {0: {BF16: 1}, 1: {BF16: 1, 30: 1}, 2: {0: 1, BF16: 1},
                   3: {BF16: 1, **dims(2, 8, 8, 3)},
                   4: {BF16: 1, 30: 1, **dims(3, 3, 3, 4)},  # the tiling suffix adds nothing
                   5: conv, 6: {BF16: 1}, 7: pool})


def test_nested_calls_inlined_while_and_reduce_stay_computations():
    """loop_calls.hlo: relu.2 and double_relu.3 are inlined (relu.2 twice); add_region.1,
    while_body.4, cond.5 and the entry are numbered in text order; the while's body and
    condition end node_splits parts (their names hold 'while' and 'cond')."""
    g = read_hlo(DATA / "loop_calls.hlo")
    opcodes = [PARAMETER, PARAMETER, ADD,                                       # add_region.1
               PARAMETER, GTE, CONSTANT, ADD, GTE,                              # while_body.4
               ADD, CONSTANT, BROADCAST, MAXIMUM,                 # inlined double_relu, relu
               TUPLE,
               PARAMETER, GTE, CONSTANT, COMPARE,                               # cond.5
               PARAMETER, CONSTANT, TUPLE, WHILE, GTE,                          # main.6
               CONSTANT, BROADCAST, MAXIMUM,                                    # inlined relu
               CONSTANT, REDUCE, RESHAPE]
    edges = [[2, 0], [2, 1],
             [4, 3], [6, 4], [6, 5], [7, 3], [8, 7],  # add(y, y): one edge
             [10, 9], [11, 8], [11, 10], [12, 6], [12, 11],
             [14, 13], [16, 14], [16, 15],
             [19, 17], [19, 18], [20, 19], [20, 16], [20, 12],  # while -> cond's, body's roots
             [21, 20], [23, 22], [24, 21], [24, 23],
             [26, 24], [26, 25], [26, 2], [27, 26]]             # reduce -> add_region's root
    check_arrays(g, opcodes, edges, config_ids=[27], splits=[0, 13, 17, 28],
                 roots=[2, 12, 16, 27])
    state = {TUPLE_T: 1, 29: 2}
    check_rows(g, {3: state, 12: {0: 1, **state}, 20: state, 19: state,
                   4: {S32: 1}, 16: {0: 1, PRED: 1},
                   11: {F32: 1, **dims(8, 16)},              # an inlined root is no root
                   26: {F32: 1, **dims(8), 31: 1},           # dimensions={1}
                   27: {0: 1, F32: 1, **dims(8, 1)}})


def test_slice_pad_sort_iota_and_other_attributes():
    g = read_hlo(DATA / "misc_ops.hlo")
    opcodes = [PARAMETER, PARAMETER, COMPARE,
               PARAMETER, SLICE, CONSTANT, PAD, PARAMETER, CONSTANT, DYNAMIC_SLICE, SLICE,
               RESHAPE, SORT, IOTA, CONSTANT, CONCATENATE, PARAMETER, CUSTOM_CALL, AFTER_ALL,
               TUPLE]
    edges = [[2, 0], [2, 1], [4, 3], [6, 4], [6, 5], [9, 3], [9, 7], [9, 8], [10, 3],
             [11, 10], [12, 11], [12, 2], [15, 9], [15, 14], [17, 15], [17, 16],
             [19, 4], [19, 6], [19, 9], [19, 12], [19, 13], [19, 17], [19, 18]]
    # Only flat.2 (a reshape from rank 2) is configurable; control predecessors are no edges.
    check_arrays(g, opcodes, edges, config_ids=[11], splits=[0, 20], roots=[2, 19])
    expected = {
        0: {F32: 1}, 1: {F32: 1, 30: 1}, 2: {0: 1, PRED: 1},
        3: {F32: 1, **dims(10, 6)},                      # no layout written: {1,0}
        4: {F32: 1, **dims(3, 5),                        # slice={[1:10:3], [0:5]}
            109: 1, 110: 0, 111: 1, 112: 0, 113: 3, 114: 1, 115: 4, 116: 3,
            117: 10, 118: 5, 119: 15, 120: 50},
        5: {F32: 1},
        6: {F32: 1, **dims(6, 15),                       # padding=1_2x-1_3_2 (interior unused)
            125: 1, 126: -1, 127: 0, 128: -1, 129: 2, 130: 3, 131: 5, 132: 6},
        7: {S32: 1, 30: 1}, 8: {S32: 1},
        9: {F32: 1, **dims(2, 6), 121: 2, 122: 6, 123: 8, 124: 12},
        10: {F32: 1, **dims(10, 1), 112: 0,              # slice={[0:10], [0:1]}
             113: 1, 114: 1, 115: 2, 117: 10, 118: 1, 119: 11, 120: 10},
        11: {F32: 1, **dims(10)},
        12: {F32: 1, **dims(10), 133: 1},                # is_stable=true; dimensions={0}
        13: {S32: 1, **dims(5, 2), 31: 1},               # iota_dimension=1
        14: {F32: 1, **dims(2, 6)},
        15: {F32: 1, **dims(2, 12), 31: 1},              # concatenate dimensions={1}
        16: {30: 2, **dims(4)},                          # f8e4m3fn: outside the one-hot
        17: {F32: 1, **dims(2, 12, layout=(0, 1))},
        18: {TOKEN: 1},
        19: {0: 1, TUPLE_T: 1, 29: 7},
    }
    # The custom-call's group counts (107, 108) follow XLA's ToProto, not the format table.
    check_rows(g, expected, skip={(17, 107), (17, 108)})


def test_program_printed_by_jax_with_metadata_and_stack_frames():
    """jax_conv_dot.hlo, printed by jax 0.10.2 (`as_text(dialect="hlo", debug_info=True)`):
    stack-frame tables, metadata, a jitted block calling a jitted relu (both inlined), a bf16
    convolution, a batched dot, reduces calling three region computations."""
    g = read_hlo(DATA / "jax_conv_dot.hlo")
    opcodes = [PARAMETER, PARAMETER, ADD, PARAMETER, PARAMETER, MAXIMUM, PARAMETER, PARAMETER,
               ADD,                                                   # region_0.3 .. 2.5
               PARAMETER, PARAMETER, CONVOLUTION, CONSTANT, BROADCAST, MAXIMUM,  # x, w, block
               CONVERT, CONSTANT, REDUCE, CONVERT, RESHAPE,
               PARAMETER, PARAMETER, DOT, CONSTANT, REDUCE, CONSTANT, BROADCAST, MAXIMUM,
               RESHAPE, BROADCAST, RESHAPE, BROADCAST, SUBTRACT, EXPONENTIAL, REDUCE,
               RESHAPE, BROADCAST, RESHAPE, BROADCAST, DIVIDE, TUPLE]
    edges = [[2, 0], [2, 1], [5, 3], [5, 4], [8, 6], [8, 7],
             [11, 9], [11, 10], [13, 12], [14, 11], [14, 13], [15, 14],
             [17, 15], [17, 16], [17, 2], [18, 17], [19, 18],
             [22, 20], [22, 21], [24, 22], [24, 23], [24, 5], [26, 25], [27, 24], [27, 26],
             [28, 27], [29, 28], [30, 29], [31, 30], [32, 22], [32, 31], [33, 32],
             [34, 33], [34, 16], [34, 8], [35, 34], [36, 35], [37, 36], [38, 37],
             [39, 33], [39, 38], [40, 19], [40, 39]]
    # the convolution, the dot, and the five reshapes between rank 2 and rank 3
    check_arrays(g, opcodes, edges, config_ids=[11, 19, 22, 28, 30, 35, 37], splits=[0, 41],
                 roots=[2, 5, 8, 40])
    conv = {BF16: 1, **dims(2, 4, 4, 4),
            37: 3, 38: 3, 43: 6, 44: 9, 45: 2, 46: 2, 51: 4, 52: 4, 60: 0,  # pad=0_1x0_1
            61: 1, 62: 1, 67: 2, 68: 1, 69: 1, 70: 1, 75: 2, 77: 1, 78: 1, 83: 2, 92: 2,
            94: 3, 95: 1, 96: 2, 99: 2, 100: 3, 102: 1, 106: 3, 107: 1, 108: 1}
    check_rows(g, {9: {BF16: 1, **dims(2, 8, 8, 3)}, 10: {BF16: 1, 30: 1, **dims(3, 3, 3, 4)},
                   11: conv, 20: {F32: 1, 30: 2, **dims(2, 4, 8)},
                   21: {F32: 1, 30: 3, **dims(2, 5, 8)}, 22: {F32: 1, **dims(2, 4, 5)},
                   17: {F32: 1, **dims(2, 4), 31: 1, 32: 2},   # reduce dimensions={1,2}
                   29: {F32: 1, **dims(2, 4, 1), 32: 1, 33: 2},  # broadcast {0,1,2}
                   40: {0: 1, TUPLE_T: 1, 29: 2}})


def test_xla_dump_of_the_same_program_reads_alike():
    """XLA's --xla_dump_hlo_as_text of that program (% names, computation signatures, operand
    names with %) gives the same arrays."""
    from_jax = read_hlo(DATA / "jax_conv_dot.hlo")
    dumped = read_hlo(DATA / "jax_conv_dot.before_optimizations.txt")
    for key in GRAPH_KEYS:
        assert np.array_equal(from_jax[key], dumped[key]), key


def test_optimized_module_reads_fusions_call_their_computations():
    """The same program after XLA:CPU's optimizations: fusions (`kind=`, `calls=`, JSON
    backend configs) stay nodes, each with an edge to the root of the computation it calls."""
    text = (DATA / "jax_conv_dot.cpu_after_optimizations.txt").read_text()
    g = read_hlo(text)
    fusions = np.flatnonzero(g["node_opcode"] == 41)
    assert fusions.size == text.count(" fusion(")
    roots = set(np.flatnonzero(g["node_feat"][:, 0]).tolist())
    for u in fusions:
        called = [v for user, v in g["edge_index"].tolist() if user == u and v in roots]
        assert len(called) == 1, u


def test_grammar_corners():
    """Values the dev programs never use: iota replica groups with a transpose suffix, strings
    holding braces and commas, `//` comments, an instruction over two lines, an execution thread after a computation, an
    unscheduled async pair, a conditional's branch list, a dynamic dimension."""
    text = """HloModule corners, replica_count=4 // a line comment
add.1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}, execution_thread="main"
neg.2 {
  n = f32[4,4]{1,0} parameter(0)
  ROOT m = f32[4,4]{1,0} negate(n)
}
id.3 {
  ROOT i = f32[4,4]{1,0} parameter(0)
}
ENTRY e {
  x = f32[4,4]{1,0} parameter(0)
  ar = f32[4,4]{1,0} all-reduce(x), channel_id=1, replica_groups=[2,2]<=[4]T(1,0), to_apply=add.1
  k = s32[] parameter(1)
  br = f32[4,4]{1,0} conditional(k, ar, x), branch_computations={neg.2, id.3}
  ROOT d = f32[<=4,4]{1,0} dot(br, x), lhs_contracting_dims={1},
      rhs_contracting_dims={0}, frontend_attributes={a="{}",b="x, y"}
}
"""
    g = read_hlo(text)
    # add.1 (0-2), neg.2 (3-4), id.3 (5), then e: x 6, ar 7, k 8, br 9, d 10
    assert g["node_opcode"].tolist() == [PARAMETER, PARAMETER, ADD, PARAMETER, 60, PARAMETER,
                                         PARAMETER, 5, PARAMETER, 23, DOT]
    assert g["edge_index"].tolist() == sorted(
        [[2, 0], [2, 1], [4, 3], [7, 6], [7, 2], [9, 8], [9, 7], [9, 6], [9, 4], [9, 5],
         [10, 9], [10, 6]])
    assert g["node_config_ids"].tolist() == [10]
    check_rows(g, {10: {0: 1, F32: 1, **dims(4, 4)}})  # a dynamic dim holds its bound


def test_text_path_and_bytes_read_alike():
    path = DATA / "conv_window.hlo"
    by_path, by_text, by_bytes = (read_hlo(path), read_hlo(path.read_text()),
                                  read_hlo(path.read_bytes()))
    for key in GRAPH_KEYS:
        assert np.array_equal(by_path[key], by_text[key])
        assert np.array_equal(by_path[key], by_bytes[key])


def test_write_layout_npz_holds_the_default_config(tmp_path):
    graph = read_hlo(DATA / "jax_conv_dot.hlo")
    path = write_layout_npz(graph, tmp_path / "jax_conv_dot")  # no suffix added
    assert path == tmp_path / "jax_conv_dot"
    assert [p.name for p in tmp_path.iterdir()] == ["jax_conv_dot"]  # no temporary file left
    with np.load(path) as z:
        assert set(z.files) == set(GRAPH_KEYS) | {"node_config_feat", "config_runtime"}
        for key in GRAPH_KEYS:
            assert z[key].dtype == graph[key].dtype and np.array_equal(z[key], graph[key])
        assert z["node_config_feat"].dtype == np.float32
        assert z["node_config_feat"].shape == (1, 7, 18)
        assert (z["node_config_feat"] == -1).all()
        assert z["config_runtime"].dtype == np.int64 and z["config_runtime"].tolist() == [0]
