"""Schedule, check() and CUDA-generation time of a few standard-library kernels
(issue 41: edits that return their forwarding, memories that carry their facts).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_edits.py [--repeat 3] [--cpu]
Prints, per kernel, the best of --repeat for building it (the scheduling
primitives), check() (cache cleared) and generating its CUDA source.
"""
from __future__ import annotations

import argparse
import time


def _kernels():
    from gpudsl.stdlib import matmul, permute, rms_norm, softmax

    return [("matmul big_kernel", matmul.big_kernel, (False,)),
            ("matmul cut_kernel v4", matmul.cut_kernel, (False, 4)),
            ("permute tiled", permute._kernel, ((1, 0), "tiled")),
            ("softmax_kernel 128", softmax.softmax_kernel, (128,)),
            ("rms_norm_kernel", rms_norm.rms_norm_kernel, ()),
            ("permute copy", permute._kernel, ((0, 2, 1), "copy"))]


def _best(f, repeat, cpu=False):
    clock = time.process_time if cpu else time.perf_counter
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        f()
        best = min(best, clock() - t0)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpu", action="store_true",
                    help="process CPU time instead of wall time (steadier on a busy machine)")
    ns = ap.parse_args(argv)
    from gpudsl.analysis.check import _cache

    tot = [0.0, 0.0, 0.0]
    print(f"{'kernel':26s} {'schedule':>10s} {'check':>10s} {'cuda':>10s}")
    for name, fn, args in _kernels():
        if fn is None:
            continue

        def build():
            fn.cache_clear()
            return fn(*args)

        def check():
            _cache.clear()
            fn(*args).check()

        t = (_best(build, ns.repeat, ns.cpu), _best(check, ns.repeat, ns.cpu),
             _best(lambda: fn(*args).cuda_source(), ns.repeat, ns.cpu))
        tot = [a + b for a, b in zip(tot, t)]
        print(f"{name:26s} " + " ".join(f"{x * 1000:8.1f}ms" for x in t))
    print(f"{'total':26s} " + " ".join(f"{x * 1000:8.1f}ms" for x in tot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
