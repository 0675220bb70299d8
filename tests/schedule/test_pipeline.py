"""rotate_loop and reorder_stmts (issue 23): software pipelining by primitives.

The double-buffered staging loop is derived from the plain one (expand_dim by
``i % 2``, rotate_loop, delete_sync of the barrier the two buffers make needless) and
proved; each primitive's refusals have a test."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, SHARED, THREADS, f32, i32, par, proc, seq, size
from gpudsl.schedule import delete_sync, expand_dim, reorder_stmts, rotate_loop


@proc
def staged(n: size, x: f32[n, 256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[256] @ SHARED
        acc: f32[256] @ SHARED
        for t in par(0, 256) @ THREADS:
            acc[t] = 0.0
        for i in seq(0, n):
            for t in par(0, 256) @ THREADS:
                buf[t] = x[i, t]
            sync()
            for t in par(0, 256) @ THREADS:
                acc[t] += buf[255 - t]
            sync()
        for t in par(0, 256) @ THREADS:
            y[t] = acc[t]


def _run(p, n):
    x = np.random.default_rng(n).standard_normal((n, 256)).astype(np.float32)
    want = np.zeros(256, np.float32)
    gpudsl.interpret(staged, x=x, y=want)
    got_i, got_e = np.zeros(256, np.float32), np.zeros(256, np.float32)
    gpudsl.interpret(p, x=x, y=got_i)
    p.compile("emulator")(x=x, y=got_e)
    return want, got_i, got_e


def _roundtrip(p):
    assert gpudsl.proc_from_source(str(p)).ir == p.ir


def test_rotate_loop_keeps_the_trace_and_the_proof():
    r = rotate_loop(staged, "i", 1)
    text = str(r)
    assert "if 0 < n:" in text and "for i in seq(0, n - 1):" in text
    assert "buf[t] = x[i + 1, t]" in text and "buf[t] = x[0, t]" in text
    assert r.check().ok
    _roundtrip(r)
    for n in (1, 2, 5):
        want, got_i, got_e = _run(r, n)
        np.testing.assert_array_equal(got_i, want)
        np.testing.assert_allclose(got_e, want, rtol=1e-6)


def test_double_buffering_derived_by_primitives_is_proved_with_one_barrier_per_step():
    d = rotate_loop(expand_dim(staged, "buf", "2", "i % 2"), "i", 1)
    d = delete_sync(d, d.find("sync()", many=True)[1])
    loop = d.find_loop("i").node()
    assert sum(type(s).__name__ == "Sync" for s in loop.body) == 1
    assert "buf[(i + 1) % 2, t] = x[i + 1, t]" in str(d)
    assert d.check().ok
    for n in (1, 4):
        want, got_i, got_e = _run(d, n)
        np.testing.assert_array_equal(got_i, want)
        np.testing.assert_allclose(got_e, want, rtol=1e-6)


def test_double_buffering_with_one_buffer_is_refused_with_a_witness():
    r = rotate_loop(staged, "i", 1)
    with pytest.raises(gpudsl.SchedulingError) as e:
        delete_sync(r, r.find("sync()", many=True)[1])
    assert "buf" in str(e.value) and e.value.witness


@proc
def rows(n: size, x: f32[n], y: f32[n], z: f32[n]):
    for i in seq(0, n):
        tmp: f32
        tmp = x[i] * 2.0
        y[i] = tmp
        z[i] = x[i] + 1.0


def test_rotate_loop_with_constant_bounds_has_no_guard_and_freshens_names():
    @proc
    def c8(x: f32[8], y: f32[8], z: f32[8]):
        for i in seq(0, 8):
            t: f32
            t = x[i] * 2.0
            y[i] = t
            z[i] = y[i] + 1.0

    r = rotate_loop(c8, "i", 3)
    top = [type(x).__name__ for x in r.ir.body]
    assert "If" not in top and top.count("Alloc") == 1
    assert r.ir.body[0].name != "t"  # the prologue's copy is renamed: no shadowing
    x = np.arange(8, dtype=np.float32)
    y, z = np.zeros(8, np.float32), np.zeros(8, np.float32)
    gpudsl.interpret(r, x=x, y=y, z=z)
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(z, 2 * x + 1)
    _roundtrip(r)


def test_rotate_loop_refusals():
    with pytest.raises(gpudsl.SchedulingError, match="allocated in the rotated part"):
        rotate_loop(rows, "i", 1)
    with pytest.raises(gpudsl.SchedulingError, match="0 < n < 4"):
        rotate_loop(rows, "i", 4)
    with pytest.raises(gpudsl.SchedulingError, match="only a seq loop"):
        rotate_loop(staged, "t", 1)

    @proc
    def reads_bound(n: size, m: i32[1], y: f32[n]):
        assert n >= 4
        for i in seq(0, m[0]):
            m[0] = 2
            y[i] = 1.0

    with pytest.raises(gpudsl.SchedulingError, match="which its body writes"):
        rotate_loop(reads_bound, "i", 1)


def test_reorder_stmts_swaps_independent_statements_and_forwards_cursors():
    c = rows.find("y[_] = _")
    r = reorder_stmts(rows, c.expand(0, 1))
    body = r.find_loop("i").node().body
    assert type(body[2]).__name__ == "Assign" and body[2].name == "z"
    assert r.forward(c).node().name == "y"
    x = np.arange(5, dtype=np.float32)
    ys = [np.zeros(5, np.float32) for _ in range(4)]
    gpudsl.interpret(rows, x=x, y=ys[0], z=ys[1])
    gpudsl.interpret(r, x=x, y=ys[2], z=ys[3])
    np.testing.assert_array_equal(ys[0], ys[2])
    np.testing.assert_array_equal(ys[1], ys[3])


def test_reorder_stmts_refuses_a_dependence_with_a_witness():
    with pytest.raises(gpudsl.SchedulingError, match="depend on each other") as e:
        reorder_stmts(rows, rows.find("tmp = _").expand(0, 1))
    assert "tmp" in str(e.value)
    with pytest.raises(gpudsl.SchedulingError, match="allocated by the first"):
        reorder_stmts(rows, rows.find("tmp: _").expand(0, 1))
    with pytest.raises(gpudsl.SchedulingError, match="two adjacent statements"):
        reorder_stmts(rows, rows.find("tmp = _").expand(0, 2))

    @proc
    def atomics(x: f32[1]):
        for i in seq(0, 2):
            atomic_add(x[0], 1.0)
            atomic_exch(x[0], 3.0)

    with pytest.raises(gpudsl.SchedulingError, match="depend on each other"):
        reorder_stmts(atomics, atomics.find("atomic_add(_, _)").expand(0, 1))


def test_reorder_stmts_never_moves_a_barrier():
    with pytest.raises(gpudsl.SchedulingError, match="synchronizing statement"):
        reorder_stmts(staged, staged.find("sync()").expand(0, 1))
    # the two thread loops around it cannot meet either way: the barrier stays
    with pytest.raises(gpudsl.SchedulingError, match="synchronizing statement"):
        reorder_stmts(staged, staged.find("sync()").expand(1, 0))
