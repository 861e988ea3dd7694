"""The dataset's facts that every stage reads, each named once: the collections and their kind,
the node_feat columns, and the 8x128 tile a TPU pads tensors to.

Spellings are Kaggle's (`layout:xla:random`); the format reference is shared/tpugraphs_format.md.
"""
from __future__ import annotations

import numpy as np

COLLECTIONS = (
    "tile:xla",
    "layout:xla:default",
    "layout:xla:random",
    "layout:nlp:default",
    "layout:nlp:random",
)
SPLITS = ("train", "valid", "test")


def collection_kind(collection: str) -> str:
    """'tile' or 'layout': which arrays a collection's files hold and how it is scored."""
    return "tile" if collection.startswith("tile") else "layout"


def is_tile(collection: str) -> bool:
    return collection_kind(collection) == "tile"


def program_family(collection: str) -> str:
    """'xla' or 'nlp': the programs a collection holds (its middle word; tile:xla's are xla)."""
    return collection.split(":")[1]


def collection_slug(collection: str) -> str:
    """A collection's name in file and directory names: 'layout:xla:random' -> 'layout-xla-random'."""
    return collection.replace(":", "-")


# ---------------------------------------------------------------- node_feat columns
# Section 4.3 of the format reference. A slice is a list field's 6 slots (0-padded); its sum and
# product, where the encoder writes them, are the two columns after it (empty list: 0 and 1).
N_NODE_FEAT = 140
IS_ROOT = 0
ELEMENT_TYPE = slice(2, 21)           # one-hot: invalid, pred, s8, ... token
ELEMENT_TYPE_F32, ELEMENT_TYPE_BF16 = 13, 15
SHAPE_DIMS = slice(21, 27)            # output dims; rank = how many are non-zero
SHAPE_SUM, SHAPE_PRODUCT, TUPLE_SIZE = 27, 28, 29
PARAMETER_NUMBER = 30
DIMENSIONS = slice(31, 37)            # the `dimensions` attribute; no sum or product
WINDOW_SIZE, WINDOW_SIZE_SUM, WINDOW_SIZE_PRODUCT = slice(37, 43), 43, 44
WINDOW_STRIDE, WINDOW_STRIDE_SUM, WINDOW_STRIDE_PRODUCT = slice(45, 51), 51, 52
WINDOW_DILATION, WINDOW_DILATION_SUM, WINDOW_DILATION_PRODUCT = slice(69, 75), 75, 76
BASE_DILATION, BASE_DILATION_SUM, BASE_DILATION_PRODUCT = slice(77, 83), 83, 84
WINDOW_REVERSAL_FALSE_COUNT = 92
# Convolution dimension numbers: which dim of the input / kernel / output plays which part
CONV_DIM_NUMBERS = slice(93, 107)
CONV_INPUT_BATCH, CONV_INPUT_FEATURE = 93, 94
CONV_KERNEL_INPUT_FEATURE, CONV_KERNEL_OUTPUT_FEATURE = 99, 100
CONV_KERNEL_SPATIAL = slice(101, 105)
CONV_OUTPUT_BATCH, CONV_OUTPUT_FEATURE = 105, 106
FEATURE_GROUP_COUNT, BATCH_GROUP_COUNT = 107, 108
# Products of an empty list are 1, not 0: window size/stride/padding/dilations, slice and pad
PRODUCT_COLUMNS = (44, 52, 60, 68, 76, 84, 112, 116, 120, 124, 128, 132)
LAYOUT = slice(134, 140)              # layout_minor_to_major: dim indices, 0-padded (section 3.2)
# A dimension index takes only 0..5 (six slots); the feature kernels index by them.
MAX_DIM_INDEX = 5
# The rest of the columns, for the HLO reader (features/hlo), in the same style.
# The one-hot's element types in column order (featurizers.h PRIMITIVE_TYPE_FEATURES), spelled
# as HLO text spells them; any other type (s4, f8e4m3fn, ...) leaves all 19 columns 0.
ELEMENT_TYPE_NAMES = ("invalid", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                      "f16", "f32", "f64", "bf16", "c64", "c128", "tuple", "opaque", "token")
WINDOW_PADDING_LOW, WINDOW_PADDING_LOW_SUM, WINDOW_PADDING_LOW_PRODUCT = slice(53, 59), 59, 60
WINDOW_PADDING_HIGH, WINDOW_PADDING_HIGH_SUM, WINDOW_PADDING_HIGH_PRODUCT = slice(61, 67), 67, 68
WINDOW_REVERSAL, WINDOW_REVERSAL_TRUE_COUNT = slice(85, 91), 91   # 0/1 per window dim
CONV_INPUT_SPATIAL = slice(95, 99)    # 4 slots, no sum or product
# Slice, dynamic-slice and pad fields keep only 2 slots, then the sum and product.
SLICE_START, SLICE_START_SUM, SLICE_START_PRODUCT = slice(109, 111), 111, 112
SLICE_STRIDE, SLICE_STRIDE_SUM, SLICE_STRIDE_PRODUCT = slice(113, 115), 115, 116
SLICE_LIMIT, SLICE_LIMIT_SUM, SLICE_LIMIT_PRODUCT = slice(117, 119), 119, 120
DYNAMIC_SLICE_SIZES = slice(121, 123)
DYNAMIC_SLICE_SIZES_SUM, DYNAMIC_SLICE_SIZES_PRODUCT = 123, 124
PAD_LOW, PAD_LOW_SUM, PAD_LOW_PRODUCT = slice(125, 127), 127, 128    # interior padding not kept
PAD_HIGH, PAD_HIGH_SUM, PAD_HIGH_PRODUCT = slice(129, 131), 131, 132
IS_STABLE = 133                       # sort's is_stable


# ---------------------------------------------------------------- node_opcode ids
# Section 5 of the format reference (the encoder's LEARNED_HLO_OPCODE_LIST): id i is
# OPCODE_NAMES[i - 1]; 0 is an opcode outside the table. 97 and 101 are tombstones (trace,
# tuple-select): no current XLA prints them.
OPCODE_NAMES = (
    "abs", "add", "add-dependency", "after-all", "all-reduce", "all-to-all", "atan2",
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast",
    "bitcast-convert", "broadcast", "call", "ceil", "cholesky", "clamp", "collective-permute",
    "count-leading-zeros", "compare", "complex", "concatenate", "conditional", "constant",
    "convert", "convolution", "copy", "copy-done", "copy-start", "cosine", "custom-call",
    "divide", "domain", "dot", "dynamic-slice", "dynamic-update-slice", "exponential",
    "exponential-minus-one", "fft", "floor", "fusion", "gather", "get-dimension-size",
    "set-dimension-size", "get-tuple-element", "imag", "infeed", "iota", "is-finite", "log",
    "log-plus-one", "and", "not", "or", "xor", "map", "maximum", "minimum", "multiply", "negate",
    "outfeed", "pad", "parameter", "partition-id", "popcnt", "power", "real", "recv", "recv-done",
    "reduce", "reduce-precision", "reduce-window", "remainder", "replica-id", "reshape",
    "reverse", "rng", "rng-get-and-update-state", "rng-bit-generator", "round-nearest-afz",
    "rsqrt", "scatter", "select", "select-and-scatter", "send", "send-done", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt",
    "subtract", "tanh", "trace", "transpose", "triangular-solve", "tuple", "tuple-select",
    "while", "cbrt", "all-gather", "collective-permute-start", "collective-permute-done",
    "logistic", "dynamic-reshape", "all-reduce-start", "all-reduce-done", "reduce-scatter",
    "all-gather-start", "all-gather-done", "opt-barrier", "async-start", "async-update",
    "async-done", "round-nearest-even", "stochastic-convert", "tan",
)
OPCODE_IDS = {name: i for i, name in enumerate(OPCODE_NAMES, start=1)}
# XLA opcodes (HloOpcode, xla/hlo/ir/hlo_opcode.h, as HLO text prints them) the table above lacks:
# XLA's parser reads them, so a program holding one is read, each a node of id 0 and a warning;
# an opcode in neither is an error, as XLA's parser makes it (a misspelling, not a program).
XLA_OPCODES_OUTSIDE_TABLE = frozenset({
    "collective-broadcast", "erf", "ragged-all-to-all", "ragged-dot", "topk",
})
KNOWN_OPCODES = frozenset(OPCODE_NAMES) | XLA_OPCODES_OUTSIDE_TABLE
# XLA prints an async-wrapped op as its own name with one of these (all-to-all-start).
ASYNC_SUFFIXES = ("-start", "-update", "-done")
UNKNOWN_OPCODE = 0
MAX_OPCODE = len(OPCODE_NAMES)
CONVOLUTION, DOT, RESHAPE = OPCODE_IDS["convolution"], OPCODE_IDS["dot"], OPCODE_IDS["reshape"]
PARAMETER, TRANSPOSE = OPCODE_IDS["parameter"], OPCODE_IDS["transpose"]
# Only these are configurable in layout files (section 3.2).
CONFIGURABLE_OPCODES = (CONVOLUTION, DOT, RESHAPE)
# Which of those nodes are: only the entry computation's, and a reshape only when its input or
# its output has at least this rank (tpugraphs_dev/hlo/README.md; the npz files agree).
CONFIGURABLE_RESHAPE_MIN_RANK = 2
# node_splits (section 3.4): a boundary after each computation whose name holds one of these.
SPLIT_COMPUTATION_MARKERS = ("cluster", "while", "cond")


# ---------------------------------------------------------------- keys and config widths
# Sections 2.1, 2.2, 3.1 and 3.2: the arrays of each kind of file, and the width of a config row.
TILE_KEYS = ("node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime",
             "config_runtime_normalizers")
LAYOUT_KEYS = ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_config_feat",
               "config_runtime", "node_splits")
# What a graph is without its configs: the keys a caller passes to rank a candidate config.
GRAPH_KEYS = tuple(k for k in LAYOUT_KEYS if k not in ("node_config_feat", "config_runtime"))
N_TILE_CONFIG_FEAT = 24
SLOT_GROUP = 6                         # a layout slot group: output, input or kernel, 6 dims each
SLOT_GROUPS = ("output", "input", "kernel")
N_LAYOUT_CONFIG_FEAT = SLOT_GROUP * len(SLOT_GROUPS)   # 18


# ---------------------------------------------------------------- 8x128 tiles
# A TPU stores a tensor in 8x128 tiles over its two most-minor dims (section 7 of solutions.md):
# the minor-most dim is padded to a multiple of 128, the next to a multiple of 8.
TILE_MINOR, TILE_SECOND_MINOR = 128, 8


def tiled_extent(size, tile: int):
    """size (a dim's length, scalar or array) rounded up to whole tiles of `tile` elements:
    TILE_MINOR for the minor-most dim, TILE_SECOND_MINOR for the next."""
    return np.ceil(size / tile) * tile


def is_xla_opcode(name: str) -> bool:
    """Whether XLA's parser reads `name` as an opcode: a known one, or one wrapped async."""
    if name in KNOWN_OPCODES:
        return True
    return any(name.endswith(s) and name[:-len(s)] in KNOWN_OPCODES for s in ASYNC_SUFFIXES)
