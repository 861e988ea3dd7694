"""A large HLO module as text, for timing the HLO reader (`bench`): a residual CNN of
convolutions, elementwise ops, reshapes and dots, printed in the style of XLA's HLO text (operand
shapes, layouts, window and dimension attributes). Its size is set by the block count."""
from __future__ import annotations

# One block: conv -> bias add -> relu -> residual add -> a head of reshape + dot + reshape.
BLOCK = """\
  %w{i} = f32[3,3,{c},{c}]{{3,2,1,0}} parameter({p})
  %conv{i} = f32[8,16,16,{c}]{{3,2,1,0}} convolution(f32[8,16,16,{c}]{{3,2,1,0}} %x{prev}, \
f32[3,3,{c},{c}]{{3,2,1,0}} %w{i}), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f
  %b{i} = f32[{c}]{{0}} constant({{...}})
  %bb{i} = f32[8,16,16,{c}]{{3,2,1,0}} broadcast(f32[{c}]{{0}} %b{i}), dimensions={{3}}
  %add{i} = f32[8,16,16,{c}]{{3,2,1,0}} add(f32[8,16,16,{c}]{{3,2,1,0}} %conv{i}, \
f32[8,16,16,{c}]{{3,2,1,0}} %bb{i})
  %zero{i} = f32[] constant(0)
  %zb{i} = f32[8,16,16,{c}]{{3,2,1,0}} broadcast(f32[] %zero{i}), dimensions={{}}
  %relu{i} = f32[8,16,16,{c}]{{3,2,1,0}} maximum(f32[8,16,16,{c}]{{3,2,1,0}} %add{i}, \
f32[8,16,16,{c}]{{3,2,1,0}} %zb{i})
  %x{i} = f32[8,16,16,{c}]{{3,2,1,0}} add(f32[8,16,16,{c}]{{3,2,1,0}} %relu{i}, \
f32[8,16,16,{c}]{{3,2,1,0}} %x{prev})
  %flat{i} = f32[2048,{c}]{{1,0}} reshape(f32[8,16,16,{c}]{{3,2,1,0}} %x{i})
  %proj{i} = f32[2048,{c}]{{1,0}} dot(f32[2048,{c}]{{1,0}} %flat{i}, f32[{c},{c}]{{1,0}} %q), \
lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  %head{i} = f32[8,256,{c}]{{2,1,0}} reshape(f32[2048,{c}]{{1,0}} %proj{i})
"""
INSTRUCTIONS_PER_BLOCK = 12
CHANNELS = 32


def synthetic_hlo(blocks: int) -> str:
    """The module's text: `blocks` blocks of INSTRUCTIONS_PER_BLOCK instructions over one
    input, the last block's head copied out as the root."""
    c = CHANNELS
    lines = [f"HloModule bench_{blocks}", "",
             f"ENTRY %main (x0: f32[8,16,16,{c}], q: f32[{c},{c}]) -> f32[8,256,{c}] {{",
             f"  %x0 = f32[8,16,16,{c}]{{3,2,1,0}} parameter(0)",
             f"  %q = f32[{c},{c}]{{1,0}} parameter(1)"]
    for i in range(1, blocks + 1):
        lines.append(BLOCK.format(i=i, prev=i - 1, p=i + 1, c=c).rstrip("\n"))
    lines.append(f"  ROOT %out = f32[8,256,{c}]{{2,1,0}} copy(f32[8,256,{c}]{{2,1,0}} "
                 f"%head{blocks})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def instructions(blocks: int) -> int:
    """Instructions in synthetic_hlo(blocks): the blocks, two parameters and the root."""
    return blocks * INSTRUCTIONS_PER_BLOCK + 3
