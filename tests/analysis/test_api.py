"""The Report / Diagnostic API, bindings, timeouts and the command line."""
from __future__ import annotations

import io
import textwrap

import pytest

import gpudsl
from gpudsl import BLOCKS, SHARED, THREADS, f32, par, proc, seq, size, sync
from gpudsl.analysis import Diagnostic, Report, check
from gpudsl.cli.check_command import run_check

from .corpus import matmul_tiled, neighbour_sum_one_phase, own_slot, tree_reduction


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]


@proc
def nonlinear(n: size, m: size, k: size, y: f32[n]):
    for b in par(0, m) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, k):
                if (b * 64 + t) * k * m + i * n * m < n:
                    y[(b * 64 + t) * k * m + i * n * m] = 1.0


@proc
def big_shared(x: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[20000] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[t]


def test_saxpy_ok_symbolic_and_bound():
    r = saxpy.check()
    assert isinstance(r, Report) and r.ok and r.diagnostics == []
    assert "ok" in str(r)
    assert saxpy.check(n=4096).ok
    assert gpudsl.check(saxpy, n=512).ok
    assert r.raise_if_failed() is r


def test_race_report_text_and_witness():
    r = neighbour_sum_one_phase.check()
    assert not r.ok
    d = r.diagnostics[0]
    assert isinstance(d, Diagnostic) and d.kind == "race"
    text = str(r)
    assert "error[race]" in text and "witness:" in text
    assert "s[t] = s[t] + s[t + 1]" in text
    assert len(d.locations) == 2
    loc = d.locations[0]
    assert loc.file.endswith("corpus.py") and loc.line > 0 and loc.col >= 0
    w = d.witness
    assert w["array"] == "s"
    t1, t2 = w["thread1"], w["thread2"]
    assert t1["threadIdx"] != t2["threadIdx"]
    assert t1["blockIdx"] == t2["blockIdx"]
    with pytest.raises(gpudsl.CheckError) as ei:
        r.raise_if_failed()
    assert "race" in str(ei.value)


def test_bindings_are_checked():
    with pytest.raises(gpudsl.Error):
        saxpy.check(m=3)
    with pytest.raises(gpudsl.Error):
        saxpy.check(n=100)  # violates the assert n % 256 == 0
    with pytest.raises(gpudsl.Error):
        saxpy.check(n=0)


def test_timeout_gives_unknown_never_ok():
    r = check(nonlinear, timeout=0.001)
    assert not r.ok
    assert "unknown" in r.kinds()
    assert "could not prove" in str(r)
    assert check(nonlinear, timeout=10).ok  # with time, the same obligations are proved


def test_large_shared_is_a_warning_not_error():
    r = big_shared.check()
    assert r.ok
    assert r.warnings and "48 KB" in r.warnings[0].message
    assert "warning" in str(r)


def test_cache_and_stats():
    r1 = matmul_tiled.check(n=64)
    r2 = matmul_tiled.check(n=64)
    assert r1 is r2 and r1.ok
    assert r1.stats["queries"] > 0


def test_cli(tmp_path):
    f = tmp_path / "kernels.py"
    f.write_text(textwrap.dedent('''
        from __future__ import annotations
        from gpudsl import *

        @proc
        def good(n: size, x: f32[n]):
            assert n % 64 == 0
            for b in par(0, n // 64) @ BLOCKS:
                for t in par(0, 64) @ THREADS:
                    x[64 * b + t] = 0.0

        @proc
        def bad(n: size, x: f32[n]):
            for b in par(0, 2) @ BLOCKS:
                for t in par(0, 64) @ THREADS:
                    if t < n:
                        x[t] = 0.0
    '''))
    out = io.StringIO()
    assert run_check(str(f), {"n": 128}, out) == 1
    text = out.getvalue()
    assert "check(good) with n=128: ok" in text and "error[race]" in text
    out = io.StringIO()
    assert run_check(f"{f}::good", {"n": 128}, out) == 0
    with pytest.raises(gpudsl.Error):
        run_check(f"{f}::nothing", {}, io.StringIO())
    from gpudsl.cli import main

    assert main(["check", f"{f}::good"]) == 0
    assert main(["check", str(f)]) == 1


def test_effects_api():
    from gpudsl.analysis.proc_effects import collect

    eff = collect(tree_reduction)
    names = {a.name for a in eff.accesses}
    assert names == {"s", "x", "y"}
    writes = [a for a in eff.accesses if a.is_write]
    assert all(a.loc is not None for a in writes)
    red = [a for a in eff.accesses if a.reduce][0]
    assert [l.iter for l in red.loops] == ["b", "k", "t"]
    assert red.bcount is not None and red.level == "thread"


def test_smt_api():
    import z3

    from gpudsl.ir.smt import SAT, UNSAT, Encoder, solve
    from gpudsl.ir import BinOp, Const, Var

    enc = Encoder(own_slot.ir)
    t1, t2 = enc.thread("1"), enc.thread("2")
    a, b = t1.declare("t"), t2.declare("t")
    e = BinOp("%", BinOp("+", Var("t"), Const(1), Const(0).ty), Const(64), Const(0).ty)
    cons = [a >= 0, a < 64, b >= 0, b < 64, a != b, t1.expr(e) == t2.expr(e)]
    assert solve(cons).status == UNSAT
    cons[-1] = t1.expr(BinOp("%", Var("t"), Const(16), Const(0).ty)) == \
        t2.expr(BinOp("%", Var("t"), Const(16), Const(0).ty))
    r = solve(cons)
    assert r.status == SAT
    assert (t1.value(r.model, "t") - t2.value(r.model, "t")) % 16 == 0
