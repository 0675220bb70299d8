"""Issue 40: a scalar local of an unscheduled proc defaults to GLOBAL; after
parallelize_loop check() said ok and compile failed ("the GLOBAL array 'af' is allocated
inside a kernel").  The primitive now places it in REGISTER, and check() refuses a GLOBAL
allocation inside a kernel (proved always means compilable)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, f32, proc, seq, size
from gpudsl.schedule import divide_loop, parallelize_loop


@proc
def scale(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        af: f32
        af = x[i] * 2.0
        y[i] = af + 1.0


def _mapped():
    p = divide_loop(scale, "i", 32, ["bi", "ti"], tail="guard")
    return parallelize_loop(parallelize_loop(p, "bi", BLOCKS), "ti", THREADS)


def test_a_scalar_of_a_mapped_loop_becomes_a_register():
    q = _mapped()
    assert "af: f32 @ REGISTER" in str(q) and q.check().ok


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_parallelized_proc_compiles_and_means_the_same():
    x = np.arange(70, dtype=np.float32)
    want = np.zeros(70, np.float32)
    scale.interpret(x=x, y=want)
    got = np.zeros(70, np.float32)
    _mapped().compile("emulator")(x=x, y=got)
    assert np.array_equal(got, want)


def test_a_block_scalar_that_threads_use_is_not_moved_into_registers():
    @proc
    def shared_scalar(x: f32[32]):
        for b in seq(0, 1):
            s: f32
            s = 2.0
            for t in par(0, 32):
                x[t] = s

    # one per block, read by its par loop: a register per thread would change its meaning,
    # and a GLOBAL one cannot live in a kernel, so the mapping is refused
    with pytest.raises(gpudsl.SchedulingError, match="'s' is allocated inside a kernel"):
        parallelize_loop(shared_scalar, "b", BLOCKS)


def test_check_refuses_a_global_allocated_inside_a_kernel():
    p = gpudsl.proc_from_source('''
def k(x: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            af: f32 @ GLOBAL
            af = 1.0
            x[t] = af
''', vars(gpudsl))
    r = p.check()
    assert not r.ok and [d.kind for d in r.diagnostics] == ["mapping"]
    assert "allocated inside a kernel" in str(r) and "@ REGISTER" in str(r)


from gpudsl import par  # noqa: E402  (used in a proc above)


def test_block_memories_stay_where_they_are():
    # found by the differential test: a split barrier (a SHARED scalar) became REGISTER
    p = gpudsl.proc_from_source('''
def p(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        bar: barrier @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        arrive(bar, 0, 64)
        wait(bar, 0, 64)
        for t in par(0, 64) @ THREADS:
            y[t] = s[63 - t]
''', vars(gpudsl))
    q = parallelize_loop(p, "b", BLOCKS)
    assert "bar: barrier @ SHARED" in str(q) and "s: f32[64] @ SHARED" in str(q)
    assert q.check().ok
