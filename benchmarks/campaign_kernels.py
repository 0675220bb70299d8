"""Run every standard-library node once on small odd and tile-sized shapes, and
compare with numpy: the program compute-sanitizer watches in the GPU campaign
(``benchmarks/gpu_campaign.py``).  Exit status 1 on a wrong result.

``--list`` prints the cases without running them (no GPU needed)."""
from __future__ import annotations

import sys

import numpy as np


def cases():
    """(name, function of a numpy Generator returning (result, expected))."""
    from gpudsl import ops

    def mm(m, n, k):
        def f(g):
            a, b = g.standard_normal((m, n), np.float32), g.standard_normal((n, k), np.float32)
            return ops.matmul(a, b), a @ b
        return f

    def bin_(op, sa, sb, ref):
        def f(g):
            a, b = g.standard_normal(sa, np.float32), g.standard_normal(sb, np.float32)
            return getattr(ops, op)(a, b), ref(a, b)
        return f

    def un(op, shape, ref):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            return getattr(ops, op)(x), ref(x)
        return f

    def perm(shape, p):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            return ops.permute(x, p), np.transpose(x, p)
        return f

    def sl(shape, b, e):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            return ops.slice(x, b, e), x[b:e]
        return f

    def rs(shape, b, e):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            r = g.standard_normal((e - b,) + shape[1:], np.float32)
            want = x.copy()
            want[b:e] = r
            out = ops.replace_slice(x, r, np.array([b]), np.array([e]))
            return (x if out is None else out), want
        return f

    silu = lambda x: x / (1 + np.exp(-x))  # noqa: E731
    return [
        ("matmul 256^3", mm(256, 256, 256)), ("matmul 130x70x33", mm(130, 70, 33)),
        ("add 2-D", bin_("add", (300, 257), (300, 257), np.add)),
        ("add broadcast", bin_("add", (64, 129), (1, 129), np.add)),
        ("mul broadcast", bin_("mul", (3, 64, 33), (3, 1, 33), np.multiply)),
        ("relu", un("relu", (1000, 3), lambda x: np.maximum(x, 0))),
        ("silu", un("silu", (4097,), silu)),
        ("permute 2-D", perm((300, 129), (1, 0))),
        ("permute 3-D", perm((17, 64, 33), (2, 0, 1))),
        ("slice", sl((100, 65), 7, 93)), ("replace_slice", rs((100, 65), 7, 93)),
    ]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cs = cases()
    if "--list" in argv:
        for name, _ in cs:
            print(name)
        return 0
    g = np.random.default_rng(0)
    bad = 0
    for name, f in cs:
        got, want = f(g)
        ok = np.allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
