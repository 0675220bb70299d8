"""CUDA for async copies (docs/async_copies.md): cp.async.ca/cg.shared.global, commit_group and
wait_group on sm_80+ (NVRTC compiles sm_80 and sm_90 here; LDGSTS in the SASS),
plain copies on older targets and on the emulator, which equals the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.codegen import generate
from gpudsl.runtime.nvrtc import compile_cubin

from .cases import EXPECT, PROCS
from .test_language import _args

PROVED = sorted(n for n, v in EXPECT.items() if v in ("ok", "unknown"))


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
@pytest.mark.parametrize("name", ["staged", "double_buffered", "thread_level"])
def test_nvrtc_compiles(name, arch):
    m = generate(PROCS[name], {})
    r = compile_cubin(m.source, arch)
    assert r.cubin and set(r.resources) == set(m.kernels)
    assert all(res.spill_stores_bytes == 0 for res in r.resources.values())


def test_lowering_text():
    src = generate(PROCS["double_buffered"], {}).source
    assert "cp.async.cg.shared.global [%0], [%1], 16;" in src
    assert "cp.async.ca.shared.global [%0], [%1], %2;" in src
    assert "cp.async.commit_group;" in src and "cp.async.wait_group %0;" in src
    assert "gpudsl_cp_async<16>(&buf[" in src and "gpudsl_cp_async_wait<1>();" in src
    assert "__CUDA_ARCH__ >= 800" in src
    one = generate(PROCS["thread_level"], {}).source
    assert "gpudsl_cp_async<4>(&s[t], &x[" in one


def test_sass_uses_ldgsts():
    from gpudsl.perf import sass
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    m = generate(PROCS["double_buffered"], {})
    for arch, want in (("sm_75", 0), ("sm_80", 1), ("sm_90", 1)):
        text = sass.disassemble(compile_cubin(m.source, arch).cubin)
        n = sum("LDGSTS" in ln for ln in text.splitlines())
        assert (n > 0) == bool(want), (arch, n)


@pytest.mark.parametrize("name", PROVED)
def test_emulator_matches_interpreter(name):
    p = PROCS[name]
    for n in (1, 3):
        a = _args(p, n=n, seed=n)
        b = {k: v.copy() for k, v in a.items()}
        gpudsl.interpret(p, **a)
        p.compile("emulator", check=False)(**b)
        assert np.array_equal(a["y"], b["y"])
