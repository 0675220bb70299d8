"""Bulk tensor copies (``tma_load``, issue 35): parsed and printed, interpreted (the copy
lands with the barrier phase the issuing thread's next arrive completes; edges clipped to
zeros), checked for all sizes (in flight until that phase, the issuer arrives after it,
aligned rows and destination, sm_90a), emulated (tensor maps built at launch), lowered to
``cp.async.bulk.tensor`` (UTMALDG in the SASS); a TMA-fed ring GEMM main loop is proved,
equals numpy in the interpreter and the emulator, and feeds HGMMA with no shared-memory
loads; twins refused, the detector agrees."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import Error, InterpError, RaceError, proc_from_source

TILE = '''
@proc
def tile(m: size, n: size, a: f16[m, n], y: f16[m, n]):
    assert n % 8 == 0
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        s: f16[16, 64] @ SHARED
        bar: barrier @ SHARED
        for t in par(0, 1) @ THREADS:
            tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64], bar=bar)
        arrive(bar, 0, 1)
        wait(bar, 0, 64)
        for t in par(0, 64) @ THREADS:
            for r in seq(0, 16):
                if 16 * b + r < m and t < n:
                    y[16 * b + r, t] = s[r, t]
'''

TILE_TWINS = {
    "no wait": ("        wait(bar, 0, 64)\n", ""),
    "another barrier orders the issue, not the landing": (
        "        arrive(bar, 0, 1)\n        wait(bar, 0, 64)\n",
        "        arrive(other, 0, 1)\n        wait(other, 0, 64)\n        arrive(bar, 0, 1)\n"),
    "the issuer never arrives": ("for t in par(0, 1) @ THREADS:\n            tma",
                                 "for t in par(1, 2) @ THREADS:\n            tma"),
    # found by the soundness test: the issuer copies again without waiting for the first
    # copy (it is not among the waiters), so two copies may write the tile at once
    "the issuer copies again without waiting": (
        "        for t in par(0, 1) @ THREADS:\n"
        "            tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64], bar=bar)\n"
        "        arrive(bar, 0, 1)\n        wait(bar, 0, 64)\n",
        "        for k in seq(0, 2):\n"
        "            for t in par(0, 1) @ THREADS:\n"
        "                tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64], bar=bar)\n"
        "            arrive(bar, 0, 1)\n            wait(bar, 32, 64)\n"
        "        wait(bar, 0, 32)\n"),
}


def _twin(src, old, new):
    assert old in src
    out = src.replace(old, new)
    return out.replace("        bar: barrier @ SHARED\n",
                       "        bar: barrier @ SHARED\n        other: barrier @ SHARED\n")


def _tile_args(m, n):
    a = (np.arange(m * n).reshape(m, n) % 97 - 40).astype(np.float16)
    return a, np.zeros((m, n), np.float16)


def test_round_trip():
    p = proc_from_source(TILE)
    assert proc_from_source(str(p)).ir == p.ir
    assert "tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64], bar=bar)" in str(p)


@pytest.mark.parametrize("m,n", [(16, 64), (37, 64), (5, 40), (33, 8)])
def test_the_interpreter_copies_the_box_and_clips_its_edges(m, n):
    p = proc_from_source(TILE)
    a, y = _tile_args(m, n)
    gpudsl.interpret(p, a=a, y=y, detect_races=True)
    assert (y == a).all()


def test_proved_for_every_size_on_sm90a_only():
    p = proc_from_source(TILE)
    assert p.check(target="sm_90a").ok
    assert p.check(target="sm_90").kinds() == {"target"}


@pytest.mark.parametrize("twin", sorted(TILE_TWINS))
def test_twins_are_refused_and_the_detector_agrees(twin):
    p = proc_from_source(_twin(TILE, *TILE_TWINS[twin]))
    assert "race" in p.check(target="sm_90a").kinds()
    a, y = _tile_args(37, 64)
    with pytest.raises((RaceError, InterpError)):
        gpudsl.interpret(p, a=a, y=y, detect_races=True)


def test_misaligned_rows_and_destinations_are_refused():
    p = proc_from_source(TILE.replace("    assert n % 8 == 0\n", ""))
    rep = p.check(target="sm_90a")
    assert rep.kinds() == {"bounds"} and "16 bytes" in str(rep)
    src = TILE.replace("s: f16[16, 64]", "s: f16[17, 8]").replace(
        "tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64]",
        "tma_load(s[1:17, 0:8], a[16 * b:16 * b + 16, 0:8]").replace(
        "if 16 * b + r < m and t < n:", "if 16 * b + r < m and t < 8:").replace(
        "y[16 * b + r, t] = s[r, t]", "y[16 * b + r, t] = s[r + 1, t]")
    rep = proc_from_source(src).check(target="sm_90a")
    assert "bounds" in rep.kinds() and "128 bytes" in str(rep)


@pytest.mark.parametrize("bad, why", [
    ("tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64])", "bar="),
    ("tma_load(s[0:16, 0:60], a[16 * b:16 * b + 16, 0:60], bar=bar)", "multiple of 16"),
    ("tma_load(s[0:8, 0:64], a[16 * b:16 * b + 16, 0:64], bar=bar)", "extents"),
    ("tma_load(a[0:16, 0:64], s[0:16, 0:64], bar=bar)", "between a GLOBAL box and a SHARED tile"),
])
def test_malformed_copies_are_refused_by_the_parser(bad, why):
    src = TILE.replace("tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64], bar=bar)", bad)
    with pytest.raises(Error, match=why.replace("(", r"\(")):
        proc_from_source(src)


@pytest.mark.parametrize("m,n", [(37, 64), (5, 40), (33, 8)])
def test_the_emulator_copies_the_box_and_clips_its_edges(m, n):
    a, y = _tile_args(m, n)
    proc_from_source(TILE).compile("emulator")(a=a, y=y)
    assert (y == a).all()


def test_a_source_the_tensor_map_cannot_describe_is_refused_at_launch():
    from gpudsl.errors import LaunchError
    k = proc_from_source(TILE).compile("emulator")
    a, y = _tile_args(16, 72)
    with pytest.raises(LaunchError, match="16 bytes"):
        k(a=np.frombuffer(a.tobytes() + b"\0" * 2, np.float16, offset=2).reshape(16, 72),
          y=y)


RING = '''
@proc
def gemm_tma(m: size, n: size, k: size, a: f16[m, k], bt: f16[n, k], c: f32[m, n]):
    assert k % 8 == 0
    for bm in par(0, (m + 63) // 64) @ BLOCKS:
        for bn in par(0, (n + 63) // 64) @ BLOCKS:
            acc: f32[128, 32] @ REGISTER
            a_s: f16[8, 64, 8] @ SHARED
            b_s: f16[8, 64, 8] @ SHARED
            full: barrier[4] @ SHARED
            empty: barrier[4] @ SHARED
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    acc[t, i] = 0.0
            for j in seq(0, 4):
                arrive(empty[j], 0, 128)
            for ks in seq(0, (k + 15) // 16):
                wait(empty[ks % 4], 128, 129)
                for t in par(128, 129) @ THREADS:
                    for h in seq(0, 2):
                        tma_load(a_s[2 * (ks % 4) + h, 0:64, 0:8], a[64 * bm:64 * bm + 64, 16 * ks + 8 * h:16 * ks + 8 * h + 8], bar=full[ks % 4])
                        tma_load(b_s[2 * (ks % 4) + h, 0:64, 0:8], bt[64 * bn:64 * bn + 64, 16 * ks + 8 * h:16 * ks + 8 * h + 8], bar=full[ks % 4])
                arrive(full[ks % 4], 128, 129)
                wait(full[ks % 4], 0, 128)
                for t in par(0, 128) @ THREADS:
                    wgmma(acc[t, 0:32], a_s[2 * (ks % 4):2 * (ks % 4) + 2, 0:64, 0:8],
                          b_s[2 * (ks % 4):2 * (ks % 4) + 2, 0:64, 0:8])
                wgmma_commit()
                wgmma_wait(0)
                arrive(empty[ks % 4], 0, 128)
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    if 64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2) < m and 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2 < n:
                        c[64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
'''

RING_TWINS = {
    # the consumers free the slot before their wgmma has landed: the next copy overwrites it
    "early release": ("                wgmma_commit()\n                wgmma_wait(0)\n"
                      "                arrive(empty[ks % 4], 0, 128)\n",
                      "                arrive(empty[ks % 4], 0, 128)\n"
                      "                wgmma_commit()\n                wgmma_wait(0)\n"),
    # the consumers multiply the slot the copies are still filling
    "no wait for the tile": ("                wait(full[ks % 4], 0, 128)\n", ""),
    # the producer refills a slot the consumers may still read
    "no wait for the slot": ("                wait(empty[ks % 4], 128, 129)\n", ""),
}


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    bt = rng.integers(-3, 4, (n, k)).astype(np.float16)
    return a, bt, a.astype(np.float32) @ bt.astype(np.float32).T


def test_the_tma_ring_main_loop_is_proved_for_every_size():
    assert proc_from_source(RING).check(target="sm_90a").ok


@pytest.mark.parametrize("shape", [(64, 64, 64), (70, 33, 40)])
def test_the_tma_ring_equals_numpy_with_edges_clipped(shape):
    a, bt, want = _operands(*shape)
    c = np.zeros(want.shape, np.float32)
    gpudsl.interpret(proc_from_source(RING), a=a, bt=bt, c=c, detect_races=True)
    assert (c == want).all()


@pytest.mark.parametrize("twin", sorted(RING_TWINS))
def test_ring_twins_are_refused_and_the_detector_agrees(twin):
    old, new = RING_TWINS[twin]
    assert old in RING
    p = proc_from_source(RING.replace(old, new))
    assert "race" in p.check(target="sm_90a").kinds()
    a, bt, _ = _operands(64, 64, 96)
    with pytest.raises((RaceError, InterpError)):
        gpudsl.interpret(p, a=a, bt=bt, c=np.zeros((64, 64), np.float32), detect_races=True)


@pytest.mark.parametrize("shape", [(64, 64, 64), (70, 33, 40), (5, 130, 96), (128, 64, 16)])
def test_the_tma_ring_runs_on_the_emulator(shape):
    a, bt, want = _operands(*shape)
    c = np.zeros(want.shape, np.float32)
    proc_from_source(RING).compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want).all()


def test_sm90a_build_issues_utmaldg_and_hgmma_with_no_shared_loads():
    from collections import Counter
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    r = compile_cubin(generate(proc_from_source(RING).ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    ops = Counter()
    for ln in sass.disassemble(r.cubin).splitlines():
        body = ln.split("*/", 1)[-1].strip() if ln.strip().startswith("/*") else ln.strip()
        words = [w for w in body.split() if not w.startswith("@")]
        if words and ";" in body:
            ops[words[0].split(".")[0]] += 1
    assert ops["UTMALDG"] >= 1 and ops["HGMMA"] >= 1
    assert ops["LDS"] == 0 and ops["LDSM"] == 0 and ops["STS"] == 0 and ops["LDG"] == 0


@pytest.mark.gpu
def test_on_the_gpu():
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    a, y = _tile_args(37, 64)
    proc_from_source(TILE).compile("cuda")(a=a, y=y)
    assert (y == a).all()
    for shape in [(192, 130, 200), (64, 64, 64)]:
        a, bt, want = _operands(*shape)
        c = np.zeros(want.shape, np.float32)
        proc_from_source(RING).compile("cuda")(a=a, bt=bt, c=c)
        assert (c == want).all()


def test_differential_tma_family():
    """A short run of the differential test on the tma family (the long one:
    ``GPUDSL_DIFF_FAMILY=tma python -m tests.schedule.differential --seconds 1200``)."""
    from tests.schedule.differential.run import Runner

    r = Runner(seed=0, family="tma")
    r.run(120, max_cases=16)
    assert not r.failures, r.failures[0].repro()
    assert sum(r.stats.accepted.values()) > 0, r.stats.table()
    assert r.stats.accepted["make_tma"] > 0, r.stats.table()   # the family's plain nests


STORE = '''
@proc
def scale(m: size, n: size, x: f32[m, n], y: f32[m, n]):
    assert n % 4 == 0
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        s: f32[16, 32] @ SHARED
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                if 16 * b + r < m and t < n:
                    s[r, t] = 2.0 * x[16 * b + r, t]
                else:
                    s[r, t] = 0.0
        sync()
        for t in par(0, 1) @ THREADS:
            tma_store(y[16 * b:16 * b + 16, 0:32], s[0:16, 0:32])
            tma_commit()
            tma_wait(0)
'''

STORE_TWINS = {
    "no barrier before the store": ("        sync()\n", ""),
    "no wait": ("            tma_wait(0)\n", ""),
    "the tile rewritten in flight": (
        "            tma_commit()\n            tma_wait(0)\n",
        "            tma_commit()\n            s[0, 0] = 1.0\n            tma_wait(0)\n"),
}


@pytest.mark.parametrize("m,n", [(16, 32), (37, 24), (5, 8)])
def test_a_store_writes_the_box_clipped_to_the_array(m, n):
    p = proc_from_source(STORE)
    assert proc_from_source(str(p)).ir == p.ir
    x = (np.arange(m * n).reshape(m, n) % 13).astype(np.float32)
    for run in ("interpret", "emulator"):
        y = np.zeros((m, n), np.float32)
        if run == "interpret":
            gpudsl.interpret(p, x=x, y=y, detect_races=True)
        else:
            p.compile("emulator")(x=x, y=y)
        assert (y == 2 * x).all(), run


def test_a_store_is_proved_and_its_twins_refused():
    assert proc_from_source(STORE).check(target="sm_90a").ok
    for old, new in STORE_TWINS.values():
        assert old in STORE
        p = proc_from_source(STORE.replace(old, new))
        assert "race" in p.check(target="sm_90a").kinds(), new
        with pytest.raises((RaceError, InterpError)):
            gpudsl.interpret(p, x=np.ones((37, 24), np.float32),
                             y=np.zeros((37, 24), np.float32), detect_races=True)


def test_the_store_builds_for_sm90a_with_utmastg():
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    src = generate(proc_from_source(STORE).ir, {}).source
    assert "gpudsl_tma_fence();" in src        # the writers fence before the barrier
    r = compile_cubin(src, "sm_90a")
    if sass.have_disassembler():
        assert "UTMASTG" in sass.disassemble(r.cubin)


def test_the_cuda_tensor_map_is_encoded_innermost_first_and_aligned():
    """What cuTensorMapEncodeTiled gets (a fake driver function: no GPU here)."""
    import ctypes
    from gpudsl.runtime.tensor_maps import TensorMapRef, cuda_map

    got = {}

    def fake(out, dt, rank, addr, dims, strides, box, es, il, sw, l2, oob):
        got.update(dt=dt, rank=rank, addr=addr.value, dims=list(dims),
                   strides=[strides[i] for i in range(rank - 1)], box=list(box),
                   es=list(es), aligned=ctypes.cast(out, ctypes.c_void_p).value % 64,
                   modes=(il, sw, oob))
        return 0

    m = cuda_map(TensorMapRef("a", (3, 70, 40), (1, 64, 8), 2, "float16"), 4096, fake)
    assert m.shape == (16,) and m.dtype == np.uint64
    assert got == dict(dt=6, rank=3, addr=4096, dims=[40, 70, 3], strides=[80, 5600],
                       box=[8, 64, 1], es=[1, 1, 1], aligned=0, modes=(0, 0, 0))
    from gpudsl.errors import LaunchError
    with pytest.raises(LaunchError, match="16 bytes"):
        cuda_map(TensorMapRef("a", (70, 40), (64, 8), 2, "float16"), 4098, fake)
    with pytest.raises(LaunchError, match="CUresult 1"):
        cuda_map(TensorMapRef("a", (70, 40), (64, 8), 2, "float16"), 4096, lambda *a: 1)


def test_a_copy_issued_again_before_the_first_landed_is_refused():
    """Regression (found by the soundness test): instances of one copy were never compared
    with each other, so this kernel was proved; thread 0 copies into s[1] again while its
    first copy may be in flight (it never waits for the phase), and the detector sees the
    two landings race."""
    src = '''
@proc
def again(n: size, x: f32[n, 64], y: f32[64]):
    assert n <= 3
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        bar: barrier @ SHARED
        for t1 in par(0, 64) @ THREADS:
            y[t1] += s[0, t1]
        for k2 in seq(0, 2):
            for t3 in par(0, 1) @ THREADS:
                tma_load(s[1, 0:64], x[0, 0:64], bar=bar)
            arrive(bar, 0, 64)
            wait(bar, 32, 64)
'''
    p = proc_from_source(src)
    rep = p.check(target="sm_90a")
    assert "race" in rep.kinds() and "may still be in flight" in str(rep)
    with pytest.raises(RaceError):
        gpudsl.interpret(p, n=1, x=np.zeros((1, 64), np.float32), y=np.zeros(64, np.float32),
                         detect_races=True)


def test_a_type_no_tensor_map_holds_is_refused_by_the_parser():
    src = TILE.replace("f16[m, n]", "bool[m, n]").replace("f16[16, 64]", "bool[16, 64]")
    with pytest.raises(Error, match="a tensor map's types"):
        proc_from_source(src)


def test_the_detector_names_the_bulk_copy_and_its_barrier():
    """The race detector's report on a TMA twin says the write is the bulk copy's (issued
    by a thread, landing with a phase), and its hint is the barrier's, not sync()."""
    old, new = RING_TWINS["no wait for the tile"]
    p = proc_from_source(RING.replace(old, new))
    a, bt, _ = _operands(64, 64, 96)
    with pytest.raises(RaceError) as e:
        gpudsl.interpret(p, a=a, bt=bt, c=np.zeros((64, 64), np.float32), detect_races=True)
    assert "the bulk copy issued by thread (t=128)" in str(e.value)
    assert "phase of its barrier" in e.value.hint and "sync()" not in e.value.hint
