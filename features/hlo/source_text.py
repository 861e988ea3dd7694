"""The text being read and its name, so any stage can turn a character offset into
`file:line: problem`."""
from __future__ import annotations

import bisect
import os
from pathlib import Path

from features.hlo.errors import HloFormatError


class Source:
    """HLO text plus the file name errors carry; line numbers are found only when needed."""

    def __init__(self, text: str, filename: str = "<text>"):
        self.text, self.filename = text, filename
        self._line_starts: list[int] | None = None

    def line(self, pos: int) -> int:
        if self._line_starts is None:  # built on the first error or warning only
            text = self.text
            starts, at = [0], text.find("\n")
            while at >= 0:
                starts.append(at + 1)
                at = text.find("\n", at + 1)
            self._line_starts = starts
        return bisect.bisect_right(self._line_starts, pos)

    def error(self, pos: int, problem: str) -> HloFormatError:
        return HloFormatError(self.filename, self.line(pos), problem)


def load_source(source) -> Source:
    """A path (str or PathLike), the text itself (a str holding a newline or starting with
    `HloModule`), or bytes -> Source. Bytes that are not UTF-8 are a format error, not a
    UnicodeDecodeError from deep inside."""
    if isinstance(source, (bytes, bytearray)):
        return Source(_decode(bytes(source), "<bytes>"), "<bytes>")
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("HloModule")):
        return Source(source, "<text>")
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"expected a path, HLO text or bytes, got {type(source).__name__}")
    path = Path(source)
    return Source(_decode(path.read_bytes(), str(source)), str(source))


def _decode(data: bytes, filename: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        problem = f"not UTF-8 text (byte 0x{data[e.start]:02x})"
        raise HloFormatError(filename, line, problem) from None
