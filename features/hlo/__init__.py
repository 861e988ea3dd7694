"""HLO text -> TpuGraphs layout graph arrays (issue 38): a user's own XLA program, printed by
`jax.jit(f).lower(*args).as_text(dialect="hlo")` or dumped by `--xla_dump_hlo_as_text`, becomes
the graph part of a layout npz file, encoded as the dataset's encoder does.

    graph = read_hlo("model.hlo")        # node_opcode, node_feat, edge_index, node_config_ids,
    write_layout_npz(graph, "model.npz")  # node_splits; the file adds the all-default config

parse.py reads the text, featurize.py makes the 140 columns, encode.py numbers nodes and edges.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from features.hlo.encode import NoConfigurableNodeError, encode_module
from features.hlo.errors import HloFormatError, UnknownOpcodeWarning
from features.hlo.layout_file import write_layout_npz
from features.outputs import OutputPathError, check_file as check_output_path
from features.hlo.parse import Module, parse_module
from features.hlo.source_text import load_source

__all__ = ["HloFormatError", "NoConfigurableNodeError", "OutputPathError", "UnknownOpcodeWarning",
           "check_output_path", "encode_file", "parse_hlo", "read_hlo", "write_layout_npz"]


def parse_hlo(path_or_text: str | os.PathLike | bytes) -> Module:
    """The module's computations and instructions, before any encoding (see parse.py)."""
    return parse_module(load_source(path_or_text))


def read_hlo(path_or_text: str | os.PathLike | bytes) -> dict[str, np.ndarray]:
    """A path, HLO text (a str with a newline or starting with `HloModule`) or bytes -> the
    five graph arrays of a layout file: node_opcode (uint8, n), node_feat (float32, n x 140),
    edge_index (int64, m x 2), node_config_ids (int64), node_splits (int64, 1 x s).

    Raises HloFormatError (file:line: what is wrong) on text that does not read, and its
    subclass NoConfigurableNodeError when the entry has nothing to configure; warns
    UnknownOpcodeWarning for an opcode outside the dataset's table (encoded as id 0)."""
    return encode_module(parse_hlo(path_or_text))


def encode_file(program: str | os.PathLike,
                out: str | os.PathLike) -> tuple[Path, dict[str, np.ndarray]]:
    """`pipeline.py encode`: the program's layout file at `out`, and its graph. `out` is checked
    before the program is read (OutputPathError), so a bad place fails at once, and nothing is
    written unless the whole program reads."""
    out = check_output_path(out)
    graph = read_hlo(Path(program))   # a Path: a file name is never taken for HLO text
    return write_layout_npz(graph, out), graph
