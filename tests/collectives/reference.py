"""numpy meanings of the collective test procs (CUDA's semantics, lane by lane)."""
from __future__ import annotations

import numpy as np


def butterfly(v, op):
    """The 5-step xor butterfly of code generation, in the operand's type."""
    v = np.array(v)
    for m in (16, 8, 4, 2, 1):
        w = v[np.arange(32) ^ m]
        v = v + w if op == "sum" else np.fmax(v, w) if op == "max" else np.fmin(v, w)
    return v


def warps(a):
    return [a[k:k + 32] for k in range(0, len(a), 32)]


def shuffles(x):
    y = np.zeros((64, 4), np.float32)
    for w, v in enumerate(warps(x)):
        for l in range(32):
            t = 32 * w + l
            y[t] = [v[(t + 5) % 32], v[l ^ 3], v[l + 2] if l + 2 < 32 else v[l],
                    v[l - 7] if l >= 7 else v[l]]
    return y


def reductions(x, q):
    y = np.zeros((64, 3), np.float32)
    r = np.zeros((64, 3), np.int32)
    for w, (v, u) in enumerate(zip(warps(x), warps(q))):
        s = slice(32 * w, 32 * w + 32)
        y[s, 0], y[s, 1], y[s, 2] = butterfly(v, "sum"), v.max(), v.min()
        tot = int(u.astype(np.int64).sum())
        r[s, 0] = ((tot + 2 ** 31) % 2 ** 32) - 2 ** 31
        r[s, 1], r[s, 2] = u.max(), u.min()
    return y, r


def votes(x):
    m = np.zeros(64, np.int64)
    c = np.zeros((64, 2), np.int32)
    for w, v in enumerate(warps(x)):
        s = slice(32 * w, 32 * w + 32)
        m[s] = sum(1 << k for k in range(32) if v[k] > 0.5)
        c[s, 0] = int((v > 0.9).any())
        c[s, 1] = int((v > 0.1).all())
    return m, c


def block_sum(x):
    out = np.zeros(x.shape[0], np.float32)
    for r in range(x.shape[0]):
        parts = [butterfly(v, "sum")[0] for v in warps(x[r])]
        out[r] = butterfly(np.array(parts + [0.0] * 24, np.float32), "sum")[0]
    return out
