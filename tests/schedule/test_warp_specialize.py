"""warp_specialize (gpudsl/schedule/producers.py): the design's producer/consumer loop
derived by primitives from the plain staged loop, proved by check(), equal to the input
in the interpreter (with the race detector) and on the emulator, compiled by NVRTC for
sm_80 and sm_90 without spills; its refusals."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, SHARED, THREADS, async_commit, async_copy, async_wait, f32, par,
                    proc, seq, size, sync)
from gpudsl.errors import SchedulingError
from gpudsl.ir.nodes import Arrive, Sync, Wait
from gpudsl.ir.visitor import walk
from gpudsl.schedule import lift_alloc, warp_specialize


@proc
def staged(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        for i in seq(0, n):
            buf: f32[32] @ SHARED
            for t in par(0, 32) @ THREADS:
                buf[t] = x[i, t]
            sync()
            for t in par(0, 32) @ THREADS:
                y[i, t] = buf[t] * 2.0
            sync()


def derive(stages):
    """The design's producer/consumer loop, by primitives (not written by hand)."""
    p = lift_alloc(staged, "buf")
    return warp_specialize(p, "i", producers=(0, 32), consumers=(32, 64), stages=stages)


def _run(p, n, how):
    x = np.arange(n * 32, dtype=np.float32).reshape(n, 32) - 7.0
    y = np.zeros_like(x)
    if how == "interpret":
        gpudsl.interpret(p, detect_races=True, x=x, y=y)
    else:
        p.compile("emulator")(x=x, y=y)
    return y


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_derived_pipeline_is_proved_and_means_the_same(stages):
    q = derive(stages)
    assert q.check().ok, str(q.check())
    nodes = list(walk(q.ir))
    arrives = {(a.name, a.lo.val, a.hi.val) for a in nodes if isinstance(a, Arrive)}
    waits = {(a.name, a.lo.val, a.hi.val) for a in nodes if isinstance(a, Wait)}
    names = [f"full{s}" for s in range(stages)] if stages > 1 else ["full"]
    for f in names:  # one full/empty pair per stage: producers fill, consumers drain
        e = f.replace("full", "empty")
        assert (f, 0, 32) in arrives and (f, 32, 64) in waits
        assert (e, 32, 64) in arrives and (e, 0, 32) in waits
    # no block barrier left in the steady state: the only sync() joins the ranges
    assert sum(isinstance(s, Sync) for s in nodes) == 1
    for n in range(1, 8):
        ref = _run(staged, n, "interpret")
        np.testing.assert_array_equal(_run(q, n, "interpret"), ref)
        np.testing.assert_array_equal(_run(q, n, "emulator"), ref)


def test_derived_matches_the_hand_written_design_loop():
    """stages=1 gives the design's loop of docs/language.md (pipeline_split) up to
    names: one full/empty pair, `empty` arrived once before the loop."""
    q = derive(1)
    text = str(q)
    for line in ["arrive(empty, 32, 64)", "wait(empty, 0, 32)", "arrive(full, 0, 32)",
                 "wait(full, 32, 64)", "y[i, t - 32] = buf[t - 32] * 2.0"]:
        assert line in text, text


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_without_spills(arch):
    try:
        from gpudsl.runtime.nvrtc import compile_cubin, compiler_version

        compiler_version()
    except Exception as e:  # pragma: no cover - NVRTC is part of the test extras
        pytest.skip(f"NVRTC not available: {e}")
    q = derive(2)
    src = q.cuda_source()
    assert "mbarrier" in src
    res = compile_cubin(src, arch).resources
    assert res
    for name, r in res.items():
        assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0, (name, r)


def test_a_constant_trip_count_needs_no_tail():
    p = gpudsl.proc_from_source(str(lift_alloc(staged, "buf")).replace(
        "seq(0, n)", "seq(0, 5)").replace("    for b", "    assert n == 5\n    for b"))
    q = warp_specialize(p, "i", producers=(0, 32), consumers=(32, 64), stages=2)
    assert "if " not in str(q) and q.check().ok
    np.testing.assert_array_equal(_run(q, 5, "emulator"), _run(p, 5, "interpret"))


def test_refusals():
    p = lift_alloc(staged, "buf")
    with pytest.raises(SchedulingError, match="overlap"):
        warp_specialize(p, "i", producers=(0, 64), consumers=(32, 96))
    with pytest.raises(SchedulingError, match="whole warps"):
        warp_specialize(p, "i", producers=(0, 16), consumers=(32, 64))
    with pytest.raises(SchedulingError, match="allocated outside"):
        warp_specialize(staged, "i")  # buf is allocated in the loop
    wide = gpudsl.proc_from_source(str(p).replace("par(0, 32)", "par(0, 64)")
                                   .replace("f32[32]", "f32[64]").replace("f32[n, 32]",
                                                                          "f32[n, 64]"))
    with pytest.raises(SchedulingError, match="more than"):
        warp_specialize(wide, "i", producers=(0, 32), consumers=(32, 64))
    # the copies read what the compute writes: producers running ahead read too soon
    rw = gpudsl.proc_from_source(str(p).replace("y[i, t] = buf[t] * 2.0",
                                                "x[i, t] = buf[t] * 2.0"))
    with pytest.raises(SchedulingError, match="which the loop writes"):
        warp_specialize(rw, "i")
    # not the staged form (no barrier between copies and compute)
    nosync = gpudsl.proc_from_source(str(p).replace("            sync()\n", "", 1))
    with pytest.raises(SchedulingError, match="is not"):
        warp_specialize(nosync, "i")


@proc
def shared_table(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        w: f32[32] @ SHARED
        buf: f32[32] @ SHARED
        for t in par(32, 64) @ THREADS:
            w[t - 32] = x[0, t - 32]
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[t] = x[i, t]
            sync()
            for t in par(0, 32) @ THREADS:
                y[i, t] = buf[t] * w[31 - t]


def test_a_result_only_a_chain_of_barriers_orders_is_proved():
    """Threads 32-63 write the table before the loop; moved onto threads 32-63, the
    readers are the writers' neighbours.  No one barrier orders them, but a chain does
    (issue 35): the writers' first arrive on ``empty0`` releases the producers, whose
    arrive on ``full0`` the readers wait for.  check() follows the chain (it used to
    refuse this), and the detector runs it clean."""
    assert shared_table.check().ok
    q = warp_specialize(shared_table, "i", producers=(0, 32), consumers=(32, 64))
    assert q.check().ok
    for n in (1, 2, 3):
        x = np.random.default_rng(n).standard_normal((n, 32)).astype(np.float32)
        y = np.zeros_like(x)
        gpudsl.interpret(q, n=n, x=x, y=y, detect_races=True)
        assert np.allclose(y, x * x[0][::-1][None, :])


def test_a_result_check_does_not_prove_is_refused_with_a_witness():
    """Threads 64-95 write the table before the loop; in the input the loop's first
    barrier orders those writes before the reads.  Specialized onto threads 0-63, the
    writers take part in no barrier of the loop: check() finds the race and the
    primitive refuses, showing it."""
    p = gpudsl.proc_from_source(str(shared_table).replace("par(32, 64)", "par(64, 96)")
                                .replace("t - 32]", "t - 64]"))
    assert p.check().ok
    with pytest.raises(SchedulingError, match="not proved") as e:
        warp_specialize(p, "i", producers=(0, 32), consumers=(32, 64))
    assert e.value.witness
    assert e.value.witness["thread1"]["threadIdx"][0] >= 64


def test_cursors_forward_to_the_main_loop():
    p = lift_alloc(staged, "buf")
    c = p.find("y[_] = _")
    q = warp_specialize(p, "i", stages=2)
    assert q.forward(c).node().iter == "io"


@proc
def staged_async(n: size, x: f32[n, 128], y: f32[n, 128]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[128] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                async_copy(buf[4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4])
                async_commit()
                async_wait(0)
            sync()
            for t in par(0, 128) @ THREADS:
                y[i, t] = buf[127 - t] * 2.0
            sync()


def test_producers_of_async_copies():
    """One producer warp issues 16-byte async copies (each landed by its own thread's
    wait before the arrive on full), four consumer warps compute: proved, equal to the
    input in the interpreter and on the emulator, cp.async in the CUDA."""
    q = warp_specialize(staged_async, "i", producers=(0, 32), consumers=(32, 160), stages=3)
    assert q.check().ok
    for n in (1, 3, 4, 7):
        x = np.arange(n * 128, dtype=np.float32).reshape(n, 128)
        y = np.zeros_like(x)
        gpudsl.interpret(q, detect_races=True, x=x, y=y)
        assert np.array_equal(y, 2 * x[:, ::-1])
        y2 = np.zeros_like(x)
        q.compile("emulator")(x=x, y=y2)
        assert np.array_equal(y2, y)
    assert "cp.async.cg.shared.global" in q.cuda_source()


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_ring_output_is_proved_and_keeps_the_meaning(stages):
    """``ring=True`` (issue 35): two barrier rings of ``stages`` elements and one loop
    on element ``i % stages``, instead of unrolled pairs of barriers."""
    q = warp_specialize(shared_table, "i", producers=(0, 32), consumers=(32, 64),
                        stages=stages, ring=True)
    text = str(q)
    assert f"full: barrier[{stages}] @ SHARED" in text and "full0" not in text
    assert q.check().ok
    k = q.compile("emulator")
    for n in (1, 2, 5):
        x = np.random.default_rng(n).standard_normal((n, 32)).astype(np.float32)
        y, z = np.zeros_like(x), np.zeros_like(x)
        gpudsl.interpret(q, n=n, x=x, y=y, detect_races=True)
        k(n=n, x=x, y=z)
        assert np.allclose(y, x * x[0][::-1][None, :]) and np.array_equal(y, z)


def test_ring_output_refuses_what_it_cannot_prove():
    p = gpudsl.proc_from_source(str(shared_table).replace("par(32, 64)", "par(64, 96)")
                                .replace("t - 32]", "t - 64]"))
    with pytest.raises(SchedulingError, match="not proved"):
        warp_specialize(p, "i", producers=(0, 32), consumers=(32, 64), ring=True)
