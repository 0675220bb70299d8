"""Issue 14 / docs/running.md: compile() proves first; an unproved proc raises CheckError with
the report; check=False opts out and says so in kernel.proved."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, SHARED, THREADS, f32, par, proc, size, sync


@proc
def stencil_no_sync(n: size, x: f32[n], y: f32[n]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = x[32 * b + t]
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = s[31 - t]


@proc
def stencil(n: size, x: f32[n], y: f32[n]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = x[32 * b + t]
        sync()
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = s[31 - t]


def test_unproved_proc_is_not_compiled():
    with pytest.raises(gpudsl.CheckError) as e:
        stencil_no_sync.compile("emulator")
    assert not e.value.report.ok
    assert e.value.report.kinds() == {"race"}
    assert "check=False" in str(e.value)


def test_check_false_compiles_and_says_so():
    k = stencil_no_sync.compile("emulator", check=False)
    assert k.proved is False and k.report is None


def test_proved_kernel_runs_and_says_so():
    k = stencil.compile("emulator")
    assert k.proved is True and k.report.ok
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    k(x=x, y=y)
    np.testing.assert_array_equal(y, np.concatenate([x[31::-1], x[:31:-1]]))


def test_verdicts_are_cached_per_proc_and_bindings(monkeypatch):
    # one cache of proofs (check()'s): compiling again does not prove again
    calls = []
    import sys

    check_mod = sys.modules["gpudsl.analysis.check"]   # the module, not the function

    real = check_mod._run

    def counting(ir, bindings, *rest):
        calls.append(bindings)
        return real(ir, bindings, *rest)

    monkeypatch.setattr(check_mod, "_run", counting)
    monkeypatch.setattr(check_mod, "_cache", check_mod.OrderedDict())
    stencil.compile("emulator", n=64)
    stencil.compile("emulator", n=64)
    assert len(calls) == 1
    stencil.compile("emulator", n=128)
    assert len(calls) == 2
