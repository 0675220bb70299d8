"""The expression-level differential test: random integer and float expressions
(casts between widths, ``//``, ``%``, shifts, bit operations, min/max/abs, select,
comparisons, wrap-around values) evaluated three ways:

* by the interpreter (the reference meaning),
* by the generated C on the emulator,
* by the SMT encoding of check() (``gpudsl.ir.smt``), solved for the value with the
  index parameters fixed: where the encoding determines the value it must be the
  interpreter's; where it does not (an unknown it introduces) the interpreter's value
  must at least be possible.

One case is one proc writing K expressions into output arrays (one compile).
``python -m tests.codegen.expr_differential --seconds N [--seed S]`` is the long mode;
``tests/codegen/test_expr_differential.py`` runs a few cases in CI.

The edges of issue 39 are drawn too (``--no-edges``: the cases of earlier versions, seed
for seed): conversions to ``i32``/``i64`` of f32, f64, f16 and bf16 values that are NaN,
infinite, beyond the type or signed zeros; shift amounts outside ``[0, width)`` (any i32
or i64 value, edge constants; negative ones for ``index``); ``min``/``max`` of f64 and
f16 and negation over signed zeros and NaN.

The values of the index parameters include 2^31 ± small, 2^32 + 7, 2^62 + 1, 2^63 - 1
and negatives; terms of type ``index`` (exact integers in the interpreter) are kept
inside the index width the code generator picks for those values (a bound is tracked
per term), while ``i32`` / ``i64`` terms wrap freely.  With ``wide`` (``--wide-index``)
index terms may leave 32 bits whatever the parameters (up to 64): the code generator
must pick the 64-bit unit from the terms' ranges (issue 28); a launch it refuses (a
term it cannot bound below 2^63) counts as refused, not as a mismatch.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import z3

import gpudsl
from gpudsl.ir.nodes import Assign
from gpudsl.ir.smt import Encoder

NS = vars(gpudsl)
I32, I64, IDX, F32, BOOL = "i32", "i64", "index", "f32", "bool"
SPECIAL = [2 ** 31 - 1, 2 ** 31, 2 ** 31 + 3, 2 ** 32 + 7, 2 ** 62 + 1, 2 ** 63 - 1,
           -(2 ** 31), -(2 ** 31) - 1, -(2 ** 63) + 1, -(2 ** 32) - 7]
SMALL = [0, 1, 2, 3, 5, 7, 16, 31, 32, 33, 63, 255, 1000, 65535, 65536, 65537]
F_VALUES = [0.0, -0.0, 1.5, -2.25, 3.0, 1e30, -1e-30, 0.1, 7.0, -1.0]
LIM = {32: 2 ** 31 - 1, 64: 2 ** 63 - 1}
# the edges of issue 39: floats beyond the integer types, NaN, infinities, signed zeros
# (x and xd hold them), shift amounts outside [0, width)
NAN, INF = float("nan"), float("inf")
EDGE_F = [NAN, INF, -INF, 3e9, -3e9, 2147483648.0, -2147483648.0, 2147483520.0, 1e19, -1e19,
          9.223372e18, 0.0, -0.0, 2.5, -2.5, 0.999]
EDGE_D = [NAN, INF, -INF, 2147483647.9, 2147483648.0, -2147483648.9, -2147483649.0,
          9.223372036854775807e18, -9.3e18, 4e9, -0.0, 0.0, 1.5, -7.75]
SHIFT_EDGE = [-1, -2, -31, -64, 31, 32, 33, 63, 64, 65, 2 ** 31 - 1]


@dataclass
class Term:
    src: str
    ty: str
    bound: int = 0  # |value| <= bound (integers)


@dataclass
class Case:
    seed: int
    values: dict
    floats: list
    exprs: list = field(default_factory=list)  # (Term, output array, slot)
    doubles: list = field(default_factory=lambda: [0.0] * 4)
    edges: bool = False


class Gen:
    def __init__(self, rng: random.Random, values: dict, edges: bool = False):
        self.r = rng
        self.values = values
        self.edges = edges  # draw issue 39's edges too (a different random stream)
        self.ilim = LIM[64 if any(abs(v) > LIM[32] for v in values.values()) else 32]

    # ---------------------------------------------------------------- leaves

    def leaf(self, ty: str) -> Term:
        r = self.r
        if ty == F32:
            if r.random() < 0.5:
                return Term(f"x[{r.randrange(4)}]", F32)
            return Term(repr(r.choice(F_VALUES)), F32)
        if ty == BOOL:
            return Term(r.choice(["True", "False"]), BOOL)
        names = [n for n, v in self.values.items() if ty != IDX or abs(v) <= self.ilim]
        if r.random() < 0.6 and names:
            n = r.choice(names)
            v = abs(self.values[n])
            if ty == IDX:
                return Term(n, IDX, v)
            cap = 2 ** 31 if ty == I32 else 2 ** 63
            return Term(f"{ty}({n})", ty, min(v, cap))
        c = r.choice(SMALL)
        if ty == I32 and r.random() < 0.2:
            c = r.choice([2 ** 31 - 1, 2 ** 30 + 1])
        if ty == I64 and r.random() < 0.2:
            c = r.choice([2 ** 62 + 1, 2 ** 40 + 3])
        c = -c if r.random() < 0.3 else c
        src = f"({c})" if c < 0 else str(c)
        return Term(f"{ty}({src})" if ty != IDX else src, ty, abs(c))

    # ---------------------------------------------------------------- integers

    def fits(self, t: Term) -> bool:
        return t.ty != IDX or t.bound <= self.ilim

    def cap(self, ty: str, b: int) -> int:
        return min(b, 2 ** 31) if ty == I32 else min(b, 2 ** 63) if ty == I64 else b

    def int_term(self, ty: str, depth: int) -> Term:
        for _ in range(8):
            t = self._int_term(ty, depth)
            if self.fits(t):
                return t
        return self.leaf(ty)

    def _sub(self, ty: str, depth: int) -> Term:
        """An operand of an operation of type ``ty``: mostly ``ty``, sometimes a
        narrower integer that joins to it."""
        if ty == IDX and self.r.random() < 0.25:
            return self.int_term(self.r.choice([I32, I64]), depth)
        if ty == I64 and self.r.random() < 0.2:
            return self.int_term(I32, depth)
        return self.int_term(ty, depth)

    def _int_term(self, ty: str, depth: int) -> Term:
        r = self.r
        if depth <= 0 or r.random() < 0.15:
            return self.leaf(ty)
        k = r.random()
        d = depth - 1
        if k < 0.35:
            op = r.choice(["+", "-", "*"])
            a, b = self._sub(ty, d), self._sub(ty, d)
            bound = a.bound * b.bound if op == "*" else a.bound + b.bound
            return Term(f"({a.src} {op} {b.src})", ty, self.cap(ty, bound))
        if k < 0.5:
            op = r.choice(["//", "%"])
            a, b = self._sub(ty, d), self.int_term(ty, d)
            m = r.choice([7, 3, 16, 1000])
            div = f"({b.src} % {m} + 1)" if r.random() < 0.6 else str(r.choice([1, 2, 3, 16, 255]))
            if r.random() < 0.2:
                div = f"(-{div})"
            bound = a.bound + 1 if op == "//" else 1000
            return Term(f"({a.src} {op} {div})", ty, self.cap(ty, bound))
        if k < 0.6:
            op = r.choice(["<<", ">>"])
            a, b = self._sub(ty, d), self.int_term(ty, d)
            amount = f"({b.src} % 8)" if r.random() < 0.5 else str(r.randrange(0, 8))
            if self.edges and r.random() < 0.5:
                amount = self.edge_amount(ty, b)
            bound = a.bound * 128 if op == "<<" else a.bound
            return Term(f"({a.src} {op} {amount})", ty, self.cap(ty, bound))
        if self.edges and k < 0.66:
            return self.float_to_int(ty, d)
        if k < 0.68:
            op = r.choice(["&", "|", "^"])
            a, b = self._sub(ty, d), self._sub(ty, d)
            bound = 2 * max(a.bound, b.bound) + 1
            return Term(f"({a.src} {op} {b.src})", ty, self.cap(ty, bound))
        if k < 0.78:
            fn = r.choice(["min", "max"])
            a, b = self._sub(ty, d), self._sub(ty, d)
            return Term(f"{fn}({a.src}, {b.src})", ty, max(a.bound, b.bound))
        if k < 0.83:
            a = self.int_term(ty, d)
            return Term(f"abs({a.src})", ty, self.cap(ty, a.bound))
        if k < 0.88:
            a = self.int_term(ty, d)
            return Term(f"(-{a.src})", ty, self.cap(ty, a.bound))
        if k < 0.94:
            c = self.bool_term(d)
            a, b = self.int_term(ty, d), self.int_term(ty, d)
            return Term(f"select({c.src}, {a.src}, {b.src})", ty, max(a.bound, b.bound))
        # a cast from another integer width
        if ty == IDX:
            a = self.int_term(r.choice([I32, I64]), d)
            return a  # no index() cast in the language: an operand joins to index
        a = self.int_term(r.choice([I32, I64, IDX]), d)
        return Term(f"{ty}({a.src})", ty, self.cap(ty, a.bound))

    def edge_amount(self, ty: str, b: Term) -> str:
        """A shift amount that may lie outside [0, width): any value of an i32 / i64
        term, or an edge constant; for index (exact) only negative ones."""
        r = self.r
        if ty == IDX:
            return f"({b.src} % 8 - 8)" if r.random() < 0.5 else f"({-r.randrange(1, 70)})"
        if r.random() < 0.5:
            return b.src
        c = r.choice(SHIFT_EDGE)
        return f"({c})" if c < 0 else str(c)

    def float_to_int(self, ty: str, d: int) -> Term:
        """``i32(f)`` / ``i64(f)`` of an f32, f64, f16 or bf16 value (index: an i64 one)."""
        r = self.r
        to = ty if ty != IDX else I64
        k = r.random()
        if k < 0.35:
            src = f"xd[{r.randrange(4)}]"
        elif k < 0.5:
            src = f"{r.choice(['f16', 'bf16'])}(x[{r.randrange(4)}])"
        else:
            src = self.float_term(d).src
        return Term(f"{to}({src})", ty, 2 ** 63 if to == I64 else 2 ** 31)

    # ---------------------------------------------------------------- bool, float

    def bool_term(self, depth: int) -> Term:
        r = self.r
        k = r.random()
        d = max(depth - 1, 0)
        if depth <= 0 or k < 0.1:
            return self.leaf(BOOL)
        if k < 0.6:
            ty = r.choice([I32, I64, IDX])
            a, b = self.int_term(ty, d), self.int_term(ty, d)
            op = r.choice(["==", "!=", "<", "<=", ">", ">="])
            return Term(f"({a.src} {op} {b.src})", BOOL)
        if k < 0.75:
            a, b = self.float_term(d), self.float_term(d)
            op = r.choice(["==", "!=", "<", "<=", ">", ">="])
            return Term(f"({a.src} {op} {b.src})", BOOL)
        if k < 0.9:
            a, b = self.bool_term(d), self.bool_term(d)
            return Term(f"({a.src} {r.choice(['and', 'or'])} {b.src})", BOOL)
        return Term(f"(not {self.bool_term(d).src})", BOOL)

    def float_term(self, depth: int) -> Term:
        r = self.r
        if depth <= 0 or r.random() < 0.2:
            return self.leaf(F32)
        d = depth - 1
        k = r.random()
        if k < 0.45:
            a, b = self.float_term(d), self.float_term(d)
            return Term(f"({a.src} {r.choice(['+', '-', '*', '/'])} {b.src})", F32)
        if k < 0.6:
            a, b = self.float_term(d), self.float_term(d)
            return Term(f"{r.choice(['min', 'max'])}({a.src}, {b.src})", F32)
        if k < 0.7:
            return Term(f"{r.choice(['abs', 'sqrt'])}({self.float_term(d).src})", F32)
        if self.edges and k < 0.76:
            return self.float_edge(d)
        if k < 0.8:
            c = self.bool_term(d)
            a, b = self.float_term(d), self.float_term(d)
            return Term(f"select({c.src}, {a.src}, {b.src})", F32)
        return Term(f"f32({self.int_term(r.choice([I32, I64, IDX]), d).src})", F32)


    def float_edge(self, d: int) -> Term:
        """Signed zeros and NaN through min/max of f64 and f16, and negation."""
        r = self.r
        fn = r.choice(["min", "max"])
        k = r.random()
        if k < 0.4:
            i, j = r.randrange(4), r.randrange(4)
            return Term(f"f32({fn}(xd[{i}], xd[{j}]))", F32)
        if k < 0.6:
            a, b = self.float_term(d), self.float_term(d)
            return Term(f"f32({fn}(f16({a.src}), f16({b.src})))", F32)
        return Term(f"(-{self.float_term(d).src})", F32)


OUT = {I32: "o32", I64: "o64", IDX: "o64", BOOL: "o32", F32: "of"}


def make_case(seed: int, k: int = 24, depth: int = 3, wide: bool = False,
              edges: bool = False) -> Case:
    """One case; ``edges``: also issue 39's edges (conversions of NaN, infinities and
    out-of-range floats, shift amounts outside the width, signed zeros in min/max)."""
    rng = random.Random(seed)
    values = {}
    for n in ("a", "b", "c"):
        u = rng.random()
        values[n] = rng.choice(SPECIAL) if u < 0.3 else rng.choice(SMALL) * rng.choice([1, -1])
    floats = [rng.choice(F_VALUES) * rng.choice([1, -1]) for _ in range(4)]
    case = Case(seed, values, floats, edges=edges)
    if edges:
        case.floats = [rng.choice(EDGE_F + F_VALUES) for _ in range(4)]
        case.doubles = [rng.choice(EDGE_D) for _ in range(4)]
    g = Gen(rng, values, edges)
    if wide:
        g.ilim = LIM[64]
    slots = {"o32": 0, "o64": 0, "of": 0}
    for _ in range(k):
        ty = rng.choice([I32, I32, I64, IDX, IDX, BOOL, F32])
        t = (g.bool_term(depth) if ty == BOOL else g.float_term(depth) if ty == F32
             else g.int_term(ty, depth))
        if t.ty == BOOL:
            t = Term(f"select({t.src}, 1, 0)", I32)
        arr = OUT[t.ty] if t.ty != BOOL else "o32"
        case.exprs.append((t, arr, slots[arr]))
        slots[arr] += 1
    return case


def source(case: Case) -> str:
    lines = ["def f(a: index, b: index, c: index, x: f32[4], xd: f64[4], o32: i32[64],",
             "      o64: i64[64], of: f32[64]):",
             "    for bb in par(0, 1) @ BLOCKS:",
             "        for tt in par(0, 1) @ THREADS:"]
    for t, arr, j in case.exprs:
        lines.append(f"            {arr}[{j}] = {t.src}")
    return "\n".join(lines) + "\n"


@dataclass
class Outcome:
    mismatches: list = field(default_factory=list)
    exprs: int = 0
    smt_determined: int = 0
    smt_open: int = 0
    smt_skipped: int = 0
    refused: int = 0   # launches refused: an index term beyond 64 bits


def _arrays(case: Case):
    return dict(x=np.array(case.floats, np.float32), xd=np.array(case.doubles, np.float64),
                o32=np.zeros(64, np.int32),
                o64=np.zeros(64, np.int64), of=np.zeros(64, np.float32))


def _same_float(u, v) -> bool:
    return (np.isnan(u) and np.isnan(v)) or u.tobytes() == v.tobytes()


def _wrap(v: int, bits: int) -> int:
    h = 1 << (bits - 1)
    return (v + h) % (2 * h) - h


def smt_value(p, stmt, values: dict, timeout_ms: int = 4000):
    """(status, value): "det" (the encoding gives one value), "open" (the value the
    interpreter computed is one of several the encoding allows), "bad" (the
    interpreter's value is impossible under the encoding) or "skip" (floats, unknown)."""
    enc = Encoder(p)
    env = enc.thread("e")
    try:
        term = env.expr(stmt.rhs)
    except Exception:  # noqa: BLE001 - Unsupported, floats
        return "skip", None
    if z3.is_bool(term):
        term = z3.If(term, 1, 0)
    out = z3.Int("out")
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    for n, v in values.items():
        s.add(enc.params[n] == v)
    s.add(out == term)
    if s.check() != z3.sat:
        return "skip", None
    v = s.model().eval(out, model_completion=True).as_long()
    s.add(out != v)
    r = s.check()
    if r == z3.unsat:
        return "det", v
    return ("open" if r == z3.sat else "skip"), v


def run_case(case: Case, with_smt: bool = True) -> Outcome:
    out = Outcome()
    src = source(case)
    p = gpudsl.proc_from_source(src, namespace=NS)
    ref = _arrays(case)
    gpudsl.interpret(p, **case.values, **ref)
    emu = _arrays(case)
    try:
        p.compile("emulator", check=False)(**case.values, **emu)
    except gpudsl.LaunchError as e:
        if "beyond 64-bit index arithmetic" not in str(e):
            raise
        out.refused = 1
        return out
    stmts = _assigns(p.ir)
    for (t, arr, j), st in zip(case.exprs, stmts):
        out.exprs += 1
        a, b = ref[arr][j], emu[arr][j]
        ok = _same_float(a, b) if arr == "of" else int(a) == int(b)
        if not ok:
            out.mismatches.append(("emulator", t.src, arr, a, b))
        if not with_smt or arr == "of":
            continue
        status, v = smt_value(p.ir, st, case.values)
        if status == "skip":
            out.smt_skipped += 1
            continue
        bits = 32 if arr == "o32" else 64
        if status == "det":
            out.smt_determined += 1
            if _wrap(v, bits) != int(a):
                out.mismatches.append(("smt", t.src, arr, a, v))
        else:
            out.smt_open += 1
            if not _possible(p.ir, st, case.values, int(a), bits):
                out.mismatches.append(("smt-impossible", t.src, arr, a, v))
    return out


def _possible(p, stmt, values, want: int, bits: int) -> bool:
    enc = Encoder(p)
    term = enc.thread("e").expr(stmt.rhs)
    if z3.is_bool(term):
        term = z3.If(term, 1, 0)
    s = z3.Solver()
    s.set("timeout", 4000)
    for n, v in values.items():
        s.add(enc.params[n] == v)
    h = 1 << (bits - 1)
    s.add((term + h) % (2 * h) - h == want)
    return s.check() != z3.unsat


def _assigns(p):
    out = []

    def walk(body):
        for st in body:
            if isinstance(st, Assign):
                out.append(st)
            for attr in ("body", "orelse"):
                if hasattr(st, attr):
                    walk(getattr(st, attr))
    walk(p.body)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.codegen.expr_differential")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=None)
    ap.add_argument("--no-smt", action="store_true")
    ap.add_argument("--no-edges", action="store_true",
                    help="without issue 39's edges (the cases of earlier versions)")
    ap.add_argument("--wide-index", action="store_true",
                    help="index terms up to 64 bits whatever the parameters")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    n = total = det = opn = skipped = refused = 0
    bad = []
    while time.monotonic() - t0 < a.seconds and (a.cases is None or n < a.cases):
        case = make_case(a.seed * 1_000_003 + n, wide=a.wide_index, edges=not a.no_edges)
        try:
            o = run_case(case, not a.no_smt)
        except Exception as e:  # noqa: BLE001 - a crash is a finding too
            bad.append((case.seed, "crash", repr(e)[:300]))
            print(f"case seed {case.seed}: crash: {e!r}"[:400], flush=True)
            n += 1
            continue
        total += o.exprs
        det += o.smt_determined
        opn += o.smt_open
        skipped += o.smt_skipped
        refused += o.refused
        for m in o.mismatches:
            bad.append((case.seed,) + m)
            print(f"case seed {case.seed} values {case.values}: {m}", flush=True)
        n += 1
    dt = time.monotonic() - t0
    print(f"{n} cases, {total} expressions in {dt:.0f} s (seed {a.seed}); SMT: {det} "
          f"determined, {opn} open (interpreter's value possible), {skipped} not encoded; "
          f"{refused} launches refused (an index term beyond 64 bits)")
    print(f"{len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
