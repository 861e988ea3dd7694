"""The Numba kernels a read runs over node_config_feat while it is inflated: the int8 check, the
row hash that deduplicates configs, and the slots each node's configs set.

Apart from the row kernels (features/rows/row_kernels.py): Numba's on-disk cache does not notice
edits to functions defined in other files, and none of these call or are called by those.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from features.schema import N_LAYOUT_CONFIG_FEAT

@njit(cache=True, inline='always')
def _le_word(row, at):
    """The 8 bytes of row[at:at + 8] as a little-endian uint64 (LLVM makes it one load)."""
    v = np.uint64(0)
    for k in range(8):
        v |= np.uint64(row[at + k]) << np.uint64(8 * k)
    return v


@njit(cache=True, inline='always')
def _fnv_step(h, v):
    h = (h ^ v) * np.uint64(1099511628211)
    return h ^ (h >> np.uint64(29))


@njit(cache=True, inline='always')
def _mix(h):
    """MurmurHash3's 64-bit finalizer: every input bit reaches every output bit."""
    h = (h ^ (h >> np.uint64(33))) * np.uint64(0xFF51AFD7ED558CCD)
    h = (h ^ (h >> np.uint64(33))) * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


@njit(cache=True)
def row_hash(rows):
    """rows (r, b) uint8 -> (r,) uint64 hash of each row's bytes (dedup key).

    FNV-1a steps over little-endian 8-byte words, each followed by a right shift that carries
    high bits down (a multiply only carries them up), in four lanes: word i goes to lane i % 4,
    lane l starts at the FNV basis xor l x 0x9E3779B97F4A7C15. Each lane is mixed by _mix and
    stepped into the first in order, then the bytes after the last whole 32 are stepped in one
    at a time. Four independent chains instead of one: every config of every train file is
    hashed, and one chain waited on each multiply (0.21 against 0.10-0.14 s per 100,000 configs
    of 400 nodes). Lanes are mixed before they meet: a step starts with an xor, and a change to
    a word's top byte changes its lane by an amount that can be the same in two lanes, so
    stepping one unmixed lane into another let a byte moved 8 places give the same hash."""
    out = np.empty(rows.shape[0], dtype=np.uint64)
    # Lanes start apart, and far: from one start, a word moved to the next lane would leave the
    # mixed lanes swapped, which the first step's xor cannot tell; 1 apart, a word of 1 in one
    # lane would end where the next lane's word of 0 does
    basis, apart = np.uint64(14695981039346656037), np.uint64(0x9E3779B97F4A7C15)
    blocks = rows.shape[1] // 32
    for i in range(rows.shape[0]):
        row = rows[i]
        h0, h1, h2, h3 = basis, basis ^ apart, basis ^ (apart * np.uint64(2)), basis ^ (
            apart * np.uint64(3))
        for w in range(blocks):
            h0 = _fnv_step(h0, _le_word(row, 32 * w))
            h1 = _fnv_step(h1, _le_word(row, 32 * w + 8))
            h2 = _fnv_step(h2, _le_word(row, 32 * w + 16))
            h3 = _fnv_step(h3, _le_word(row, 32 * w + 24))
        h = _fnv_step(_fnv_step(_fnv_step(_mix(h0), _mix(h1)), _mix(h2)), _mix(h3))
        for b in range(32 * blocks, rows.shape[1]):
            h = _fnv_step(h, np.uint64(row[b]))
        out[i] = h
    return out


@njit(cache=True)
def to_int8_checked(values, out):
    """values numeric -> out int8 of the same shape; returns the flat index of the first value
    that is not an integer in -1..5, or -1 if all are. The first loop has no early exit, so it
    vectorises; only a bad chunk pays for the second. Clamping into -1..5 before the cast makes
    one test enough (a value out of range, fractional or NaN differs from its clamped cast), and
    keeps the cast defined (1e30 or NaN cast directly is undefined); it halves the time of
    clamping to -2..6 and testing the range apart."""
    flat_in, flat_out = values.reshape(-1), out.reshape(-1)
    bad = False
    for i in range(flat_in.size):
        v = flat_in[i]
        c = v if v > -1.0 else -1.0             # NaN fails the test: -1
        c = c if c < 5.0 else 5.0
        w = np.int32(c)
        flat_out[i] = np.int8(w)
        bad |= np.float32(w) != v               # NaN compares unequal to everything
    if not bad:
        return -1
    for i in range(flat_in.size):
        v = flat_in[i]
        if v != np.floor(v) or v < -1 or v > 5:
            return i
    return -1


def slots_set(ncf):
    """ncf (c, nc, 18) int8 -> (nc, 3) uint8: the most of its 6 slots any config sets in each
    node's output (0..5), input (6..11) and kernel (12..17) section."""
    c, nc = ncf.shape[:2]
    used = np.zeros(nc * 3, np.int64)
    add_slots_set(np.ascontiguousarray(ncf).reshape(c, nc * N_LAYOUT_CONFIG_FEAT).view(np.uint8), used)
    return slots_table(used)


def slots_table(used):
    """add_slots_set's counts as slots_set returns them: (nc, 3) uint8."""
    return used.reshape(-1, 3).astype(np.uint8)


@njit(cache=True)
def add_slots_set(rows, used):
    """rows (c, nc * 18): configs of int8 values in -1..5 seen as uint8; used (nc * 3,) int64,
    raised in place to each 6-slot section's most set slots (values >= 0) in any row.

    A value is unset when its top bit is. Sections are 6 bytes and words 8, so every 24 bytes
    (3 words) hold 4 whole sections: each word's top bits are moved to the bottom of its bytes,
    a section's 6 bytes of them cut out and summed by one multiply. Byte by byte, the
    comparisons took 0.29 s per 100,000 configs of 400 nodes; this, 0.20 s."""
    # Numba does not check bounds: a `used` too short for the rows would be overrun
    if rows.shape[1] != 6 * used.size:
        raise ValueError("add_slots_set: rows must hold 6 values per entry of used")
    ones, six = np.uint64(0x0101010101010101), np.uint64(0xFFFFFFFFFFFF)
    top, s16, s32, s48, s56 = (np.uint64(7), np.uint64(16), np.uint64(32), np.uint64(48),
                               np.uint64(56))
    blocks, sections = rows.shape[1] // 24, rows.shape[1] // 6
    for i in range(rows.shape[0]):
        row = rows[i]
        for b in range(blocks):
            f0 = (_le_word(row, 24 * b) >> top) & ones
            f1 = (_le_word(row, 24 * b + 8) >> top) & ones
            f2 = (_le_word(row, 24 * b + 16) >> top) & ones
            unset = (((f0 & six) * ones) >> s56,
                     ((((f0 >> s48) | (f1 << s16)) & six) * ones) >> s56,
                     ((((f1 >> s32) | (f2 << s32)) & six) * ones) >> s56,
                     ((f2 >> s16) * ones) >> s56)
            for k in range(4):
                used[4 * b + k] = max(used[4 * b + k], 6 - np.int64(unset[k]))
        for sec in range(4 * blocks, sections):
            n = 0
            for t in range(6):
                n += row[6 * sec + t] < 128
            used[sec] = max(used[sec], n)
