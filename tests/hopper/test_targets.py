"""The sm_90a target (SPEC 2.9): its features, the kind "target", the architecture an
H100/H200 builds for, the emulator's target, and NVRTC building sm_90a code (no GPU)."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import CheckError
from gpudsl.runtime import driver
from gpudsl.runtime.nvrtc import compile_cubin
from gpudsl.targets import (CLUSTERS, EMULATED_TARGET, SETMAXNREG, TARGETS, TMA, WGMMA,
                            device_target_name, target)

from .cases import roles


def test_sm_90a_has_the_hopper_features_and_sm_90_none():
    a, b = target("sm_90a"), target("sm_90")
    for f in (WGMMA, TMA, SETMAXNREG, CLUSTERS):
        assert a.has(f) and not b.has(f)
    assert a.features > b.features          # a superset, with sm_90's limits
    assert (a.max_shared_bytes, a.registers_per_sm) == (b.max_shared_bytes, b.registers_per_sm)
    assert a.compute_capability == (9, 0) and TARGETS["sm_90a"] is a


def test_a_compute_capability_9_0_device_builds_for_sm_90a():
    assert device_target_name(9, 0) == "sm_90a"
    assert device_target_name(8, 0) == "sm_80"
    assert device_target_name(12, 0) == "sm_120"   # undescribed: its own name


def test_device_arch_reads_the_capability_through_the_targets(monkeypatch):
    monkeypatch.setattr(driver, "_arch", None)
    monkeypatch.setattr(driver, "driver_available", lambda: False)
    assert driver.device_arch() == "sm_90"   # no device: the default


def test_launch_registers_are_ptxas_figures():
    """Measured with NVRTC 13 for sm_90a (``__launch_bounds__(threads, blocks)`` on a
    kernel holding setmaxnreg): ptxas' register count."""
    t = target("sm_90a")
    got = {(n, b): t.launch_registers(n, b) for n, b in
           [(128, 1), (256, 1), (320, 1), (384, 1), (512, 1), (640, 1), (768, 1),
            (1024, 1), (128, 3), (384, 2), (256, 2)]}
    assert got == {(128, 1): 255, (256, 1): 255, (320, 1): 168, (384, 1): 168,
                   (512, 1): 128, (640, 1): 96, (768, 1): 80, (1024, 1): 64,
                   (128, 3): 168, (384, 2): 80, (256, 2): 128}


def test_a_construct_the_target_lacks_is_refused_with_kind_target():
    p = roles()
    rep = p.check()                           # sm_90: no setmaxnreg
    assert rep.kinds() == {"target"}
    d = rep.of_kind("target")[0]
    assert d.witness["feature"] == SETMAXNREG and d.witness["targets_with_it"] == ["sm_90a"]
    assert len(d.locations) == 2 and "sm_90a" in d.hint
    assert p.check(target="sm_90a").ok
    assert p.check(target="sm_80").kinds() == {"target"}


def test_compile_for_a_device_without_the_feature_is_refused(monkeypatch):
    """compile("cuda") proves for the device's own architecture: sm_90 (no GPU) refuses,
    sm_90a (an H100/H200) builds."""
    from gpudsl.runtime import launch

    p = roles()
    monkeypatch.setattr(launch, "device_arch", lambda: "sm_90", raising=False)
    monkeypatch.setattr(driver, "_arch", "sm_90")
    with pytest.raises(CheckError, match="setmaxnreg"):
        p.compile("cuda")
    monkeypatch.setattr(driver, "_arch", "sm_90a")
    k = p.compile("cuda")                    # NVRTC builds it for sm_90a, no GPU needed
    assert k.proved


def test_the_emulator_proves_for_the_target_with_every_feature():
    assert EMULATED_TARGET == "sm_90a"
    assert roles().compile("emulator").proved


def test_nvrtc_builds_a_kernel_for_sm_90a():
    cu = roles().cuda_source()
    r = compile_cubin(cu, "sm_90a", use_cache=False)
    assert r.arch == "sm_90a" and r.cubin[:4] == b"\x7fELF"
    assert r.resources["roles_k0"].registers == 168   # 384 threads: the launch's count
    with pytest.raises(gpudsl.CompileError, match="setmaxnreg needs sm_90a"):
        compile_cubin(cu, "sm_90", use_cache=False)
