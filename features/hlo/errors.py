"""The reader's two complaints: text it cannot read (an error, an opcode XLA does not know
among them) and an XLA opcode outside the dataset's table (a warning: the encoder files it under
id 0 and goes on)."""
from __future__ import annotations


class HloFormatError(ValueError):
    """Text that is not a readable HLO module: says which file, which line and what is wrong,
    as `model.hlo:123: unknown operand %foo.3 in instruction %add.7`."""

    def __init__(self, filename: str, line: int, problem: str):
        self.filename, self.line, self.problem = filename, line, problem
        super().__init__(f"{filename}:{line}: {problem}")


class UnknownOpcodeWarning(UserWarning):
    """An XLA opcode the TpuGraphs table does not list; its node gets id 0, as the encoder
    does."""
