"""One ``Target`` description per architecture (gpudsl/targets.py), read by check()'s
resource rules, the performance report's occupancy and the autotuner's limits.  A new
description changes what check() refuses without touching the analysis code."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl.autotune.pipeline import Limits
from gpudsl.perf.devices import device, occupancy
from gpudsl.targets import MBARRIER, TARGETS, Target, register_target, target

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


def test_a_toy_target_changes_no_other_targets_code():
    # issue 41: registering a target with 8 KiB of static shared memory turned every
    # target's __shared__ arrays into dynamic shared memory (a minimum over all targets)
    import importlib

    import gpudsl.codegen.kernel as kernel_mod

    q = _proc(SHARED_KERNEL.replace("60000", "4000"))
    before = q.cuda_source(n=4000)
    register_target(Target("sm_tiny", (9, 0), static_shared_bytes=8 * 1024))
    try:
        importlib.reload(kernel_mod)   # what an import after the registration sees
        assert q.cuda_source(n=4000) == before and "extern __shared__" not in before
    finally:
        del TARGETS["sm_tiny"]
        importlib.reload(kernel_mod)


def test_compile_proves_for_the_backends_architecture(monkeypatch):
    from gpudsl.runtime.launch import EmulatorBackend

    p = _proc(SPLIT)
    monkeypatch.setattr(EmulatorBackend, "arch", staticmethod(lambda: "sm_75"))
    with pytest.raises(gpudsl.CheckError, match="mbarrier, which sm_75 does not have"):
        p.compile("emulator")
