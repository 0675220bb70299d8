"""A kernel call reuses the checked sizes, variant and launches of an earlier call with
the same sizes and shapes; what changes between calls (scalars, sizes, the arrays, a
failing assertion) must still be seen."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import BLOCKS, THREADS, LaunchError, f32, index, par, proc, size


@proc
def scaled(n: size, k: index, a: f32, x: f32[n], y: f32[n]):
    assert k >= 0 and k < n
    for b in par(0, (n + 31) // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if b * 32 + t < n:
                y[b * 32 + t] = a * x[b * 32 + t] + x[k]


def test_scalars_sizes_and_assertions_after_a_cached_call():
    kern = scaled.compile("emulator")
    x = np.arange(40, dtype=np.float32)
    y = np.zeros(40, np.float32)
    for a, k in ((2.0, 1), (3.0, 1), (3.0, 5)):  # the 2nd call hits the cache
        kern(k=k, a=np.float32(a), x=x, y=y)
        np.testing.assert_array_equal(y, a * x + x[k])
    x2, y2 = np.arange(70, dtype=np.float32), np.zeros(70, np.float32)
    kern(k=3, a=np.float32(1), x=x2, y=y2)  # another size: other grid
    np.testing.assert_array_equal(y2, x2 + 3)
    with pytest.raises(LaunchError, match="k < n"):
        kern(k=40, a=np.float32(1), x=x, y=y)  # a failed assertion is never cached
    with pytest.raises(LaunchError, match="shape"):
        kern(k=1, a=np.float32(1), x=x, y=y2)
    kern(k=2, a=np.float32(1), x=x, y=y)
    np.testing.assert_array_equal(y, x + 2)


def test_a_pickled_proc_hashes_afresh():
    """A proc caches its hash; the cache must not travel in a pickle (string hashes
    differ between processes)."""
    import pickle

    hash(scaled)
    q = pickle.loads(pickle.dumps(scaled))
    assert q == scaled and q._hash is None and hash(q) == hash(scaled)
