"""Every @instr's template against its body (issue 28: nothing compared them, so an
instruction whose body says ``dst[0] = src`` and whose template computes something
else was proved, interpreted and run as different programs).  Every instruction of the
standard library is compared here, in CI."""
from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

import gpudsl
import gpudsl.stdlib
from gpudsl.ir.types import GLOBAL, REGISTER, SHARED
from gpudsl.schedule.call_primitives import vector_copy_instr

NS = vars(gpudsl)

# instructions whose template rounds differently from the body, with the bound
TOLERANCE = {
    # inputs read as TF32, the low 13 bits dropped (2**-10 relative each), 8 products
    # of values in [-1, 1]
    "mma_tf32_nt": dict(atol=8 * 2 * 2 ** -10 + 1e-6),
    # each value rounded to TF32 (to nearest: 2**-11 relative) as it is stored
    "store_tf32_x4": dict(rtol=2 ** -11, atol=1e-30),
}


def stdlib_instrs() -> list:
    out = {}
    for m in pkgutil.iter_modules(gpudsl.stdlib.__path__):
        mod = importlib.import_module(f"gpudsl.stdlib.{m.name}")
        for v in vars(mod).values():
            if isinstance(v, gpudsl.Proc) and v.is_instr:
                out[v.name] = v
    for w in (2, 4):
        for d in (GLOBAL, SHARED, REGISTER):
            for s in (GLOBAL, SHARED, REGISTER):
                pd = vector_copy_instr(w, d, s)
                out[pd.name] = pd
    # halves: 32-, 64- and 128-bit copies, each template shape once (register to
    # register, a load into registers, a store from registers, memory to memory;
    # GLOBAL and SHARED share their template) for f16, the bit packing for bf16
    kinds = [(REGISTER, REGISTER), (REGISTER, GLOBAL), (SHARED, REGISTER), (SHARED, GLOBAL)]
    for ty, widths, pairs in ((gpudsl.f16, (2, 4, 8), kinds),
                              (gpudsl.bf16, (2, 8), kinds[1:3])):
        for w in widths:
            for d, s in pairs:
                pd = vector_copy_instr(w, d, s, ty)
                out[pd.name] = pd
    return [out[k] for k in sorted(out)]


INSTRS = stdlib_instrs()


def test_the_stdlib_has_its_instructions():
    names = {getattr(i, "name", None) for i in INSTRS}
    assert {"mma_tf32_nt", "store_tf32_x4", "vcopy4_SHARED_GLOBAL",
            "vcopy8_f16_REGISTER_GLOBAL", "vcopy2_bf16_SHARED_REGISTER"} <= names


@pytest.mark.parametrize("ins", INSTRS, ids=lambda i: i.name)
def test_stdlib_instr_template_computes_its_body(ins):
    r = gpudsl.check_instr(ins, trials=4, **TOLERANCE.get(ins.name, {}))
    assert r.ok, str(r)


def test_mma_tolerance_is_needed():
    # the template rounds its inputs to TF32: exact comparison sees it (the check is
    # not vacuous)
    from gpudsl.stdlib.matmul_tf32 import mma_tf32_nt

    assert not gpudsl.check_instr(mma_tf32_nt, trials=2).ok


def test_a_template_that_does_something_else_is_found():
    bad = gpudsl.proc_from_source('''
@instr("{dst} = __shfl_xor_sync(0xffffffffu, {src}, 1) + 1.0f;")
def bad(dst: [f32][1] @ REGISTER, src: f32):
    dst[0] = src
''', namespace=NS)
    r = gpudsl.check_instr(bad)
    assert not r.ok
    assert r.mismatches[0]["array"] == "dst" and "template differs" in str(r)
    with pytest.raises(gpudsl.CompileError):
        r.raise_if_failed()


def test_sizes_index_and_scalar_parameters():
    good = gpudsl.proc_from_source('''
@instr("for (int k = 0; k < {n}; ++k) (&{dst})[k] = {a} * (&{src})[k + {off}];")
def scale(n: size, off: index, a: f32, dst: [f32][n] @ SHARED, src: [f32][n + 2] @ GLOBAL):
    for k in seq(0, n):
        dst[k] = a * src[k + off]
''', namespace=NS)
    assert gpudsl.check_instr(good, n=5, off=2).ok
    with pytest.raises(gpudsl.CompileError, match="give the sizes n"):
        gpudsl.check_instr(good)
    off_by_one = gpudsl.proc_from_source('''
@instr("for (int k = 0; k < {n}; ++k) (&{dst})[k] = {a} * (&{src})[k + 1];")
def scale(n: size, off: index, a: f32, dst: [f32][n] @ SHARED, src: [f32][n + 2] @ GLOBAL):
    for k in seq(0, n):
        dst[k] = a * src[k + off]
''', namespace=NS)
    assert not gpudsl.check_instr(off_by_one, n=5, off=2).ok


def test_check_report_names_the_trusted_templates():
    copy4 = gpudsl.proc_from_source('''
@instr("*(float4*){dst_data} = *(const float4*){src_data};")
def copy4(dst: [f32][4] @ GLOBAL, src: [f32][4] @ GLOBAL):
    for i in seq(0, 4):
        dst[i] = src[i]
''', namespace=NS)
    p = gpudsl.proc_from_source('''
def vec_copy(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            copy4(y[4 * t:4 * t + 4], x[4 * t:4 * t + 4])
''', namespace=dict(NS, copy4=copy4))
    rep = p.check()
    assert rep.ok and rep.trusted == ["copy4"]
    assert "rests on 1 trusted @instr template (copy4)" in str(rep)
    assert "trusted @instr template (copy4)" in rep._repr_html_()   # the notebook's view
    plain = gpudsl.proc_from_source('''
def f(x: f32[4]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            x[t] = 1.0
''', namespace=NS)
    assert plain.check().trusted == [] and "trusted" not in str(plain.check())


def test_matmul_tf32_report_counts_its_templates():
    from gpudsl.stdlib.matmul_tf32 import tf32_kernel

    rep = tf32_kernel().check()
    assert rep.ok
    assert "mma_tf32_nt" in rep.trusted and all(n in {i.name for i in INSTRS}
                                                      for n in rep.trusted)
    assert f"rests on {len(rep.trusted)} trusted @instr templates" in str(rep)
