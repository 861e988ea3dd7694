"""Instructions -> the 140 node_feat columns, as the TpuGraphs encoder fills them
(featurizers.h FeaturizeHloInstruction with FEATURE_OP_NON_ZERO; format reference section 4).

Values are assembled as int64 and cast to float32 once at the end, as the encoder's
static_cast<float>(int64) does; sums and products wrap at 64 bits as its int64_t arithmetic does.
The shape columns depend only on the shape, so they are made once per distinct shape.
"""
from __future__ import annotations

import math

import numpy as np

from features import schema as S
from features.hlo import attributes as A
from features.hlo.parse import Instruction
from features.hlo.shapes import Shape

_ONE_HOT = {name: S.ELEMENT_TYPE.start + i for i, name in enumerate(S.ELEMENT_TYPE_NAMES)}
# XLA's ToProto writes the group counts (default 1) only for a convolution and, in recent XLA,
# a custom-call (which may hold a convolution); every other node keeps 0. The dev data has no
# custom-call, so that second case is XLA's source, not a checked fact.
_GROUP_COUNT_OPCODES = ("convolution", "custom-call")


def wrap64(value: int) -> int:
    """An int64_t's value after C++ arithmetic that may have overflowed."""
    return (value + 2 ** 63) % 2 ** 64 - 2 ** 63


def node_features(nodes: list[Instruction], roots: list[int]) -> np.ndarray:
    """float32 (len(nodes), 140): row i describes nodes[i]; roots: node indices of the roots of
    their computations. Raises attributes.BadAttribute (the caller knows file and line) with
    the failing node's index in `.node`."""
    table, rows, index = [], {}, []
    for inst in nodes:
        k = rows.get(inst.shape)
        if k is None:
            k = rows[inst.shape] = len(table)
            table.append(shape_columns(inst.shape))
        index.append(k)
    feat = np.array(table, np.int64).reshape(-1, S.N_NODE_FEAT)[index]
    for i, inst in enumerate(nodes):
        if inst.attrs or inst.parameter_number is not None or \
                inst.opcode in _GROUP_COUNT_OPCODES:
            try:
                instruction_columns(inst, feat[i])
            except A.BadAttribute as e:
                e.node = i
                raise
    feat[roots, S.IS_ROOT] = 1
    return feat.astype(np.float32)


def shape_columns(shape: Shape) -> list[int]:
    """The columns a node's output shape decides: type one-hot, dims, tuple size, layout; plus
    the 1s every empty list's product takes."""
    row = [0] * S.N_NODE_FEAT
    for c in S.PRODUCT_COLUMNS:
        row[c] = 1
    if shape.element_type in _ONE_HOT:
        row[_ONE_HOT[shape.element_type]] = 1
    _slots(row, S.SHAPE_DIMS, shape.dims)
    row[S.SHAPE_SUM] = wrap64(sum(shape.dims))
    row[S.SHAPE_PRODUCT] = wrap64(math.prod(shape.dims))
    row[S.TUPLE_SIZE] = shape.tuple_size
    _slots(row, S.LAYOUT, shape.layout)
    return row


def instruction_columns(inst: Instruction, row) -> None:
    """Fills the columns that come from the instruction's own fields into row (int64, 140)."""
    attrs = inst.attrs
    if inst.parameter_number is not None:
        row[S.PARAMETER_NUMBER] = inst.parameter_number
    if "dimensions" in attrs:
        _slots(row, S.DIMENSIONS, A.int_list(attrs["dimensions"]))
    elif "iota_dimension" in attrs:  # iota keeps its dimension in the same proto field
        row[S.DIMENSIONS.start] = A.integer(attrs["iota_dimension"])
    if "window" in attrs:
        window_columns(A.window(attrs["window"]), row)
    if "dim_labels" in attrs:
        convolution_columns(A.dim_labels(attrs["dim_labels"]), row)
    if inst.opcode in _GROUP_COUNT_OPCODES:
        row[S.FEATURE_GROUP_COUNT] = A.integer(attrs.get("feature_group_count", "1"))
        row[S.BATCH_GROUP_COUNT] = A.integer(attrs.get("batch_group_count", "1"))
    if "slice" in attrs:
        start, limit, stride = _columns_of(A.slices(attrs["slice"]), 3)
        _aggregated(row, start, S.SLICE_START, S.SLICE_START_SUM, S.SLICE_START_PRODUCT)
        _aggregated(row, stride, S.SLICE_STRIDE, S.SLICE_STRIDE_SUM, S.SLICE_STRIDE_PRODUCT)
        _aggregated(row, limit, S.SLICE_LIMIT, S.SLICE_LIMIT_SUM, S.SLICE_LIMIT_PRODUCT)
    if "dynamic_slice_sizes" in attrs:
        _aggregated(row, A.int_list(attrs["dynamic_slice_sizes"]), S.DYNAMIC_SLICE_SIZES,
                    S.DYNAMIC_SLICE_SIZES_SUM, S.DYNAMIC_SLICE_SIZES_PRODUCT)
    if inst.opcode == "pad" and "padding" in attrs:
        low, high, _interior = _columns_of(A.padding(attrs["padding"]), 3)
        _aggregated(row, low, S.PAD_LOW, S.PAD_LOW_SUM, S.PAD_LOW_PRODUCT)
        _aggregated(row, high, S.PAD_HIGH, S.PAD_HIGH_SUM, S.PAD_HIGH_PRODUCT)
    if "is_stable" in attrs:
        row[S.IS_STABLE] = int(A.boolean(attrs["is_stable"]))


def window_columns(dims: tuple, row) -> None:
    size, stride, low, high, dilation, base, reversal = _columns_of(dims, 7)
    _aggregated(row, size, S.WINDOW_SIZE, S.WINDOW_SIZE_SUM, S.WINDOW_SIZE_PRODUCT)
    _aggregated(row, stride, S.WINDOW_STRIDE, S.WINDOW_STRIDE_SUM, S.WINDOW_STRIDE_PRODUCT)
    _aggregated(row, low, S.WINDOW_PADDING_LOW, S.WINDOW_PADDING_LOW_SUM,
                S.WINDOW_PADDING_LOW_PRODUCT)
    _aggregated(row, high, S.WINDOW_PADDING_HIGH, S.WINDOW_PADDING_HIGH_SUM,
                S.WINDOW_PADDING_HIGH_PRODUCT)
    _aggregated(row, dilation, S.WINDOW_DILATION, S.WINDOW_DILATION_SUM,
                S.WINDOW_DILATION_PRODUCT)
    _aggregated(row, base, S.BASE_DILATION, S.BASE_DILATION_SUM, S.BASE_DILATION_PRODUCT)
    _slots(row, S.WINDOW_REVERSAL, [int(r != 0) for r in reversal])
    row[S.WINDOW_REVERSAL_TRUE_COUNT] = sum(r != 0 for r in reversal)
    row[S.WINDOW_REVERSAL_FALSE_COUNT] = sum(r == 0 for r in reversal)


def convolution_columns(labels: dict, row) -> None:
    row[S.CONV_INPUT_BATCH] = labels["input_batch"]
    row[S.CONV_INPUT_FEATURE] = labels["input_feature"]
    _slots(row, S.CONV_INPUT_SPATIAL, labels["input_spatial"])
    row[S.CONV_KERNEL_INPUT_FEATURE] = labels["kernel_input_feature"]
    row[S.CONV_KERNEL_OUTPUT_FEATURE] = labels["kernel_output_feature"]
    _slots(row, S.CONV_KERNEL_SPATIAL, labels["kernel_spatial"])
    row[S.CONV_OUTPUT_BATCH] = labels["output_batch"]
    row[S.CONV_OUTPUT_FEATURE] = labels["output_feature"]


def _columns_of(records: tuple, width: int) -> list[tuple]:
    """Per-dimension records -> one tuple per field (empty tuples when there are none)."""
    return list(zip(*records)) if records else [()] * width


def _slots(row, columns: slice, values) -> None:
    """The first values into the slots of `columns`; the rest of the slots stay 0."""
    values = list(values)[:columns.stop - columns.start]
    row[columns.start:columns.start + len(values)] = values


def _aggregated(row, values, slots: slice, sum_column: int, product_column: int) -> None:
    """The first values into slots, and the sum and product of all of them (empty: 0 and 1)."""
    _slots(row, slots, values)
    row[sum_column] = wrap64(sum(values))
    row[product_column] = wrap64(math.prod(values))
