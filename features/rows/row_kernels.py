"""The row kernels of the feature builder: array -> array, settings passed as arguments (the
read's own kernels are features/npz/read_kernels.py).

They share one file because Numba's on-disk cache does not notice edits to functions defined in
other files; module-level integers below are compile-time constants of this same file.
Helpers the layout kernel calls per (config, node), or per distinct node value, are inlined by
Numba (inline='always'; not _decode_reads, _value_terms): as separate functions their calls made
it about 4x slower (bench graph, 1,000 configs x 600 nodes, one thread: 481-541 ms against
115-139 ms). That includes the steps of _node_quantities: called, not inlined, they made
layout_full 1.7-2.5x slower (three dev xla graphs, 1,000 configs x ~2,000 nodes). Helpers called
once per node or per tile of nodes are not inlined, except the loop over distinct node values:
written once (_distinct_values), it is inlined into both kernels that use it,
layout_config_features (through _memo_nodes) and node_rows, because compiled as a function of its
own it compiled in half the time but made the layout rows about 1.5x slower
(docs/records/README.md).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from features.schema import N_LAYOUT_CONFIG_FEAT

# Columns of the per-configurable-node static tables built by per_config.layout_static().
(S_RANK_OUT, S_RANK_IN, S_RANK_KER, S_IN_POS, S_KER_POS, S_GROUP, S_PLAIN_USERS, S_SIB_FIRST,
 S_HAS_KER, S_IS_RESHAPE, S_TO_OUTPUT, S_CONTEXT) = range(12)
N_STATIC_INT = 12
ANY_SOURCE = -2  # S_IN_POS / S_KER_POS of a source that takes any layout for free: no copy
F_VOL_OUT, F_VOL_IN, F_VOL_KER, F_BYTES, F_CHAIN_BYTES = range(5)
N_STATIC_F = 5
# Per-(config, node) quantities the layout kernel aggregates, in column order. per_config names
# the features after them (Q_OUT_PAD_BYTES: 'out_pad_bytes'), so a new quantity is one name here
# and the kernel line that adds it.
N_BASE_QUANT = 33
(Q_OUT_IS_DEFAULT, Q_IN_IS_DEFAULT, Q_KER_IS_DEFAULT, Q_OUT_ROW_MAJOR, Q_OUT_EQ_IN,
 Q_OUT_CHANGED, Q_OUT_CHANGED_BYTES, Q_OUT_LOG2_PAD, Q_OUT_PAD_BYTES, Q_IN_LOG2_PAD,
 Q_IN_PAD_BYTES, Q_KER_PAD_BYTES, Q_IN_COPY, Q_IN_COPY_BYTES, Q_KER_COPY, Q_KER_COPY_BYTES,
 Q_USER_COPY, Q_USER_COPY_BYTES, Q_OUTPUT_COPY_BYTES, Q_SIBLING_MISMATCH, Q_SIBLING_BYTES,
 Q_OUT_LOG2_MINOR, Q_OUT_LOG2_SECOND_MINOR, Q_IN_LOG2_MINOR, Q_OUT_MINOR_MULT128,
 Q_RESHAPE_COPY, Q_RESHAPE_COPY_BYTES, Q_TILED_BYTES, Q_VALUE_FREQ, Q_DIFFERS_FROM_MODAL,
 Q_LAYOUT_UNKNOWN, Q_CHAIN_PAD_BYTES, Q_CHAIN_TILED_BYTES) = range(N_BASE_QUANT)
N_ROLES = 4                                  # graph_roles: batch, contracting, free, spatial
# Then a one-hot role per (tensor, minor / 2nd-minor dim): per_config.NODE_QUANTITIES names them
ROLE_QUANT = N_BASE_QUANT
N_QUANT = N_BASE_QUANT + 3 * 2 * N_ROLES
N_GROUPS = 4  # all, conv, dot, reshape


@njit(cache=True)
def config_codes(ncf, rows):
    """ncf (c, nc, 18) int8, rows (r,) -> (nc, r) int64: each node's 18 slots in each row's
    config as one base-7 number, node-major so that the kernels below walk one node's
    configs in order."""
    nc = ncf.shape[1]
    out = np.empty((nc, rows.size), dtype=np.int64)
    for i in range(rows.size):
        row = ncf[rows[i]]
        for k in range(nc):
            high, low = 0, 0    # two independent chains: a third faster than one of 18 steps
            for s in range(9):
                high = high * 7 + (np.int64(row[k, s]) + 1)
                low = low * 7 + (np.int64(row[k, s + 9]) + 1)
            out[k, i] = high * 7 ** 9 + low
    return out


HASH_MULT = np.uint64(0x9E3779B97F4A7C15)   # Fibonacci hashing: spreads keys over the table


@njit(cache=True, inline='always')
def _table_bits(n):
    """log2 of an open-addressing table's size for up to n keys: at most half full."""
    bits = 1
    while (1 << bits) < 2 * max(n, 1):
        bits += 1
    return bits


@njit(cache=True, inline='always')
def _new_table(n):
    """An empty open-addressing table for up to n keys: (bits, stamp, keys (m, 2), entry).
    A slot is taken when its stamp equals the current tag; entry is what the caller stores."""
    bits = _table_bits(n)
    return (bits, np.full(1 << bits, -1, np.int64), np.empty((1 << bits, 2), np.int64),
            np.empty(1 << bits, np.int64))


@njit(cache=True, inline='always')
def _find(stamp, keys, tag, a, b, bits):
    """The slot of key (a, b) among the slots stamped `tag`, or the free slot it would take.
    One table serves node after node: a slot stamped with another tag is free, so it is never
    cleared."""
    mask = (1 << bits) - 1
    h = np.int64(((np.uint64(a) * HASH_MULT + np.uint64(b)) * HASH_MULT) >> np.uint64(64 - bits))
    while stamp[h] == tag and (keys[h, 0] != a or keys[h, 1] != b):
        h = (h + 1) & mask
    return h


@njit(cache=True)
def value_table(codes):
    """codes (nc, s) int64 (>= 0) of sampled configs -> per node the distinct codes seen and
    their shares of the sample, as ptr (nc + 1,), keys (m,), shares (m,) with node k's at
    ptr[k]:ptr[k + 1], and modal (nc,) its most common code (the smallest among ties; -1 with
    no sample). Hashing, not sorting: this runs on every call of the ranking API."""
    nc, s = codes.shape
    bits, stamp, slot_keys, entry = _new_table(s)
    ptr = np.zeros(nc + 1, np.int64)
    keys = np.empty(nc * s, np.int64)
    counts = np.zeros(nc * s, np.int64)
    modal = np.full(nc, -1, np.int64)
    for k in range(nc):
        best, m = 0, ptr[k]
        for i in range(s):
            code = codes[k, i]
            h = _find(stamp, slot_keys, k, code, 0, bits)
            if stamp[h] != k:
                stamp[h], slot_keys[h, 0], slot_keys[h, 1], entry[h] = k, code, 0, m
                keys[m] = code
                m += 1
            counts[entry[h]] += 1
            n = counts[entry[h]]
            if n > best or (n == best and code < modal[k]):
                best, modal[k] = n, code
        ptr[k + 1] = m
    return ptr, keys[:ptr[nc]].copy(), counts[:ptr[nc]] / max(s, 1), modal




@njit(cache=True, inline='always')
def _effective(slots, base, fallback, out):
    """Section `base` of a node's 18 slots, or `fallback` where the section is all -1."""
    is_default = True
    for s in range(6):
        if slots[base + s] >= 0:
            is_default = False
    for s in range(6):
        out[s] = fallback[s] if is_default else slots[base + s]
    return is_default


@njit(cache=True, inline='always')
def _malformed(layout, rank):
    """Slots that do not name each of the tensor's dims once in its first `rank` slots: a value
    at or above the rank, a -1 inside it, or a value past it. Such a layout is unknown."""
    n = 0
    for s in range(6):
        if s < rank:
            if layout[s] < 0 or layout[s] >= rank:
                n += 1
        elif layout[s] >= 0:
            n += 1
    return n


@njit(cache=True, inline='always')
def _checked(layout, rank, fallback):
    """Count malformed slots; a malformed layout is replaced by `fallback`, never read as is."""
    n = _malformed(layout, rank)
    if n > 0:
        layout[:] = fallback
    return n


@njit(cache=True, inline='always')
def _pad_factor(pad, k, t, layout, rank):
    """Padded over true size of tensor t of node k under `layout`, from the (7, 7) table of
    (minor dim, 2nd-minor dim or 6 for none) built by per_config.pad_tables; 1 when unknown."""
    if rank == 0 or layout[0] < 0 or layout[0] >= rank:
        return 1.0
    if rank > 1 and (layout[1] < 0 or layout[1] >= rank):
        return 1.0
    second = layout[1] if rank > 1 else 6
    return pad[k, t, layout[0], second]


@njit(cache=True, inline='always')
def _same(a, b):
    for s in range(6):
        if a[s] != b[s]:
            return False
    return True


@njit(cache=True, inline='always')
def _source_layout(slots, pos, defaults, fixed, out):
    """The output layout a source carries: its config's slots if it is configurable
    (pos >= 0), else its fixed layout."""
    if pos >= 0:
        _effective(slots, 0, defaults[pos, 0], out)
    else:
        out[:] = fixed


@njit(cache=True, inline='always')
def _physical_order(layout, rank, dims, out):
    """Non-unit dims from major to minor, as ranks among the non-unit dims in logical order;
    returns how many there are (a unit dim never moves data)."""
    n = 0
    for s in range(rank - 1, -1, -1):
        d = layout[s]
        if dims[d] > 1:
            idx = 0
            for e in range(d):
                if dims[e] > 1:
                    idx += 1
            out[n] = idx
            n += 1
    return n


@njit(cache=True, inline='always')
def _reshape_is_bitcast(shapes, k, ei, r_in, eo, r_out, pi, po):
    """Whether a reshape keeps the physical element order (a bitcast) under its input and output
    layouts: both row-major over their non-unit dims, or the reshape only adds/drops unit dims
    and both layouts order the remaining dims alike. Otherwise it is a copy. pi, po: (6,)
    scratch from the caller, so nothing is allocated per (config, node)."""
    ni = _physical_order(ei, r_in, shapes[k, 1, :, 0], pi)
    no = _physical_order(eo, r_out, shapes[k, 0, :, 0], po)
    ordered = True
    for s in range(ni):
        ordered = ordered and pi[s] == s
    for s in range(no):
        ordered = ordered and po[s] == s
    if ordered:
        return True
    if ni != no:
        return False
    a, b = 0, 0  # non-unit sizes in logical order must match one to one
    for s in range(ni):
        while shapes[k, 1, a, 0] <= 1:
            a += 1
        while shapes[k, 0, b, 0] <= 1:
            b += 1
        if shapes[k, 1, a, 0] != shapes[k, 0, b, 0] or pi[s] != po[s]:
            return False
        a += 1
        b += 1
    return True


@njit(cache=True, inline='always')
def _roles(acc, roles, k, t, layout, rank, slot):
    """One-hot of the role of the minor (slot 0) / 2nd-minor (slot 1) dim of tensor t."""
    if rank > slot and 0 <= layout[slot] < rank:
        r = roles[k, t, layout[slot]]
        if r >= 0:
            acc[ROLE_QUANT + (t * 2 + slot) * N_ROLES + r] += 1.0


@njit(cache=True, inline='always')
def _effective_input(own, src, k, si, defaults, fixed, tmp, ei):
    """Node k's effective input layout into ei, its source's layout into tmp, from their slots
    (own, src); returns (whether its input section is all -1, how many slots were malformed)."""
    _source_layout(src, si[k, S_IN_POS], defaults, fixed[k, 0], tmp)
    in_default = _effective(own, 6, tmp, ei)
    return in_default, _checked(ei, si[k, S_RANK_IN], tmp)


@njit(cache=True, inline='always')
def _layout_terms(own, src_in, src_ker, k, si, sf, defaults, fixed, acc, eo, ei, ek, tmp):
    """Node k's effective output, input and kernel layouts into eo, ei, ek (ek all -1 without a
    kernel), and what choosing them costs: default sections, operands copied into a layout their
    source does not carry (a source that takes any layout is never copied), malformed slots."""
    has_ker = si[k, S_HAS_KER] == 1
    out_default = _effective(own, 0, defaults[k, 0], eo)
    unknown = _checked(eo, si[k, S_RANK_OUT], defaults[k, 0])
    in_default, in_malformed = _effective_input(own, src_in, k, si, defaults, fixed, tmp, ei)
    unknown += in_malformed
    in_copy = not _same(ei, tmp) and si[k, S_IN_POS] != ANY_SOURCE
    ker_default, ker_copy = True, False
    ek[:] = -1
    if has_ker:
        _source_layout(src_ker, si[k, S_KER_POS], defaults, fixed[k, 1], tmp)
        ker_default = _effective(own, 12, tmp, ek)
        unknown += _checked(ek, si[k, S_RANK_KER], tmp)
        ker_copy = not _same(ek, tmp) and si[k, S_KER_POS] != ANY_SOURCE
    acc[Q_OUT_IS_DEFAULT] += out_default
    acc[Q_IN_IS_DEFAULT] += in_default
    acc[Q_KER_IS_DEFAULT] += ker_default and has_ker
    if in_copy:
        acc[Q_IN_COPY] += 1.0
        acc[Q_IN_COPY_BYTES] += sf[k, F_VOL_IN] * sf[k, F_BYTES]
    if ker_copy:
        acc[Q_KER_COPY] += 1.0
        acc[Q_KER_COPY_BYTES] += sf[k, F_VOL_KER] * sf[k, F_BYTES]
    acc[Q_LAYOUT_UNKNOWN] += unknown


@njit(cache=True, inline='always')
def _output_terms(k, si, sf, defaults, acc, eo, ei):
    """How node k's output layout eo stands: row-major, equal to its input's, or changed from its
    own default, which copies it for every plain user and for a computation output."""
    r_out = si[k, S_RANK_OUT]
    row_major = r_out > 0
    for s in range(r_out):
        if eo[s] != r_out - 1 - s:
            row_major = False
    acc[Q_OUT_ROW_MAJOR] += row_major
    acc[Q_OUT_EQ_IN] += _same(eo, ei)
    if not _same(eo, defaults[k, 0]):
        b_out = sf[k, F_VOL_OUT] * sf[k, F_BYTES]
        users = si[k, S_PLAIN_USERS]
        acc[Q_OUT_CHANGED] += 1.0
        acc[Q_OUT_CHANGED_BYTES] += b_out
        acc[Q_USER_COPY] += users
        acc[Q_USER_COPY_BYTES] += users * b_out
        if si[k, S_TO_OUTPUT] == 1:
            acc[Q_OUTPUT_COPY_BYTES] += b_out


@njit(cache=True, inline='always')
def _padding_terms(k, si, sf, pad, acc, eo, ei, ek):
    """8x128 padding of node k's output, input and kernel under layouts eo, ei, ek (pad_tables),
    and of the non-configurable ops downstream that carry its output layout (pad table 3: each
    under its own dims)."""
    r_out, r_in = si[k, S_RANK_OUT], si[k, S_RANK_IN]
    eb = sf[k, F_BYTES]
    b_out, b_in, b_ker = sf[k, F_VOL_OUT] * eb, sf[k, F_VOL_IN] * eb, sf[k, F_VOL_KER] * eb
    pf_out = _pad_factor(pad, k, 0, eo, r_out)
    pf_in = _pad_factor(pad, k, 1, ei, r_in)
    pf_ker = _pad_factor(pad, k, 2, ek, si[k, S_RANK_KER]) if si[k, S_HAS_KER] == 1 else 1.0
    acc[Q_OUT_LOG2_PAD] += np.log2(pf_out)
    acc[Q_OUT_PAD_BYTES] += (pf_out - 1.0) * b_out
    acc[Q_IN_LOG2_PAD] += np.log2(pf_in)
    acc[Q_IN_PAD_BYTES] += (pf_in - 1.0) * b_in
    acc[Q_KER_PAD_BYTES] += (pf_ker - 1.0) * b_ker
    acc[Q_TILED_BYTES] += pf_out * b_out + pf_in * b_in + pf_ker * b_ker
    pf_chain = _pad_factor(pad, k, 3, eo, r_out)   # its carriers, each with its own dims
    acc[Q_CHAIN_PAD_BYTES] += (pf_chain - 1.0) * sf[k, F_CHAIN_BYTES]
    acc[Q_CHAIN_TILED_BYTES] += pf_chain * sf[k, F_CHAIN_BYTES]
    if r_out > 0 and 0 <= eo[0] < r_out:
        # The minor dim fills whole tiles: its padding factor alone (2nd-minor 6: none) is 1
        acc[Q_OUT_MINOR_MULT128] += pad[k, 0, eo[0], 6] == 1.0


@njit(cache=True, inline='always')
def _dim_terms(k, si, sf, shapes, acc, eo, ei, scratch):
    """Sizes of the dims node k's layouts put minor-most, and whether a reshape moves data."""
    r_out, r_in = si[k, S_RANK_OUT], si[k, S_RANK_IN]
    if r_out > 0 and 0 <= eo[0] < r_out:
        acc[Q_OUT_LOG2_MINOR] += shapes[k, 0, eo[0], 1]
    if r_out > 1 and 0 <= eo[1] < r_out:
        acc[Q_OUT_LOG2_SECOND_MINOR] += shapes[k, 0, eo[1], 1]
    if r_in > 0 and 0 <= ei[0] < r_in:
        acc[Q_IN_LOG2_MINOR] += shapes[k, 1, ei[0], 1]
    if si[k, S_IS_RESHAPE] == 1 and not _reshape_is_bitcast(shapes, k, ei, r_in, eo, r_out,
                                                           scratch[0], scratch[1]):
        acc[Q_RESHAPE_COPY] += 1.0
        acc[Q_RESHAPE_COPY_BYTES] += sf[k, F_VOL_OUT] * sf[k, F_BYTES]


@njit(cache=True, inline='always')
def _role_terms(k, si, roles, acc, eo, ei, ek):
    """Roles (batch, contracting, ...) of the minor and 2nd-minor dims of node k's tensors."""
    for slot in range(2):
        _roles(acc, roles, k, 0, eo, si[k, S_RANK_OUT], slot)
        _roles(acc, roles, k, 1, ei, si[k, S_RANK_IN], slot)
        if si[k, S_HAS_KER] == 1:
            _roles(acc, roles, k, 2, ek, si[k, S_RANK_KER], slot)


@njit(cache=True, inline='always')
def _node_quantities(own, src_in, src_ker, k, si, sf, shapes, pad, defaults, fixed, roles, acc,
                     eo, ei, ek, tmp, scratch):
    """Node k's quantities into acc (N_QUANT,), zeroed by the caller, except the value
    frequencies and sibling terms, which the caller adds. They read nothing of a config but the
    18 slots of node k (own) and of its input and kernel sources (src_in, src_ker; their
    output sections). eo/ei/ek receive its effective layouts; tmp (6,) and scratch (2, 6) are
    work space."""
    _layout_terms(own, src_in, src_ker, k, si, sf, defaults, fixed, acc, eo, ei, ek, tmp)
    _output_terms(k, si, sf, defaults, acc, eo, ei)
    _padding_terms(k, si, sf, pad, acc, eo, ei, ek)
    _dim_terms(k, si, sf, shapes, acc, eo, ei, scratch)
    _role_terms(k, si, roles, acc, eo, ei, ek)


SECTION = 7 ** 6     # (code // SECTION ** 2, code // SECTION % SECTION): output, input section


@njit(cache=True, inline='always')
def _source_key(codes, i, in_pos, ker_pos, first):
    """All that a node's quantities read of other nodes in row i: the output sections of its
    input and kernel sources (in_pos, ker_pos) and the input section of its sibling (first)."""
    key = _section(codes, in_pos, i, 2)
    key = key * (SECTION + 1) + _section(codes, ker_pos, i, 2)
    return key * (SECTION + 1) + _section(codes, first, i, 1)


@njit(cache=True, inline='always')
def _section(codes, pos, i, which):
    """1 + the code of section `which` (2: output, slots 0..5; 1: input, slots 6..11) of node
    pos in row i, or 0 for no node. Unsigned, so divisions by constants become multiplications."""
    if pos < 0:
        return 0
    c = np.uint64(codes[pos, i]) // POW7[6 * which]
    return np.int64(c % np.uint64(SECTION)) + 1


POW7 = np.array([7 ** p for p in range(19)], np.uint64)


@njit(cache=True, inline='always')
def _decode(code, lo, hi, out):
    """Slots lo..hi-1 of a config code (kernels.config_codes) into out[lo:hi]. Unsigned, so that
    each division by 7 compiles to a multiplication."""
    c = np.uint64(code) // POW7[N_LAYOUT_CONFIG_FEAT - hi]
    for s in range(hi - 1, lo - 1, -1):
        out[s] = np.int64(c % np.uint64(7)) - 1
        c //= np.uint64(7)


@njit(cache=True, inline='always')
def _all_quantities(own, src_in, src_ker, sib, k, si, sf, shapes, pad, defaults, fixed, roles,
                    acc, eo, ei, ek, tmp, scratch):
    """_node_quantities plus the sibling terms: whether node k's effective input layout differs
    from that of its sibling (an earlier reader of the same source), whose slots are sib."""
    _node_quantities(own, src_in, src_ker, k, si, sf, shapes, pad, defaults, fixed, roles, acc,
                     eo, ei, ek, tmp, scratch)
    first = si[k, S_SIB_FIRST]
    if first >= 0:   # same source as node k, so src_in is the sibling's too (layout_static)
        _effective_input(sib, src_in, first, si, defaults, fixed, tmp, scratch[0])
        if not _same(ei, scratch[0]):
            acc[Q_SIBLING_MISMATCH] += 1.0
            acc[Q_SIBLING_BYTES] += sf[k, F_VOL_IN] * sf[k, F_BYTES]


NODE_TILE = 16   # nodes whose sums are added row by row together, so each out row stays cached


@njit(cache=True)
def _hash_sample(ptr, keys, k, sample):
    """Node k's sampled values (value_table's keys[ptr[k]:ptr[k + 1]]) into the open-addressing
    table `sample` (_new_table), each slot's entry its index into keys."""
    bits, stamp, slot_keys, entry = sample
    for m in range(ptr[k], ptr[k + 1]):
        h = _find(stamp, slot_keys, k, keys[m], 0, bits)
        stamp[h], slot_keys[h, 0], slot_keys[h, 1], entry[h] = k, keys[m], 0, m


@njit(cache=True)
def _value_terms(k, own, sample, shares, modal, vec):
    """The share of the sample with node k's value `own` (0 if none had it), and whether it is
    not the node's most common one, as float32 like the features."""
    bits, stamp, slot_keys, entry = sample
    h = _find(stamp, slot_keys, k, own, 0, bits)
    share = 0.0
    if stamp[h] == k:
        share = shares[entry[h]]
    vec[Q_VALUE_FREQ] = np.float32(share)
    vec[Q_DIFFERS_FROM_MODAL] = np.float32(own != modal[k])


@njit(cache=True)
def _decode_reads(codes, i, own, in_pos, ker_pos, first, slots):
    """The slots a node's quantities read in row i: its own 18 (slots[0]), the output sections
    of its input and kernel sources (slots[1], slots[2]), its sibling's input section
    (slots[3]); a missing node's stay as they were."""
    _decode(own, 0, N_LAYOUT_CONFIG_FEAT, slots[0])
    for t, pos in ((1, in_pos), (2, ker_pos)):
        if pos >= 0:
            _decode(codes[pos, i], 0, 6, slots[t])
    if first >= 0:
        _decode(codes[first, i], 6, 12, slots[3])


@njit(cache=True)
def _add_tile(vecs, which, si, k0, k1, lo, hi, out):
    """Rows lo..hi-1 of out += the vectors (vecs, by which) of nodes k0..k1-1, each into its
    group's block, row by row."""
    for i in range(lo, hi):
        for k in range(k0, k1):
            base = (si[k, S_GROUP] + 1) % N_GROUPS * N_QUANT   # other ops: block 0
            vec = vecs[which[k - k0, i - lo]]
            for t in range(N_QUANT):
                out[i, base + t] += vec[t]


@njit(cache=True, inline='always')
def _distinct_values(codes, k0, k1, lo, hi, si, sf, shapes, pad, defaults, fixed, roles, ptr,
                     keys, shares, modal, table, sample, vecs, key, which):
    """Nodes k0..k1-1 in rows lo..hi-1: each node's distinct (own code, what it reads of other
    nodes), whose quantities go to vecs[:used] once, what makes each to key[:used] (node, own
    code, source key), and the index of each (node, row)'s into which[k - k0, i - lo]; returns
    used. vecs and key need room for (k1 - k0) * (hi - lo) values; table is a _new_table for
    hi - lo keys, sample one for a node's sampled values. A real file gives a node a few dozen
    distinct layouts among 1,000 configs (efficientnet_b1: 160 distinct combinations per node
    on average), so most (node, row)s only look their value up; even where two thirds of a
    node's values are new (the generated bench graph) this beats computing every row. Slots
    are decoded from the node-major codes: read node by node, node_config_feat would miss the
    cache every row.

    The loop both kernels share, inlined into each (see the module doc):
    layout_config_features runs it per tile of nodes, node_rows per node."""
    bits, stamp, slot_keys, entry = table
    slots = np.full((4, N_LAYOUT_CONFIG_FEAT), -1, np.int64)
    eo, ei, ek = np.empty(6, np.int64), np.empty(6, np.int64), np.empty(6, np.int64)
    tmp, scratch = np.empty(6, np.int64), np.empty((2, 6), np.int64)
    used = 0
    for k in range(k0, k1):
        in_pos, ker_pos, first = si[k, S_IN_POS], si[k, S_KER_POS], si[k, S_SIB_FIRST]
        _hash_sample(ptr, keys, k, sample)
        for i in range(lo, hi):
            own, src = codes[k, i], _source_key(codes, i, in_pos, ker_pos, first)
            h = _find(stamp, slot_keys, k, own, src, bits)
            if stamp[h] != k:
                stamp[h], slot_keys[h, 0], slot_keys[h, 1], entry[h] = k, own, src, used
                _decode_reads(codes, i, own, in_pos, ker_pos, first, slots)
                vecs[used, :] = 0.0
                _all_quantities(slots[0], slots[1], slots[2], slots[3], k, si, sf, shapes, pad,
                                defaults, fixed, roles, vecs[used], eo, ei, ek, tmp, scratch)
                _value_terms(k, own, sample, shares, modal, vecs[used])
                key[used, 0], key[used, 1], key[used, 2] = k, own, src
                used += 1
            which[k - k0, i - lo] = entry[h]
    return used


@njit(cache=True, inline='always')
def _sample_table(ptr):
    """A _new_table for the most sampled values any node has (value_table's ptr)."""
    return _new_table(np.max(ptr[1:] - ptr[:-1]) if ptr.size > 1 else 0)


@njit(cache=True, inline='always')
def _memo_nodes(codes, lo, hi, si, sf, shapes, pad, defaults, fixed, roles, ptr, keys, shares,
                modal, out):
    """Rows lo..hi-1 of out: each node's distinct values (_distinct_values) added to every row
    that has them. Nodes go NODE_TILE at a time: first each node's rows are matched to its
    distinct values, then the tile's sums are added row by row (an out row is 1.8 KB: added
    node by node, every row fell out of the cache between two nodes)."""
    n = hi - lo
    table, sample = _new_table(n), _sample_table(ptr)
    vecs = np.empty((NODE_TILE * n, N_QUANT))
    key = np.empty((NODE_TILE * n, 3), np.int64)
    which = np.empty((NODE_TILE, n), np.int64)
    for k0 in range(0, codes.shape[0], NODE_TILE):
        k1 = min(codes.shape[0], k0 + NODE_TILE)
        _distinct_values(codes, k0, k1, lo, hi, si, sf, shapes, pad, defaults, fixed, roles, ptr,
                         keys, shares, modal, table, sample, vecs, key, which)
        _add_tile(vecs, which, si, k0, k1, lo, hi, out)


@njit(cache=True)
def node_rows(codes, si, sf, shapes, pad, defaults, fixed, roles, ptr, keys, shares, modal):
    """Each configurable node's distinct (own value, what it reads of other nodes) among the
    configs, as rows a node-level learner scores: vecs (u, N_QUANT) their quantities, key (u, 3)
    int64 (node, own code, source key): what makes the row, which (nc, r) int64 the row of each
    (node, config). A config's sum of its nodes' rows is block 0 of layout_config_features.
    Arguments as there."""
    nc, r = codes.shape
    table, sample = _new_table(r), _sample_table(ptr)
    which = np.empty((nc, r), np.int64)
    node_vecs, node_key = np.empty((max(r, 1), N_QUANT)), np.empty((max(r, 1), 3), np.int64)
    node_which = np.empty((1, r), np.int64)   # not a view of which: one compiled signature
    vecs, key = np.empty((max(4 * nc, 16), N_QUANT)), np.empty((max(4 * nc, 16), 3), np.int64)
    used = 0
    for k in range(nc):
        m = _distinct_values(codes, k, k + 1, np.int64(0), r, si, sf, shapes, pad, defaults,
                             fixed, roles, ptr, keys, shares, modal, table, sample, node_vecs,
                             node_key, node_which)
        while used + m > key.shape[0]:   # grow by doubling
            vecs = np.concatenate((vecs, np.empty_like(vecs)))
            key = np.concatenate((key, np.empty_like(key)))
        vecs[used:used + m] = node_vecs[:m]
        key[used:used + m] = node_key[:m]
        which[k] = node_which[0] + used
        used += m
    return vecs[:used].copy(), key[:used].copy(), which


@njit(cache=True, parallel=True)
def layout_config_features(codes, si, sf, shapes, pad, defaults, fixed, roles, ptr, keys, shares,
                           modal, n_blocks):
    """Per-config sums of node quantities, overall and per conv/dot/reshape group.

    codes (nc, r) int64 config_codes of the configs to featurize; si (nc, N_STATIC_INT) int64;
    sf (nc, N_STATIC_F) float64; shapes (nc, 3, 7, 2) float64 output/input/kernel dims (padded
    with 1) and their log2; pad (nc, 3, 7, 7) padding factors; defaults (nc, 3, 6) int64 own
    layouts (-1 padded); fixed (nc, 2, 6) int64 layouts that input / kernel sources carry when
    not configurable; roles (nc, 3, 6) int64 dim roles (-1 none); ptr, keys, shares, modal the
    value table of the sampled configs (value_table) -> (r, N_GROUPS * N_QUANT) float64.
    The rows are cut into n_blocks blocks that run in parallel, each writing only its own rows.

    Each block's loops (_memo_nodes, and _distinct_values in it) are inlined into the
    parallel loop's body (see the module doc for why).
    """
    out = np.zeros((codes.shape[1], N_GROUPS * N_QUANT))
    size = (codes.shape[1] + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo, hi = b * size, min(codes.shape[1], (b + 1) * size)
        if lo < hi:
            _memo_nodes(codes, lo, hi, si, sf, shapes, pad, defaults, fixed, roles, ptr, keys,
                        shares, modal, out)
            for i in range(lo, hi):
                for g in range(1, N_GROUPS):   # all = other + conv + dot + reshape
                    for t in range(N_QUANT):
                        out[i, t] += out[i, g * N_QUANT + t]
    return out


@njit(cache=True, parallel=True)
def merge_conversions(ncf, rows, merge_pos, merge_fixed, merge_bytes, defaults):
    """Per config: (count, bytes) of layout-preserving ops whose operands arrive in different
    layouts, so one operand is converted. merge_pos (m, 2) int64 configurable source of each side
    or -1; merge_fixed (m, 2, 6) the layout a fixed side carries; merge_bytes (m,) output bytes."""
    out = np.zeros((rows.size, 2))
    for r in prange(rows.size):
        j = rows[r]
        a, b = np.empty(6, np.int64), np.empty(6, np.int64)
        for m in range(merge_pos.shape[0]):
            pa, pb = merge_pos[m, 0], merge_pos[m, 1]
            _source_layout(ncf[j, max(pa, 0)], pa, defaults, merge_fixed[m, 0], a)
            _source_layout(ncf[j, max(pb, 0)], pb, defaults, merge_fixed[m, 1], b)
            if not _same(a, b):
                out[r, 0] += 1.0
                out[r, 1] += merge_bytes[m]
    return out
