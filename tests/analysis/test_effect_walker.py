"""One effect collector (issue 11): gpudsl.ir.stmt_effects.Walker is the only walk of
statements for memory effects; ir.stmt_effects.collect is a thin use of it and check()'s
collector (gpudsl.analysis.proc_effects) extends it, each keeping its access order."""
from __future__ import annotations

import ast
import pathlib

import gpudsl
from gpudsl import BLOCKS, SHARED, THREADS, f32, i32, par, proc, seq, size, sync
from gpudsl.analysis import proc_effects as aeff
from gpudsl.ir import stmt_effects as ieff

ROOT = pathlib.Path(gpudsl.__file__).resolve().parent


@proc
def gather(n: size, ix: i32[8], x: f32[8], y: f32[8]):
    for i in seq(0, 8):
        y[ix[i]] = x[i]


@proc
def put(n: size, w: f32[n], v: f32):
    for i in seq(0, n):
        w[i] = v


@proc
def caller(y: f32[8]):
    for l in seq(0, 4):
        put(2, y[l:l + 2], y[l])


@proc
def staged(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 2):
            for t in par(0, 64) @ THREADS:
                y[t] = s[63 - t]
            sync()


def test_check_collector_extends_the_one_walker():
    assert issubclass(aeff._Collector, ieff.Walker)
    assert issubclass(ieff._Accesses, ieff.Walker)


def test_orders_kept():
    # legality: right-hand side, then indices, then the write
    accs = ieff.collect(gather.ir.body)
    assert [(a.buf, a.mode) for a in accs] == [("x", "r"), ("ix", "r"), ("y", "w")]
    # check(): indices, then right-hand side, then the write (race witnesses follow it)
    eff = aeff.collect(gather)
    assert [(a.name, a.kind) for a in eff.accesses] == [
        ("ix", "read"), ("x", "read"), ("y", "write")]


def test_calls_through_the_inliner_with_the_call_as_statement():
    loop = caller.ir.body[0]
    accs = ieff.collect(loop.body, loops=(loop,))
    # the scalar argument is read once at the call into a local (by value)
    assert [(a.buf, a.mode, a.local) for a in accs] == [
        ("y", "r", False), ("v", "w", True), ("v", "r", True), ("y", "w", False)]
    assert all(a.stmt is loop.body[0] for a in accs)
    # the callee's loop variable is renamed away from the caller's
    assert all(L.iter != "l" for a in accs for L in a.loops[1:])


def test_hooks_see_syncs_loops_and_barrier_steps():
    seen = []

    class Syncs(ieff.Walker):
        def sync(self, s, ctx):
            seen.append(("sync", ctx))

        def enter_loop(self, s, ctx):
            return ctx + (s.iter,)

    Syncs().block(staged.ir.body, ())
    assert seen == [("sync", ("b",)), ("sync", ("b", "k"))]
    eff = aeff.collect(staged)
    from gpudsl.ir.printer import print_expr
    counts = [(a.name, a.kind, print_expr(a.bcount)) for a in eff.accesses]
    assert counts == [("x", "read", "0"), ("s", "write", "0"),
                      ("s", "read", "1 + k"), ("y", "write", "1 + k")]
    assert [l.dim for l in eff.kernels[eff.accesses[0].kernel].thread_loops] == [0, 0]


def test_no_second_effect_collector():
    """Outside ir/stmt_effects.py, no module reads expressions for effects itself
    (``reads_of``) and every collector class extends the one Walker."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == "ir/stmt_effects.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "reads_of":
                found.append(f"{rel}: reads_of")
            # (warp collectives, ``Collective...``, are not collectors)
            if isinstance(node, ast.ClassDef) and "Collect" in node.name and \
                    "Collective" not in node.name and \
                    "Walker" not in {getattr(b, "id", "") for b in node.bases}:
                found.append(f"{rel}: {node.name}")
    assert found == []
