"""The graph stage's Numba kernel: longest paths over the edge list (a graph's depth and each
node's distance to the output). Apart from the row kernels, which never call it."""
from __future__ import annotations

import numpy as np
from numba import njit


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
