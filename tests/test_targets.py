"""One ``Target`` description per architecture (gpudsl/targets.py), read by check()'s
resource rules, the performance report's occupancy and the autotuner's limits.  A new
description changes what check() refuses without touching the analysis code."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl.autotune.candidate_pipeline import Limits
from gpudsl.compiler.unit import compile_unit
from gpudsl.perf.devices import device, occupancy
from gpudsl.targets import (MBARRIER, NAMED_BARRIERS, TARGETS, Target, register_target,
                            target)

SHARED_KERNEL = '''
def stage(n: size, x: f32[n]):
    assert n >= 32
    assert n <= 60000
    for b in par(0, 1) @ BLOCKS:
        tile: f32[n] @ SHARED
        for t in par(0, 32) @ THREADS:
            tile[t] = 1.0
        sync()
        for t in par(0, 32) @ THREADS:
            x[t] = tile[t]
'''


def _proc(src=SHARED_KERNEL):
    return gpudsl.proc_from_source(src, namespace=vars(gpudsl))


def _kinds(rep):
    return [d.kind for d in rep.diagnostics]


def test_the_shared_limit_is_the_targets():
    p = _proc()
    # 60000 floats = 240000 bytes: over sm_90's 227 KiB and sm_80's 163 KiB
    assert "resource" in _kinds(p.check())
    assert "resource" in _kinds(p.check(target="sm_80"))
    # at n <= 48000 (192000 bytes) sm_90 opts in (a warning), sm_80 cannot
    q = _proc(SHARED_KERNEL.replace("60000", "48000"))
    r90, r80 = q.check(), q.check(target="sm_80")
    assert "resource" not in _kinds(r90) and r90.warnings
    assert "resource" in _kinds(r80) and "sm_80" in str(r80) and "166912" in str(r80)


def test_a_toy_target_changes_what_check_refuses():
    q = _proc(SHARED_KERNEL.replace("60000", "8000"))   # 32000 bytes: fine on sm_90
    assert q.check().ok
    register_target(Target("sm_toy", (9, 0), max_shared_bytes=16 * 1024,
                           static_shared_bytes=8 * 1024, shared_per_sm=32 * 1024,
                           max_threads_per_block=16))
    try:
        r = q.check(target="sm_toy")
        assert not r.ok and "sm_toy" in str(r)
        msgs = " ".join(d.message for d in r.diagnostics)
        assert "16384" in msgs            # shared memory over the toy's maximum
        assert "limit of sm_toy is 16" in msgs   # 32 threads over its 16
        assert q.check(n=1000, target="sm_toy").diagnostics   # still 32 threads
    finally:
        del TARGETS["sm_toy"]


def test_option_names_yield_to_parameters():
    p = gpudsl.proc_from_source('''
def f(target: size, x: f32[target]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if t < target:
                x[t] = 1.0
''', namespace=vars(gpudsl))
    assert p.check(target=5).bindings == {"target": 5}
    assert p.check(target=5, _target="sm_80").ok
    with pytest.raises(gpudsl.Error, match="unknown target"):
        _proc().check(target="sm_1")


def test_family_names_get_the_nearest_description():
    assert target("sm_90a").max_shared_bytes == TARGETS["sm_90"].max_shared_bytes
    assert target("sm_87").compute_capability == (8, 7)
    assert target("sm_87").has(MBARRIER) and not target("sm_75").has(MBARRIER)
    assert target(None) is TARGETS["sm_90"]


def test_devices_and_the_tuner_read_the_target():
    a100, h100 = device("A100"), device("H100")
    assert a100.shared_per_block == TARGETS["sm_80"].max_shared_bytes == 163 * 1024
    assert h100.shared_per_block == 227 * 1024 and h100.max_warps_per_sm == 64
    # 96 KiB per block: one block on an A100 SM (164 KiB), two on an H100 (228 KiB)
    assert occupancy(a100, 256, 32, 96 * 1024).blocks_per_sm == 1
    assert occupancy(h100, 256, 32, 96 * 1024).blocks_per_sm == 2
    assert Limits().max_threads == 1024 and Limits(arch="sm_75").max_shared_bytes == 48 * 1024


def test_a_backend_is_a_declaration():
    import numpy as np

    from gpudsl.runtime.backends import BACKENDS, register_backend
    from gpudsl.runtime.launch import EmulatorBackend

    runs = []

    class Recording(EmulatorBackend):   # the emulator, counting its runs
        def run(self, arrays, temporaries, launches):
            runs.append(len(launches))
            return super().run(arrays, temporaries, launches)

    register_backend("recording", Recording)
    try:
        p = gpudsl.proc_from_source('''
def inc(n: size, x: f32[n]):
    for b in par(0, (n + 31) // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if 32 * b + t < n:
                x[32 * b + t] += 1.0
''', namespace=vars(gpudsl))
        x = np.zeros(70, np.float32)
        p.compile("recording")(x=x)
        assert runs == [1] and (x == 1).all()
    finally:
        del BACKENDS["recording"]
    with pytest.raises(gpudsl.Error, match="'cuda', 'emulator'"):
        p.compile("recording")
    with pytest.raises(TypeError):
        register_backend("broken", object)


BIG = '''
def big(x: f32[4096]):
    for b in par(0, 1) @ BLOCKS:
        tile: f32[4096] @ SHARED
        for t in par(0, 32) @ THREADS:
            for i in seq(0, 128):
                tile[128 * t + i] = x[128 * t + i]
        sync()
        for t in par(0, 32) @ THREADS:
            for i in seq(0, 128):
                x[128 * t + i] = tile[4095 - 128 * t - i]
'''

SPLIT = '''
def pc(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        full: barrier @ SHARED
        empty: barrier @ SHARED
        arrive(empty, 32, 64)
        for i in seq(0, n):
            wait(empty, 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            arrive(full, 0, 32)
            wait(full, 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0
            arrive(empty, 32, 64)
'''


def _ranged(k: int):
    syncs = "\n".join(f"        sync(0, {32 * (i + 1)})" for i in range(k))
    return _proc(f'''
def ranged(x: f32[1024]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1024) @ THREADS:
            x[t] = 1.0
{syncs}
''')


def test_split_barriers_are_refused_where_there_are_no_mbarriers():
    # issue 41: an mbarrier proc was proved on sm_70 (codegen then emitted #error)
    p = _proc(SPLIT)
    assert p.check().ok and p.check(target="sm_80").ok
    for arch in ("sm_70", "sm_75"):
        r = p.check(target=arch)
        assert "target" in _kinds(r) and f"mbarrier, which {arch} does not have" in str(r)


def test_the_number_of_ranged_barriers_is_the_targets():
    assert _ranged(15).check().ok
    r = _ranged(16).check()
    assert "resource" in _kinds(r) and "16 named barriers" in str(r)


def test_a_toy_target_without_features_refuses_them_alone():
    bare = register_target(Target("sm_bare", (9, 0), named_barriers=4))
    try:
        r = _proc(SPLIT).check(target="sm_bare")
        assert "mbarrier, which sm_bare does not have" in str(r)
        r = _ranged(1).check(target="sm_bare")
        assert "named barriers (bar.sync), which sm_bare does not have" in str(r)
        assert _ranged(3).check(target="sm_90").ok and _proc(SPLIT).check().ok
        register_target(Target("sm_bare", (9, 0), named_barriers=4,
                               features=frozenset({"bar.sync"})))
        assert _ranged(3).check(target="sm_bare").ok
        assert "4 named barriers" in str(_ranged(4).check(target="sm_bare"))
    finally:
        del TARGETS[bare.name]


def test_the_static_shared_limit_is_the_generated_targets():
    # issue 41: registering a target with 8 KiB of static shared memory turned every
    # target's __shared__ arrays into dynamic shared memory (a minimum over all targets,
    # then the default target's figure read at import); it is the target's own
    import numpy as np

    from gpudsl.codegen import generate

    q = _proc(BIG)   # 16 KiB of SHARED
    before = q.cuda_source()
    tiny = register_target(Target("sm_tiny", (9, 0), static_shared_bytes=8 * 1024))
    try:
        assert q.cuda_source() == before and "extern __shared__" not in before
        assert generate(q, target="sm_90").source == before
        small = generate(q, target="sm_tiny")
        assert "extern __shared__" in small.source
        assert small.kernels["big_k0"].dynamic_shared_bytes == 16384
        k = q.compile("emulator", target="sm_tiny")   # the same values, from dynamic shared
        assert k.source == small.source
        x = np.arange(4096, dtype=np.float32)
        k(x=x)
        np.testing.assert_array_equal(x, np.arange(4096, dtype=np.float32)[::-1])
    finally:
        del TARGETS[tiny.name]


def test_compile_proves_for_the_backends_architecture(monkeypatch):
    from gpudsl.runtime.launch import EmulatorBackend

    p = _proc(SPLIT)
    monkeypatch.setattr(EmulatorBackend, "arch", staticmethod(lambda: "sm_75"))
    with pytest.raises(gpudsl.CheckError, match="mbarrier, which sm_75 does not have"):
        p.compile("emulator")


# ---------------------------------------------------------------- issue 41's acceptance

TOY = Target("sm_toy", (9, 0), max_shared_bytes=8 * 1024, static_shared_bytes=8 * 1024,
             shared_per_sm=16 * 1024, features=frozenset({NAMED_BARRIERS}))   # no mbarrier


def _verdicts(procs):
    return [(p.check().kinds(), p.check(target="sm_80").kinds()) for p in procs]


def test_a_toy_target_in_one_place_changes_what_check_and_compile_refuse():
    """One description registered (and removed): check() and compile for the toy refuse
    a 16 KiB-shared kernel and a split-barrier (mbarrier) kernel; sm_90's CUDA and every
    verdict for the described targets stay what they were."""
    big, split = _proc(BIG), _proc(SPLIT)
    procs = (big, split)
    sources, verdicts = [p.cuda_source() for p in procs], _verdicts(procs)
    assert all(not v[0] and not v[1] for v in verdicts)   # both proved on sm_90 and sm_80
    register_target(TOY)
    try:
        for p, kind, text in ((big, "resource", "an sm_toy block can have at most 8192"),
                              (split, "target", "mbarrier, which sm_toy does not have")):
            r = p.check(target="sm_toy")
            assert r.kinds() == {kind} and text in str(r)
            for backend in ("emulator", "cuda"):
                with pytest.raises(gpudsl.CheckError, match=text):
                    p.compile(backend, target="sm_toy")
            with pytest.raises(gpudsl.CheckError, match=text):
                compile_unit([p], "emulator", target=TOY)
            assert p.compile("emulator", target="sm_toy", check=False).target is TOY
        assert [p.cuda_source() for p in procs] == sources and _verdicts(procs) == verdicts
        for p, src in zip(procs, sources):
            k = p.compile("cuda", target="sm_90")   # NVRTC, no GPU needed
            assert k.proved and k.source == src and k.target is TARGETS["sm_90"]
            assert p.compile("emulator").proved
    finally:
        del TARGETS[TOY.name]
    with pytest.raises(gpudsl.CompileError, match="unknown target 'sm_toy'"):
        big.compile("emulator", target="sm_toy")


def test_target_naming_a_backend_is_deprecated():
    """issue 41: "target" is an architecture; the backend (cuda/emulator) was once
    passed as target=, which still works with a DeprecationWarning naming the user's
    line."""
    import numpy as np

    p = _proc(BIG)
    with pytest.warns(DeprecationWarning, match="write backend='emulator'") as got:
        k = p.compile(target="emulator")
    assert got[0].filename == __file__
    assert k.backend == "emulator" and k.target is TARGETS["sm_90a"] and k.proved
    x = np.ones(4096, np.float32)
    k(x=x)
    assert (x == 1).all()
    with pytest.warns(DeprecationWarning):
        u = compile_unit([p], target="emulator")
    assert u.backend_name == "emulator" and "backend=emulator" in repr(u)
    u80 = compile_unit([p], "emulator", target="sm_80")   # a named target: its own unit
    assert u80.target is TARGETS["sm_80"] and u80.source == u.source and u80.key != u.key
    with pytest.warns(DeprecationWarning):
        assert gpudsl.compiler.Kernel(p, target="emulator").backend == "emulator"
    with pytest.raises(gpudsl.CompileError, match="disagree"), \
            pytest.warns(DeprecationWarning):
        p.compile("cuda", target="emulator")
    with pytest.raises(gpudsl.CompileError, match="unknown backend 'sm_80'"):
        p.compile("sm_80")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the new spellings warn nothing
        assert p.compile(backend="emulator", target="sm_80").target is TARGETS["sm_80"]
