"""Procs that break the mapping rules of docs/language.md (meaning) are refused by code generation with
a gpudsl.CompileError at the offending statement; generated text details."""
from __future__ import annotations

import pytest

from gpudsl import (BLOCKS, SHARED, THREADS, CompileError, Error, f32, i32, index, instr, par,
                    proc, seq, size, sync)
from gpudsl.codegen import NeedsBinding, generate


@proc
def unmapped(n: size, x: f32[n]):
    for i in par(0, n):
        x[i] = 0.0


@proc
def unmapped_threads(n: size, x: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 32):
            x[b, t] = 0.0


@proc
def sync_in_threads(n: size, x: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            x[b, t] = 0.0
            sync()


@proc
def write_at_block_level(n: size, x: f32[n]):
    for b in par(0, n) @ BLOCKS:
        x[b] = 1.0


@proc
def threads_outside_blocks(x: f32[32]):
    for t in par(0, 32) @ THREADS:
        x[t] = 1.0


@proc
def shared_in_threads(n: size, x: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            s: f32[4] @ SHARED
            s[0] = 1.0
            x[b, t] = s[0]


@proc
def too_many_threads(n: size, x: f32[n, 2048]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 2048) @ THREADS:
            x[b, t] = 1.0


@proc
def thread_bound_from_block(n: size, x: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, b) @ THREADS:
            x[b, t] = 1.0


@proc
def thread_bound_from_size(n: size, m: size, x: f32[n, m]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, m) @ THREADS:
            x[b, t] = 1.0


@instr("{nosuch} = {x};")
def bad_template(x: f32, y: [f32][1] @ SHARED):
    y[0] = x


@proc
def uses_bad_template(n: size, x: f32[n]):
    for b in par(0, n) @ BLOCKS:
        s: f32[1] @ SHARED
        for t in par(0, 1) @ THREADS:
            bad_template(x[b], s[0:1])


CASES = [
    (unmapped, "the par loop 'i' around|is not mapped", "map it first|map it to BLOCKS"),
    (unmapped_threads, "the par loop 't' is not mapped to BLOCKS or THREADS", "map it first"),
    (sync_in_threads, r"sync\(\) stands inside a @ THREADS loop", "block level"),
    (write_at_block_level, "stands at block level", "inside a THREADS loop"),
    (threads_outside_blocks, "the @ THREADS loop 't' is outside any @ BLOCKS loop", ""),
    (shared_in_threads, "the SHARED array 's' is allocated inside a @ THREADS loop", ""),
    (too_many_threads, "needs 2048 threads per block", ""),
    (thread_bound_from_block, "must be a constant once sizes are fixed, not 'b'", ""),
    (uses_bad_template, r"has the hole \{nosuch\}, which names no parameter", r"\{x\}"),
]


@pytest.mark.parametrize("p,msg,hint", CASES, ids=[c[0].name for c in CASES])
def test_refused(p, msg, hint):
    with pytest.raises(CompileError, match=msg) as info:
        p.cuda_source()
    e = info.value
    assert isinstance(e, Error)
    assert e.loc is not None and e.loc.file.endswith("test_refusals.py")
    if hint:
        import re

        assert re.search(hint, str(e))


def test_unmapped_host_par_loop_message():
    with pytest.raises(CompileError) as info:
        unmapped.cuda_source()
    # a host-level par loop with memory effects becomes serial code, but must be mapped
    assert "par loop 'i'" in str(info.value)


def test_thread_extent_from_size_needs_binding():
    with pytest.raises(NeedsBinding) as info:
        thread_bound_from_size.cuda_source()
    assert info.value.names == ("m",)
    assert "m=..." in str(info.value)
    src = thread_bound_from_size.cuda_source(m=64)
    assert "__launch_bounds__(64)" in src and "constexpr int m = 64;" in src


def test_bad_bindings():
    with pytest.raises(CompileError, match="has no parameter 'q'"):
        thread_bound_from_size.cuda_source(q=3)
    with pytest.raises(CompileError, match="must be positive"):
        thread_bound_from_size.cuda_source(m=0)
    with pytest.raises(CompileError, match="is a tensor parameter"):
        thread_bound_from_size.cuda_source(x=3)


def test_instr_cannot_be_launched():
    with pytest.raises(CompileError, match="is an @instr"):
        bad_template.cuda_source()


# ---------------------------------------------------------------- details of the output


@proc
def neg_floor(n: size, k: index, x: i32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            x[b] = (b - k) // 2 + b // 2 + (b + k) % 3 + b % 4


def test_floor_helpers_only_where_operands_can_be_negative():
    src = neg_floor.cuda_source()
    assert "gpudsl_floordiv(b - k, 2)" in src
    assert "gpudsl_floormod(b + k, 3)" in src
    assert "b / 2" in src and "b % 4" in src


@proc
def unroll_and_names(n: size, x: f32[n, 8]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            for int in seq(0, 8, unroll=True):
                x[b, int] = 0.0


def test_unroll_pragma_and_reserved_names():
    src = unroll_and_names.cuda_source()
    assert "#pragma unroll\n" in src.replace("    ", "").replace("  ", "")
    assert "for (int int_ = 0; int_ < 8; int_++)" in src


def test_line_directives_point_at_python_source():
    src = neg_floor.cuda_source()
    import re

    lines = [int(m) for m in re.findall(r"#line (\d+)", src)]
    files = re.findall(r'#line \d+ "([^"]+)"', src)
    assert files and all(f.endswith("test_refusals.py") for f in files)
    stmt_line = neg_floor.ir.body[0].body[0].body[0].loc.line
    assert stmt_line in lines or stmt_line - 1 in lines


def test_nvrtc_errors_point_at_python_lines():
    from gpudsl.runtime.nvrtc import compile_cubin

    @instr("{y} = undefined_function({x});")
    def broken(x: f32, y: [f32][1] @ SHARED):
        y[0] = x

    @proc
    def calls_broken(n: size, x: f32[n]):
        for b in par(0, n) @ BLOCKS:
            s: f32[1] @ SHARED
            for t in par(0, 1) @ THREADS:
                broken(x[b], s[0:1])

    with pytest.raises(CompileError, match=r"test_refusals.py\(\d+\): error"):
        compile_cubin(calls_broken.cuda_source(), "sm_90", use_cache=False)


def test_module_describes_launches():
    from .procs import host_code

    m = generate(host_code)
    kinds = [(k.name, k.serial) for k in m.kernels.values()]
    assert kinds == [("host_code_k0", True), ("host_code_k1", False), ("host_code_k2", True)]
    (t,) = m.temporaries
    assert t.name == "total" and t.shape == ()
    params = [p.name for p in m.kernels["host_code_k1"].params]
    assert params == ["n", "x", "y", "it"]  # the host loop variable is an argument
