"""Issue 12: emulated kernels cannot take the process down.  Each faulting kernel runs in a
child process, which must survive the fault (exit 0) having caught a gpudsl.LaunchError
that names the kernel (and the source line where the line tables tell)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from .helpers import run_child

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _run(name):
    r = run_child(["faulting_procs.py", name])
    assert r.returncode == 0, f"child died (rc {r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}"
    return r.stdout


def test_a_large_register_array_gets_a_large_enough_stack():
    # 32768 floats per thread (128 KiB) used to overflow the fixed 128 KiB fiber stack
    out = _run("big_register")
    assert out.startswith("ran:")


def test_a_stack_overflow_is_a_launch_error():
    out = _run("big_register_small_stack")
    assert "LaunchError" in out and "big_register_k0" in out
    assert "stack overflow" in out


def test_division_by_a_literal_zero_is_a_launch_error():
    out = _run("div_by_literal_zero")
    assert "LaunchError" in out and "div_by_literal_zero_k0" in out
    assert "illegal instruction" in out or "division" in out


def test_division_by_a_size_that_is_zero_names_the_source_line():
    out = _run("div_by_size_zero")
    assert "LaunchError" in out and "div_by_size_zero_k0" in out
    assert "division (or remainder) by zero" in out
    assert "faulting_procs.py:" in out  # the line of x[n // (n - 8)]
    src = (run_child.__globals__["HERE"] / "faulting_procs.py").read_text().splitlines()
    line = int(out.split("faulting_procs.py:")[1].split()[0].strip(".:"))
    assert "n // (n - 8)" in src[line - 1]


def test_an_out_of_range_literal_index_is_a_launch_error():
    out = _run("literal_out_of_range")
    assert "LaunchError" in out and "literal_out_of_range_k0" in out
    assert "invalid memory access" in out


def test_the_process_goes_on_after_a_caught_fault(tmp_path):
    """In process: a fault caught, then the same module launches again and works."""
    from gpudsl.errors import LaunchError
    from gpudsl.runtime.emulator import build_emulator_module
    from gpudsl.runtime.signature import KernelSig

    src = """
extern "C" __global__ void k(int* x, int d) {
  x[threadIdx.x] = 100 / d;
}
"""
    from gpudsl.runtime.artifact_cache import Cache
    mod = build_emulator_module(src, [KernelSig("k", ["int*", "int"])], cache=Cache(tmp_path))
    x = np.zeros(4, np.int32)
    with pytest.raises(LaunchError, match=r"kernel k failed: .*division \(or remainder\) by zero"):
        mod.launch("k", 1, 4, [x, 0])
    mod.launch("k", 1, 4, [x, 5])
    assert x.tolist() == [20] * 4


def test_the_bounds_checked_build_traps_a_register_array_overrun(tmp_path):
    from gpudsl.errors import LaunchError
    from gpudsl.runtime.artifact_cache import Cache
    from gpudsl.runtime.emulator import build_emulator_module
    from gpudsl.runtime.signature import KernelSig

    src = """
extern "C" __global__ void k(int* x, int i) {
  int r[4] = {1, 2, 3, 4};
  x[threadIdx.x] = r[i];
}
"""
    mod = build_emulator_module(src, [KernelSig("k", ["int*", "int"])], checks=True,
                                cache=Cache(tmp_path))
    x = np.zeros(4, np.int32)
    mod.launch("k", 1, 4, [x, 2])
    assert x.tolist() == [3] * 4
    with pytest.raises(LaunchError, match="kernel k failed"):
        mod.launch("k", 1, 4, [x, 9])
