"""Every Numba kernel of the feature builder: pure array -> array, settings passed as arguments.

They share one file because Numba's on-disk cache does not notice edits to functions defined in
other files; module-level integers below are compile-time constants of this same file.
Helpers called once per (config, node) are inlined by Numba (inline='always'): as separate
functions their calls made the layout kernel about 4x slower (bench graph, 1,000 configs x 600
nodes, one thread: 481-541 ms against 115-139 ms).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

# Columns of the per-configurable-node static tables built by per_config.layout_static().
(S_RANK_OUT, S_RANK_IN, S_RANK_KER, S_IN_POS, S_KER_POS, S_GROUP, S_PLAIN_USERS, S_SIB_FIRST,
 S_HAS_KER, S_IS_RESHAPE, S_TO_OUTPUT) = range(11)
N_STATIC_INT = 11
ANY_SOURCE = -2  # S_IN_POS / S_KER_POS of a source that takes any layout for free: no copy
F_VOL_OUT, F_VOL_IN, F_VOL_KER, F_BYTES, F_CHAIN_BYTES = range(5)
N_STATIC_F = 5
# Per-(config, node) quantities the layout kernel aggregates; names in per_config.NODE_QUANTITIES.
N_BASE_QUANT = 33
N_ROLES = 4                                  # graph_roles: batch, contracting, free, spatial
Q_ROLES = N_BASE_QUANT                       # one-hot role of (tensor, minor / 2nd-minor) dim
N_QUANT = N_BASE_QUANT + 3 * 2 * N_ROLES
N_GROUPS = 4  # all, conv, dot, reshape


@njit(cache=True)
def row_hash(rows):
    """rows (r, b) uint8 -> (r,) uint64 FNV-1a hash of each row's bytes (dedup key)."""
    out = np.empty(rows.shape[0], dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for i in range(rows.shape[0]):
        h = np.uint64(14695981039346656037)
        for b in range(rows.shape[1]):
            h = (h ^ np.uint64(rows[i, b])) * prime
        out[i] = h
    return out


@njit(cache=True)
def to_int8_checked(values, out):
    """values (r, nc, 18) numeric -> out (r, nc, 18) int8 in one pass; returns the flat index
    of the first value that is not an integer in -1..5, or -1 if all are."""
    flat_in, flat_out = values.reshape(-1), out.reshape(-1)
    for i in range(flat_in.size):
        v = flat_in[i]
        if v != np.floor(v) or v < -1 or v > 5:
            return i
        flat_out[i] = np.int8(v)
    return -1


@njit(cache=True)
def slots_set(ncf):
    """ncf (c, nc, 18) int8 -> (nc, 3) uint8: the most of its 6 slots any config sets in each
    node's output (0..5), input (6..11) and kernel (12..17) section."""
    nc = ncf.shape[1]
    used = np.zeros((nc, 3), np.uint8)
    for j in range(ncf.shape[0]):
        for k in range(nc):
            for s in range(3):
                n = 0
                for t in range(6):
                    n += ncf[j, k, 6 * s + t] >= 0
                if n > used[k, s]:
                    used[k, s] = n
    return used


@njit(cache=True)
def config_codes(ncf):
    """ncf (c, nc, 18) int8 -> (c, nc) int64: each node's 18 slots as one base-7 number."""
    c, nc = ncf.shape[0], ncf.shape[1]
    out = np.empty((c, nc), dtype=np.int64)
    for j in range(c):
        for k in range(nc):
            code = 0
            for s in range(18):
                code = code * 7 + (ncf[j, k, s] + 1)
            out[j, k] = code
    return out


HASH_MULT = np.uint64(0x9E3779B97F4A7C15)   # Fibonacci hashing: spreads codes over the table


@njit(cache=True, inline='always')
def _slot(keys, k, code, bits):
    """Where code sits in node k's open-addressing table, or the empty slot it would take."""
    mask = keys.shape[1] - 1
    h = np.int64((np.uint64(code) * HASH_MULT) >> np.uint64(64 - bits))
    while keys[k, h] != code and keys[k, h] != -1:
        h = (h + 1) & mask
    return h


@njit(cache=True)
def value_table(codes):
    """codes (s, nc) int64 (>= 0) of sampled configs -> per node a hash table of the codes seen,
    keys (nc, m) with -1 empty and shares (nc, m) of the sample, and modal (nc,) its most common
    code (the smallest among ties; -1 with no sample). Hashing, not sorting: this runs on every
    call of the ranking API, where sorting 600 columns took longer than the layout kernel."""
    s, nc = codes.shape
    bits = 1
    while (1 << bits) < 2 * max(s, 1):
        bits += 1
    keys = np.full((nc, 1 << bits), -1, np.int64)
    shares = np.zeros((nc, 1 << bits))
    modal = np.full(nc, -1, np.int64)
    for k in range(nc):
        best = 0.0
        for i in range(s):
            code = codes[i, k]
            h = _slot(keys, k, code, bits)
            keys[k, h] = code
            shares[k, h] += 1.0
            n = shares[k, h]
            if n > best or (n == best and code < modal[k]):
                best, modal[k] = n, code
        for h in range(1 << bits):
            shares[k, h] /= max(s, 1)
    return keys, shares, modal


@njit(cache=True)
def value_shares(codes, keys, shares, modal):
    """codes (r, nc) -> (r, nc) float32 share of the sample giving node k the same code (0 if
    none did) and (r, nc) float32 whether the code differs from the node's most common one."""
    r, nc = codes.shape
    bits = 0
    while (1 << bits) < keys.shape[1]:
        bits += 1
    freq = np.zeros((r, nc), np.float32)
    differs = np.zeros((r, nc), np.float32)
    for k in range(nc):
        for i in range(r):
            h = _slot(keys, k, codes[i, k], bits)
            freq[i, k] = shares[k, h]
            differs[i, k] = codes[i, k] != modal[k]
    return freq, differs


@njit(cache=True)
def longest_path(n, edge_index):
    """n nodes, edge_index (m, 2) [user, operand] -> (n,) int64 longest chain ending at each node.

    Kahn's algorithm; does not rely on node ids being topologically ordered. Nodes on a cycle
    (never expected) keep depth 0.
    """
    m = edge_index.shape[0]
    indeg = np.zeros(n, np.int64)
    out_ptr = np.zeros(n + 1, np.int64)
    for e in range(m):
        indeg[edge_index[e, 0]] += 1
        out_ptr[edge_index[e, 1] + 1] += 1
    for i in range(n):
        out_ptr[i + 1] += out_ptr[i]
    users = np.empty(m, np.int64)
    fill = out_ptr[:-1].copy()
    for e in range(m):
        v = edge_index[e, 1]
        users[fill[v]] = edge_index[e, 0]
        fill[v] += 1
    depth = np.zeros(n, np.int64)
    queue = np.empty(n, np.int64)
    head, tail = 0, 0
    for i in range(n):
        if indeg[i] == 0:
            queue[tail] = i
            tail += 1
    while head < tail:
        v = queue[head]
        head += 1
        for p in range(out_ptr[v], out_ptr[v + 1]):
            u = users[p]
            if depth[v] + 1 > depth[u]:
                depth[u] = depth[v] + 1
            indeg[u] -= 1
            if indeg[u] == 0:
                queue[tail] = u
                tail += 1
    return depth



@njit(cache=True, inline='always')
def _effective(ncf, j, k, base, fallback, out):
    """Section `base` of node k in config j, or `fallback` where the section is all -1."""
    is_default = True
    for s in range(6):
        if ncf[j, k, base + s] >= 0:
            is_default = False
    for s in range(6):
        out[s] = fallback[s] if is_default else ncf[j, k, base + s]
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
def _source_layout(ncf, j, pos, defaults, fixed, out):
    """The output layout a source carries in config j: its config if it is configurable
    (pos >= 0), else its fixed layout."""
    if pos >= 0:
        _effective(ncf, j, pos, 0, defaults[pos, 0], out)
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
            acc[Q_ROLES + (t * 2 + slot) * N_ROLES + r] += 1.0


@njit(cache=True, inline='always')
def _node_quantities(ncf, j, k, si, sf, shapes, pad, defaults, fixed, roles, freq, modal, acc,
                     eo, ei, ek, tmp, scratch):
    """Add node k's quantities in config j to acc (N_QUANT,), the sums of its group.
    eo/ei/ek receive its effective layouts; tmp (6,) and scratch (2, 6) are work space."""
    r_out, r_in, r_ker = si[k, S_RANK_OUT], si[k, S_RANK_IN], si[k, S_RANK_KER]
    out_default = _effective(ncf, j, k, 0, defaults[k, 0], eo)
    unknown = _checked(eo, r_out, defaults[k, 0])
    _source_layout(ncf, j, si[k, S_IN_POS], defaults, fixed[k, 0], tmp)
    in_default = _effective(ncf, j, k, 6, tmp, ei)
    unknown += _checked(ei, r_in, tmp)
    in_copy = not _same(ei, tmp) and si[k, S_IN_POS] != ANY_SOURCE
    has_ker = si[k, S_HAS_KER] == 1
    ker_default, ker_copy = True, False
    ek[:] = -1
    if has_ker:
        _source_layout(ncf, j, si[k, S_KER_POS], defaults, fixed[k, 1], tmp)
        ker_default = _effective(ncf, j, k, 12, tmp, ek)
        unknown += _checked(ek, r_ker, tmp)
        ker_copy = not _same(ek, tmp) and si[k, S_KER_POS] != ANY_SOURCE
    eb = sf[k, F_BYTES]
    b_out, b_in, b_ker = sf[k, F_VOL_OUT] * eb, sf[k, F_VOL_IN] * eb, sf[k, F_VOL_KER] * eb
    pf_out = _pad_factor(pad, k, 0, eo, r_out)
    pf_in = _pad_factor(pad, k, 1, ei, r_in)
    pf_ker = _pad_factor(pad, k, 2, ek, r_ker) if has_ker else 1.0
    changed = not _same(eo, defaults[k, 0])
    acc[0] += out_default
    acc[1] += in_default
    acc[2] += ker_default and has_ker
    row_major = r_out > 0
    for s in range(r_out):
        if eo[s] != r_out - 1 - s:
            row_major = False
    acc[3] += row_major
    acc[4] += _same(eo, ei)
    if changed:
        users = si[k, S_PLAIN_USERS]
        acc[5] += 1.0
        acc[6] += b_out
        acc[16] += users
        acc[17] += users * b_out
        if si[k, S_TO_OUTPUT] == 1:
            acc[18] += b_out
    acc[7] += np.log2(pf_out)
    acc[8] += (pf_out - 1.0) * b_out
    acc[9] += np.log2(pf_in)
    acc[10] += (pf_in - 1.0) * b_in
    acc[11] += (pf_ker - 1.0) * b_ker
    if in_copy:
        acc[12] += 1.0
        acc[13] += b_in
    if ker_copy:
        acc[14] += 1.0
        acc[15] += b_ker
    # acc[19], acc[20]: sibling terms need other nodes; the caller adds them
    if r_out > 0 and 0 <= eo[0] < r_out:
        acc[21] += shapes[k, 0, eo[0], 1]
        acc[24] += shapes[k, 0, eo[0], 0] % 128 == 0
    if r_out > 1 and 0 <= eo[1] < r_out:
        acc[22] += shapes[k, 0, eo[1], 1]
    if r_in > 0 and 0 <= ei[0] < r_in:
        acc[23] += shapes[k, 1, ei[0], 1]
    if si[k, S_IS_RESHAPE] == 1 and not _reshape_is_bitcast(shapes, k, ei, r_in, eo, r_out,
                                                           scratch[0], scratch[1]):
        acc[25] += 1.0
        acc[26] += b_out
    acc[27] += pf_out * b_out + pf_in * b_in + pf_ker * b_ker
    acc[28] += freq[k]
    acc[29] += modal[k]
    acc[30] += unknown
    # The non-configurable ops downstream that carry this output layout are padded alike
    acc[31] += (pf_out - 1.0) * sf[k, F_CHAIN_BYTES]
    acc[32] += pf_out * sf[k, F_CHAIN_BYTES]
    for slot in range(2):
        _roles(acc, roles, k, 0, eo, r_out, slot)
        _roles(acc, roles, k, 1, ei, r_in, slot)
        if has_ker:
            _roles(acc, roles, k, 2, ek, r_ker, slot)


@njit(cache=True, parallel=True)
def layout_config_features(ncf, rows, si, sf, shapes, pad, defaults, fixed, roles, freq,
                           modal_diff):
    """Per-config sums of node quantities, overall and per conv/dot/reshape group.

    ncf (c, nc, 18) int8 (the whole file or a chunk); rows (r,) int64 configs to featurize;
    si (nc, N_STATIC_INT) int64; sf (nc, N_STATIC_F) float64; shapes (nc, 3, 7, 2) float64
    output/input/kernel dims (padded with 1) and their log2; pad (nc, 3, 7, 7) padding factors;
    defaults (nc, 3, 6) int64 own layouts (-1 padded); fixed (nc, 2, 6) int64 layouts that input /
    kernel sources carry when not configurable; roles (nc, 3, 6) int64 dim roles (-1 none);
    freq, modal_diff (r, nc) float32 -> (r, N_GROUPS * N_QUANT) float64.
    Rows run in parallel, each writing only its own row.
    """
    nc = ncf.shape[1]
    out = np.zeros((rows.size, N_GROUPS * N_QUANT))
    for r in prange(rows.size):
        j = rows[r]
        eo = np.empty(6, np.int64)
        ek = np.empty(6, np.int64)
        tmp = np.empty(6, np.int64)
        scratch = np.empty((2, 6), np.int64)
        eff_in = np.empty((nc, 6), np.int64)
        for k in range(nc):
            base = (si[k, S_GROUP] + 1) % N_GROUPS * N_QUANT   # other ops: block 0
            acc = out[r, base:base + N_QUANT]
            _node_quantities(ncf, j, k, si, sf, shapes, pad, defaults, fixed, roles, freq[r],
                             modal_diff[r], acc, eo, eff_in[k], ek, tmp, scratch)
            first = si[k, S_SIB_FIRST]  # an earlier node reading the same source, or -1
            if first >= 0 and not _same(eff_in[k], eff_in[first]):
                acc[19] += 1.0
                acc[20] += sf[k, F_VOL_IN] * sf[k, F_BYTES]
        for g in range(1, N_GROUPS):   # all = other + conv + dot + reshape
            for t in range(N_QUANT):
                out[r, t] += out[r, g * N_QUANT + t]
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
            _source_layout(ncf, j, merge_pos[m, 0], defaults, merge_fixed[m, 0], a)
            _source_layout(ncf, j, merge_pos[m, 1], defaults, merge_fixed[m, 1], b)
            if not _same(a, b):
                out[r, 0] += 1.0
                out[r, 1] += merge_bytes[m]
    return out
