"""A toy measure command for `pipeline.py tune`: a stand-in for hardware, NOT a TPU.

    python pipeline.py tune PROGRAM --measure "python models/tuning/toy_measure.py" ...

It speaks the protocol `tune --measure` expects (models/tuning/runner.py, `run_command`): its
last argument is the path of a .npy of (k, nc, 18) int8 layouts, nc the program's configurable
nodes in `node_config_ids` order; it prints k runtimes on stdout, one a line, lower = faster.
Nothing is compiled or run. Each runtime comes from a made-up formula, so that `tune` can be
tried end to end on any program without a TPU:

    runtime = exp(sum of effect(n, g, layout) over the slot groups g that config sets)

A config's 18 values per node are three slot groups (output, input, kernel) of six; a group of
all -1 is the compiler default and adds nothing. A set group adds effect(n, g, layout) =
0.1 * (u - 0.6), u in [0, 1) read from a hash of (node n, group g, its six values): fixed per
node and layout, most slightly faster than the default, some slower. The same config always
gives the same runtime (no noise), in no unit (the all-default config is 1.0).

For real hardware, write a command of the same shape: load the .npy, apply each config's
layouts to the program's configurable nodes (`node_config_ids` order), compile and run it a few
times, and print the median runtime of each config, one a line (any unit, the same for all).
"""
from __future__ import annotations

import hashlib
import sys

import numpy as np

SLOT_GROUPS = 3     # output, input, kernel
GROUP_WIDTH = 6
NOTICE = "toy_measure: runtimes from a made-up formula, a stand-in for hardware, not a TPU"


def effect(node: int, group: int, layout: np.ndarray) -> float:
    """What setting slot group `group` of node `node` to `layout` (6 int8) adds to log runtime."""
    key = hashlib.blake2b(bytes([group]) + node.to_bytes(4, "little") + layout.tobytes(),
                          digest_size=8).digest()
    return 0.1 * (int.from_bytes(key, "little") / 2**64 - 0.6)


def toy_runtimes(configs: np.ndarray) -> np.ndarray:
    """configs (k, nc, 18) int -1..5 -> (k,) toy runtimes, the all-default config 1.0."""
    groups = np.asarray(configs, np.int8).reshape(len(configs), -1, SLOT_GROUPS, GROUP_WIDTH)
    log_t = np.zeros(len(groups))
    for i, config in enumerate(groups):
        for node, group in zip(*np.nonzero((config >= 0).any(axis=2))):
            log_t[i] += effect(int(node), int(group), config[node, group])
    return np.exp(log_t)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: python {sys.argv[0]} CONFIGS.npy   ({NOTICE})", file=sys.stderr)
        return 2
    print(NOTICE, file=sys.stderr)      # stdout is the runtimes alone, as tune reads them
    for runtime in toy_runtimes(np.load(argv[0])):
        print(f"{runtime:.9g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
