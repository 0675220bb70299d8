"""A grid whose size depends on a host-level seq loop variable (issue 28): check()
said "could not prove the resource limits: unknown variable 'k'" (binding sizes did
not help) and compile() refused the kernel.  The host loops around a kernel are now
in the resource obligations, each variable in its range."""
from __future__ import annotations

import numpy as np

import gpudsl

SRC = '''
def tri(n: size, x: f32[n]):
    for k in seq(0, n):
        for b in par(0, (n - k + 255) // 256) @ BLOCKS:
            for t in par(0, 256) @ THREADS:
                if k + 256 * b + t < n:
                    x[k + 256 * b + t] += 1.0
'''


def test_grid_of_a_host_loop_variable():
    p = gpudsl.proc_from_source(SRC, namespace=vars(gpudsl))
    assert p.check().ok and p.check(n=1000).ok
    x = np.zeros(300, np.float32)
    p.compile("emulator")(x=x)
    np.testing.assert_array_equal(x, np.arange(1, 301, dtype=np.float32))


def test_block_too_large_in_some_iteration_is_still_found():
    p = gpudsl.proc_from_source(SRC.replace("par(0, 256) @ THREADS", "par(0, 2048) @ THREADS")
                                .replace("256 * b", "2048 * b"), namespace=vars(gpudsl))
    r = p.check()
    assert not r.ok and "2048" in str(r)
