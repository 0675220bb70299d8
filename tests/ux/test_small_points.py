"""Issue 25's smaller points, each failing on the old code: the CLI's check skips an
@instr instead of warning that it "runs as a single-thread kernel"; perf without sizes
hints at --bind; delete_sync's witness reads like check()'s; one racy pair of statements
is one problem; every thread writing one element gets the `if t == 0` hint; a pattern
that finds no loop lists the loops; "only builtins can be called" lists them."""
from __future__ import annotations

import io

import pytest

import gpudsl
from gpudsl import BLOCKS, SHARED, THREADS, f32, par, proc, size, sync
from gpudsl.schedule import delete_sync, divide_loop

FILE = '''from __future__ import annotations
from gpudsl import proc, instr, par, seq, BLOCKS, THREADS, f32, size, GLOBAL

@instr("*(float4*){dst_data} = *(const float4*){src_data};")
def copy4(dst: [f32][4] @ GLOBAL, src: [f32][4] @ GLOBAL):
    for i in seq(0, 4):
        dst[i] = src[i]

@proc
def vec_copy(n: size, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            copy4(y[256 * b + 4 * t:256 * b + 4 * t + 4], x[256 * b + 4 * t:256 * b + 4 * t + 4])
'''


def test_cli_check_does_not_check_an_instr_alone(tmp_path):
    from gpudsl.cli.check_command import run_check

    f = tmp_path / "k.py"
    f.write_text(FILE)
    out = io.StringIO()
    assert run_check(str(f), {}, out) == 0
    text = out.getvalue()
    assert "single-thread kernel" not in text
    assert "instr copy4: not checked alone" in text
    assert "template and body agree" in text   # compared by check_instr (issue 28)
    assert "1 of 1 proc proved" in text


def test_cli_check_compares_an_instr_template_with_its_body(tmp_path):
    from gpudsl.cli.check_command import run_check

    f = tmp_path / "k.py"
    f.write_text(FILE.replace("*(float4*){dst_data} = *(const float4*){src_data};",
                              "(&{dst})[0] = (&{src})[1];"))
    out = io.StringIO()
    assert run_check(str(f), {}, out) == 1
    text = out.getvalue()
    assert "the template differs from the body" in text
    assert "1 @instr template differs from its body" in text


def test_cli_perf_without_sizes_hints_at_bind(tmp_path):
    from gpudsl.cli.perf_command import run_perf

    f = tmp_path / "k.py"
    f.write_text(FILE)
    with pytest.raises(gpudsl.Error) as e:
        run_perf(f"{f}::vec_copy", {})
    assert e.value.hint == f"gpudsl perf {f}::vec_copy --bind n=..."
    assert ".perf(" not in str(e.value)


@proc
def reverse(n: size, x: f32[n], y: f32[n]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = x[32 * b + t]
        sync()
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = s[31 - t]


def test_delete_sync_witness_reads_like_checks():
    with pytest.raises(gpudsl.SchedulingError) as e:
        delete_sync(reverse, reverse.find("sync()"))
    text = str(e.value)
    assert "{'block'" not in text and "thread1=" not in text
    assert "thread 1: b=0, t=" in text and "element s[" in text


@proc
def blur(n: size, x: f32[n + 2], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        s: f32[130] @ SHARED
        for t in par(0, 128) @ THREADS:
            s[t] = x[128 * b + t]
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = (s[t] + s[t + 1] + s[t + 2]) / 3.0


def test_one_racy_pair_of_statements_is_one_problem():
    rep = blur.check()
    races = [d for d in rep.diagnostics if d.kind == "race"]
    assert len(races) == 1, str(rep)  # was 2: s[t + 1] and s[t + 2] of one statement


@proc
def same_value(n: size, y: f32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[b] = 1.0


def test_all_threads_writing_one_element_get_the_guard_hint():
    (d,) = same_value.check().diagnostics
    assert d.kind == "race" and "if t == 0:" in d.hint and "sync()" not in d.hint


def test_no_loop_matches_lists_the_loops():
    with pytest.raises(gpudsl.SchedulingError) as e:
        divide_loop(reverse, "ii", 4, ["a", "c"])
    assert e.value.hint == "the loops of reverse: b, t, t #2"


def test_only_builtins_can_be_called_lists_them():
    with pytest.raises(gpudsl.ProcError) as e:
        gpudsl.proc_from_source(
            "def f(n: size, x: f32[n]):\n    for i in seq(0, n):\n"
            "        x[i] = math.exp(x[i])\n")
    assert "only builtins can be called" in str(e.value)
    assert "exp" in e.value.hint and "select" in e.value.hint and "f32" in e.value.hint
