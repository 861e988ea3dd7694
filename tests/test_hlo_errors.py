"""The HLO reader on bad input: every problem is an HloFormatError naming file, line and what
is wrong (or a warning, for an opcode outside the table), never an exception from inside."""
from __future__ import annotations

import random
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from features.hlo import (HloFormatError, NoConfigurableNodeError, UnknownOpcodeWarning,
                          read_hlo)

from .conftest import DEV

DATA = Path(__file__).parent / "data" / "hlo"

GOOD = """HloModule m

ENTRY main.1 {
  p.1 = f32[4,8]{1,0} parameter(0)
  q.1 = f32[8,2]{1,0} parameter(1)
  ROOT dot.1 = f32[4,2]{1,0} dot(p.1, q.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def write(tmp_path, text: str, name: str = "model.hlo") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(source) -> HloFormatError:
    with pytest.raises(HloFormatError) as info:
        read_hlo(source)
    return info.value


def test_the_good_module_reads():
    assert read_hlo(GOOD)["node_opcode"].tolist() == [63, 63, 34]


def test_unknown_operand_names_file_line_and_instruction(tmp_path):
    text = GOOD.replace("dot(p.1, q.1)", "dot(p.1, foo.3)").replace("dot.1 =", "add.7 =")
    path = write(tmp_path, text)
    e = error_of(path)
    assert str(e) == f"{path}:6: unknown operand %foo.3 in instruction %add.7"
    assert (e.filename, e.line) == (str(path), 6)


def test_not_hlo_text(tmp_path):
    e = error_of(write(tmp_path, "def f(x):\n    return x\n", "f.py"))
    assert e.line == 1 and "HloModule" in str(e)
    e = error_of(write(tmp_path, "\n\n# a comment\nHloModule m\n", "g.hlo"))
    assert e.line == 3


def test_truncated_module(tmp_path):
    lines = GOOD.splitlines(keepends=True)
    e = error_of(write(tmp_path, "".join(lines[:5])))  # the computation is never closed
    assert e.line == 6 and "truncated" in str(e) and "main.1" in str(e)
    e = error_of(write(tmp_path, GOOD[:GOOD.index("={1}") + 2]))  # inside a {...}
    assert e.line == 6 and "never closed" in str(e)
    e = error_of(write(tmp_path, "HloModule m\n"))
    assert "no computation" in str(e)


def test_no_configurable_node(tmp_path):
    text = GOOD.replace("dot(p.1, q.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                        "add(p.1, p.1)").replace("f32[4,2]{1,0} ", "f32[4,8]{1,0} ")
    with pytest.raises(NoConfigurableNodeError, match="no configurable node in entry "
                                                      "computation %main.1"):
        read_hlo(write(tmp_path, text))
    # a rank-1 reshape is not configurable either
    text = GOOD.replace("ROOT dot.1 = f32[4,2]{1,0} dot(p.1, q.1), lhs_contracting_dims={1}, "
                        "rhs_contracting_dims={0}", "r.1 = f32[32]{0} parameter(2)\n"
                        "  ROOT s.1 = f32[32]{0} reshape(r.1)")
    with pytest.raises(NoConfigurableNodeError):
        read_hlo(text)


@pytest.mark.parametrize("opcode", ["erf", "all-to-all-start", "ragged-all-to-all-done"])
def test_an_xla_opcode_outside_the_table_warns_and_is_a_node_of_id_0(tmp_path, opcode):
    """Also an op XLA prints async-wrapped (its name and -start / -update / -done), as an
    XLA:GPU dump holds them."""
    text = GOOD.replace("q.1 = f32[8,2]{1,0} parameter(1)",
                        "q.0 = f32[8,2]{1,0} parameter(1)\n"
                        f"  q.1 = f32[8,2]{{1,0}} {opcode}(q.0)")
    path = write(tmp_path, text)
    with pytest.warns(UnknownOpcodeWarning, match=rf"{re.escape(str(path))}:6: opcode "
                                                  rf"'{opcode}'"):
        graph = read_hlo(path)
    assert graph["node_opcode"].tolist() == [63, 63, 0, 34]


def test_an_opcode_xla_does_not_know_is_an_error_naming_file_line_and_opcode(tmp_path):
    """A misspelling is not a program: XLA's parser refuses it, and so does this reader, where
    it once warned and dropped a configurable node."""
    text = GOOD.replace("{1,0} dot(p.1", "{1,0} convolutionz(p.1")
    path = write(tmp_path, text)
    with pytest.raises(HloFormatError, match=rf"^{re.escape(str(path))}:6: unknown opcode "
                                             r"'convolutionz' in instruction %dot.1"):
        read_hlo(path)


@pytest.mark.slow
def test_every_opcode_of_the_dev_programs_is_read(dev_npz):
    """The dev set's HLO text (topk among its opcodes, outside the table) reads without error."""
    from features.hlo.parse import parse_module
    from features.hlo.source_text import Source
    from features.schema import KNOWN_OPCODES
    opcodes = {inst.opcode for f in sorted((dev_npz.parents[1] / "hlo").glob("*.hlo"))
               for c in parse_module(Source(f.read_text(), str(f))).computations
               for inst in c.instructions}
    assert "topk" in opcodes and opcodes <= KNOWN_OPCODES


@pytest.mark.parametrize("old, new, line, message", [
    ("f32[4,8]{1,0} parameter(0)", "f33[4,8]{1,0} parameter(0)", 4, "unknown element type 'f33'"),
    ("f32[4,8]{1,0} parameter(0)", "f32[4,8]{2,0} parameter(0)", 4, "layout {2,0} does not fit"),
    ("f32[4,8]{1,0} parameter(0)", "f32[4,x]{1,0} parameter(0)", 4, "bad dimension size 'x'"),
    ("parameter(0)", "parameter(p)", 4, "expected a parameter number"),
    ("parameter(0)", "parameter(9223372036854775808)", 4, "does not fit in 64 bits"),
    ("q.1 = f32", "p.1 = f32", 5, "instruction %p.1 is defined twice"),
    ("dot(p.1, q.1)", "dot(p.1, dot.1)", 6, "operand used before its definition: %dot.1"),
    ("ROOT dot.1", "ROOT dot.1 = ", 6, "expected a shape"),
    ("q.1 = f32[8,2]{1,0} parameter(1)", "ROOT q.1 = f32[8,2]{1,0} parameter(1)", 6,
     "a second ROOT"),
    ("rhs_contracting_dims={0}", 'rhs_contracting_dims={0}, metadata={op_name="x}', 6,
     "unterminated string"),
    ("rhs_contracting_dims={0}", 'rhs_contracting_dims={0}, metadata={op_name="x"', 8,
     "expected '}' to close computation %main.1, found the end of the text (truncated?)"),
    ("rhs_contracting_dims={0}", 'rhs_contracting_dims={0}, op_name="x, y', 6,
     "unterminated string"),
    ("rhs_contracting_dims={0}", "rhs_contracting_dims={0}, to_apply=nowhere.9", 6,
     "unknown computation %nowhere.9 called by instruction %dot.1"),
    ("rhs_contracting_dims={0}", "rhs_contracting_dims={0}, dimensions={1,x}", 6,
     "instruction %dot.1: expected an integer"),
    ("ENTRY main.1 {", "ENTRY main.1 {\n  /* never closed", 4, "unterminated /* comment"),
])
def test_malformed_instructions(tmp_path, old, new, line, message):
    assert old in GOOD
    e = error_of(write(tmp_path, GOOD.replace(old, new, 1)))
    assert e.line == line and message in str(e), str(e)


@pytest.mark.parametrize("attribute, message", [
    ("window={size=3x3 stride=2}", "window stride= has 1 entries, size= has 2"),
    ("window={size=3x3 pad=1x1}", "window pad '1' is not low_high"),
    ("window={size=3x3 flip=1x1}", "unknown window field 'flip=1x1'"),
    ("dim_labels=b01f_01io->b0f", "'b01f_01io->b0f' has 2 spatial dimensions in the input"),
    ("dim_labels=b01f-01io->b01f", "expected dim labels"),
    ("dim_labels=b02f_01io->b01f", "spatial dimensions of 'b02f' are not 0..1"),
])
def test_malformed_convolution_attributes(attribute, message):
    text = f"""HloModule m
ENTRY e {{
  x = f32[1,5,5,1]{{3,2,1,0}} parameter(0)
  w = f32[3,3,1,1]{{3,2,1,0}} parameter(1)
  ROOT c = f32[1,3,3,1]{{3,2,1,0}} convolution(x, w), {attribute}
}}
"""
    e = error_of(text)
    assert e.line == 5 and message in str(e) and "%c" in str(e), str(e)


def test_call_problems():
    text = """HloModule m
f.1 {
  a.1 = f32[2,2]{1,0} parameter(0)
  ROOT b.1 = f32[2,2]{1,0} call(a.1), to_apply=f.1
}
ENTRY e {
  x = f32[2,2]{1,0} parameter(0)
  ROOT y = f32[2,2]{1,0} call(x), to_apply=f.1
}
"""
    e = error_of(text)
    assert e.line == 4 and "computation %f.1 calls itself" in str(e)
    e = error_of(text.replace("call(a.1), to_apply=f.1", "negate(a.1)")
                 .replace("call(x), to_apply=f.1", "call(x, x), to_apply=f.1"))
    assert e.line == 8 and "call %y passes 2 operand(s) but %f.1 has parameters [0]" in str(e)


def test_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "b.hlo"
    path.write_bytes(GOOD.encode()[:30] + b"\n\xff\xfe")
    e = error_of(path)
    assert e.line == 5 and "not UTF-8" in str(e)  # 3 newlines in the 30 bytes, then one


# ---------------------------------------------------------------- fuzzing
def _fuzz_sources() -> list[str]:
    texts = [p.read_text() for p in sorted(DATA.glob("*.hlo"))]
    dev = DEV / "hlo" / "vgg16_batch_8_test.hlo"
    return texts + ([dev.read_text()] if dev.is_file() else [])


def _mutations(rng: random.Random, text: str):
    """Truncated copies, copies with a few characters changed, a piece cut out."""
    alphabet = "{}()[],=%:\"'/*->x_. \n0123456789ROOTENTRYparameter"
    yield text[:rng.randrange(len(text))]
    chars = list(text)
    for _ in range(rng.randrange(1, 6)):
        at = rng.randrange(len(chars))
        kind = rng.randrange(3)
        if kind == 0:
            del chars[at]
        elif kind == 1:
            chars.insert(at, rng.choice(alphabet))
        else:
            chars[at] = rng.choice(alphabet)
    yield "".join(chars)
    cut = rng.randrange(len(text))
    yield text[:cut] + text[cut + rng.randrange(1, 400):]


def test_fuzzed_text_only_raises_format_errors():
    rng = random.Random(38)
    texts = _fuzz_sources()
    cases = [m for _ in range(120) for m in _mutations(rng, rng.choice(texts))]
    cases += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) for _ in range(60)]
    cases += ["HloModule m\n" + "".join(rng.choice("{}()[],=%: \nabc01_.-/*\"")
                                       for _ in range(rng.randrange(200))) for _ in range(60)]
    read = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownOpcodeWarning)
        for case in cases:
            if isinstance(case, str) and "\n" not in case:
                case += "\n"  # keep it text, not a path
            try:
                graph = read_hlo(case)
            except HloFormatError as e:
                assert re.match(r"<(text|bytes)>:\d+: \S", str(e)), str(e)
                continue
            read += 1
            assert graph["node_feat"].shape == (graph["node_opcode"].size, 140)
            assert np.isfinite(graph["node_feat"]).all()
    assert read < len(cases)  # most fail, and none other than as a format error
