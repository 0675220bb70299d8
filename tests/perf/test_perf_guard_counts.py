"""The report's FLOPs and bytes under edge guards (regression: the two edge kernels of
matmul 1000^3 counted the guarded-out threads of their last block, 2.048e9 FLOPs in
all instead of 2e9, and the writes of c for those threads)."""
from __future__ import annotations

from gpudsl import BLOCKS, THREADS, f32, par, proc, size
from gpudsl.stdlib import matmul


def test_matmul_edge_kernels_exact():
    p, b = matmul.cut_kernel(False, 4), dict(m=1000, n=1000, k=1000)
    k0, k1, k2 = p.perf(**b).kernels
    assert sum(k.flops * k.launches for k in (k0, k1, k2)) == 2 * 1000 ** 3
    assert k1.flops == 2 * 896 * 104 * 1000  # 896 rows x the last 104 columns
    assert k2.flops == 2 * 104 * 1000 * 1000  # the last 104 rows x every column
    # a and b: capped at their size; c: only the elements the kernel writes
    assert k1.bytes == 2 * 4 * 1000 * 1000 + 4 * 896 * 104
    assert k2.bytes == 2 * 4 * 1000 * 1000 + 4 * 104 * 1000


def test_one_kernel_matmul_counts_only_the_real_elements():
    # the default for 1000^3: one kernel whose edge blocks are guarded inside
    p, b = matmul.matmul_kernel((1000, 1000), (1000, 1000))
    (k,) = p.perf(**b).kernels
    assert k.flops * k.launches == 2 * 1000 ** 3


@proc
def guarded_2d(n: size, m: size, x: f32[n, m], y: f32[n, m]):
    for bi in par(0, (n + 7) // 8) @ BLOCKS:
        for bj in par(0, (m + 31) // 32) @ BLOCKS:
            for ty in par(0, 8) @ THREADS:
                for tx in par(0, 32) @ THREADS:
                    if 8 * bi + ty < n and 32 * bj + tx < m:
                        if 8 * bi + ty < 3:  # nested, correlated with the outer guard
                            y[8 * bi + ty, 32 * bj + tx] = x[8 * bi + ty, 32 * bj + tx] * 2.0
                        else:
                            y[8 * bi + ty, 32 * bj + tx] = x[8 * bi + ty, 32 * bj + tx] + 1.0


def test_nested_and_else_guards_exact():
    (k,) = guarded_2d.perf(n=10, m=40).kernels
    assert k.flops == 10 * 40  # one FLOP per element, on either side of the inner if
    assert k.bytes == 2 * 4 * 10 * 40
    (k,) = guarded_2d.perf(n=1000, m=1000).kernels
    assert k.flops == 1000 * 1000
