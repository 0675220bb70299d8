"""Random procs for the differential test of the primitives, as source text.

``Gen(rng).program()`` gives a :class:`Program`: the proc's source, the sources
of the sub-procs and instrs it may call, and the size bindings to run it at.
Procs are written as text and parsed with ``gpudsl.proc_from_source``, so they
are always well-formed; a source the frontend refuses is skipped by the runner.

Three families:

- ``host``: ``seq`` / unmapped ``par`` loops over ``n`` with affine bounds,
  ``//``, ``%``, ``min``/``max``, reductions, guards, local scalars and small
  arrays (always written before read), calls of small sub-procs with windows
  and scalar arguments;
- ``gpu``: ``par(...) @ BLOCKS`` / ``@ THREADS`` kernels staging through
  ``SHARED`` arrays with ``sync()``, per-thread ``REGISTER`` accumulators,
  block-level ``seq`` loops (sometimes with a barrier missing: racy procs);
- ``naive``: the sequential form of such kernels (``seq`` over blocks and
  threads), the starting point of ``parallelize_loop`` / ``stage_mem``;
- ``warp``: kernels with warp collectives (:mod:`.procgen_warp`);
- ``hopper``: setmaxnreg and swizzled SHARED tiles (:mod:`.procgen_hopper`);
- ``wgmma``: kernels with a warpgroup MMA (:mod:`.procgen_wgmma`), only with
  ``GPUDSL_DIFF_FAMILY=wgmma`` (``Gen(r, family="wgmma")``).
- ``tma``: kernels with bulk tensor copies (:mod:`.procgen_tma`), only with
  ``GPUDSL_DIFF_FAMILY=tma``; guarded edges (``remove_guard``, ``stage_mem(zeros=True)``):
  ``GPUDSL_DIFF_FAMILY=edge``; grids of tiles (``set_block_order``, :mod:`.procgen_tiles`):
  ``GPUDSL_DIFF_FAMILY=tiles``; thread block clusters (:mod:`.procgen_clusters`):
  ``GPUDSL_DIFF_FAMILY=clusters``.

Values are small integers in float32, so sums are exact in any order.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

# Sub-procs and instrs that generated procs call (and `replace` targets).
CALLEES = {
    "addv": '''@proc
def addv(k: size, w: [f32][k], v: f32):
    for i in seq(0, k):
        w[i] += v
''',
    "setw": '''@proc
def setw(v: f32, w: [f32][2]):
    w[0] = 5.0
    w[1] = v
''',
    "scalew": '''@proc
def scalew(k: size, w: [f32][k], src: [f32][k]):
    for j in seq(0, k):
        w[j] = src[j] * 2.0
''',
    "acc1": '''@instr("{y} += {x};")
def acc1(x: [f32][1] @ GLOBAL, y: [f32][1] @ GLOBAL):
    for k in seq(0, 1):
        y[k] += x[k]
''',
    "axpy2": '''@instr("axpy2({a}, &{x}, &{y});")
def axpy2(a: f32, x: [f32][2] @ GLOBAL, y: [f32][2] @ GLOBAL):
    for k in seq(0, 2):
        y[k] = a * x[k] + y[k]
''',
}
CALL_ORDER = ["addv", "setw", "scalew", "acc1", "axpy2"]


@dataclass
class Program:
    family: str
    name: str
    source: str
    sizes: list  # list of dicts {size name: value}
    callees: list = field(default_factory=list)  # names in CALL_ORDER that it may use


# ------------------------------------------------------------------ host family

N_BOUNDS = [("0", "n"), ("1", "n"), ("0", "n - 1"), ("0", "n // 2"), ("n // 2", "n"),
            ("0", "min(n, 3)"), ("max(1, n - 3)", "n"), ("n % 2", "n")]
C_BOUNDS = [(0, 2), (0, 3), (0, 4), (1, 4)]


class _Host:
    """One host-level proc: ``x, y: f32[n]``, ``z: f32[n, 4]``, ``w: f32[4]``, ``a: f32``."""

    def __init__(self, rng: random.Random):
        self.r = rng
        self.lines: list[str] = []
        self.count = 0
        self.callees: set = set()
        self.used_loop_names: set = set()

    def fresh(self, base: str) -> str:
        self.count += 1
        # Reuse popular names across sibling scopes sometimes (i, j), as users do.
        if base in ("i", "j", "k") and base not in self.used_loop_names and \
                self.r.random() < 0.7:
            self.used_loop_names.add(base)
            return base
        return f"{base}{self.count}"

    # -- indices: vars are (name, kind) with kind "N" (in [0, n)) or an int c (in [0, c))
    def idx_n(self, vars_):
        r = self.r
        nv = [v for v, k in vars_ if k == "N"]
        cv = [v for v, k in vars_ if k != "N"]
        opts = ["0", "n - 1"]
        for v in nv:
            opts += [v, f"n - 1 - {v}", f"{v} // 2", f"({v} + 1) % n",
                     f"min({v} + 1, n - 1)", f"max({v} - 1, 0)", v, v]
        for v in cv:
            opts += [v, f"n - 1 - {v}"]
        return r.choice(opts)

    def idx_4(self, vars_):
        r = self.r
        opts = ["0", "3", "1"]
        for v, k in vars_:
            if k == "N":
                opts += [f"{v} % 4", f"min({v}, 3)"]
            else:
                opts += [v, v, f"3 - {v}", f"{v} % 2", f"{v} // 2"]
        return r.choice(opts)

    def ref(self, arr, vars_):
        if arr in ("x", "y"):
            return f"{arr}[{self.idx_n(vars_)}]"
        if arr == "z":
            return f"z[{self.idx_n(vars_)}, {self.idx_4(vars_)}]"
        if arr == "w":
            return f"w[{self.idx_4(vars_)}]"
        return arr  # local scalar or local array handled by caller

    def term(self, scope):
        r = self.r
        vars_, locs = scope
        ch = r.random()
        if ch < 0.55:
            return self.ref(r.choice(["x", "y", "z", "w", "x"]), vars_)
        if ch < 0.7 and locs:
            name, shape = r.choice(locs)
            return name if shape is None else f"{name}[{self.idx_4(vars_)}]"
        if ch < 0.8:
            return "a"
        return r.choice(["1.0", "2.0", "3.0", "-1.0"])

    def expr(self, scope):
        r = self.r
        t = self.term(scope)
        ch = r.random()
        if ch < 0.4:
            return t
        if ch < 0.9:
            return f"{t} {r.choice(['+', '-', '*', '+'])} {self.term(scope)}"
        if ch < 0.96:
            return f"{r.choice(['min', 'max'])}({t}, {self.term(scope)})"
        # the math builtins, their values kept exact (small integers): pow by 1, or a
        # select whose other, evaluated branch is a transcendental
        fn = r.choice(["sin", "cos", "erf", "rsqrt", "tanh"])
        return r.choice([f"pow({t}, 1.0)", f"({t}) ** 1.0",
                         f"select({t} == {t}, {t}, {fn}({self.term(scope)}))"])

    def target(self, scope):
        r = self.r
        vars_, locs = scope
        if locs and r.random() < 0.3:
            name, shape = r.choice(locs)
            return name if shape is None else f"{name}[{self.idx_4(vars_)}]"
        return self.ref(r.choice(["y", "z", "y", "x", "w"]), vars_)

    def cond(self, vars_):
        r = self.r
        opts = ["n > 5", "n % 2 == 0"]
        for v, k in vars_:
            if k == "N":
                opts += [f"{v} % 2 == 0", f"{v} < n // 2", f"{v} > 0", f"{v} == n - 1",
                         f"{v} + 1 < n and {v} > 1"]
            else:
                opts += [f"{v} == 0", f"{v} < 2", f"{v} % 2 == 1"]
        if r.random() < 0.15:
            return f"x[{self.idx_n(vars_)}] > 0.0"
        return r.choice(opts)

    # -- statements
    def emit(self, depth, text):
        self.lines.append("    " * depth + text)

    def block(self, depth, scope, n_stmts, nest):
        for _ in range(n_stmts):
            self.stmt(depth, scope, nest)

    def stmt(self, depth, scope, nest):
        r = self.r
        vars_, locs = scope
        ch = r.random()
        if nest < 3 and ch < 0.3:
            return self.loop(depth, scope, nest)
        if ch < 0.38:
            c = self.cond(vars_)
            self.emit(depth, f"if {c}:")
            self.block(depth + 1, (vars_, list(locs)), r.randint(1, 2), nest + 1)
            if r.random() < 0.4:
                self.emit(depth, "else:")
                self.block(depth + 1, (vars_, list(locs)), 1, nest + 1)
            return
        if ch < 0.44:
            return self.alloc(depth, scope, nest)
        if ch < 0.56:
            return self.shaped(depth, scope)
        if ch < 0.62:
            return self.call(depth, scope)
        op = "+=" if r.random() < 0.4 else "="
        self.emit(depth, f"{self.target(scope)} {op} {self.expr(scope)}")

    def shaped(self, depth, scope):
        """Shapes some primitives need: twin loops (fuse), a perfect nest
        (reorder_loops), a loop whose body does not use it (remove_loop), an
        allocation used only inside the next loop (sink_alloc)."""
        r = self.r
        vars_, locs = scope
        kind = r.choice(["twin", "nest", "idem", "sink"])
        v1 = self.fresh(r.choice(["i", "j", "k"]))
        if kind == "twin":
            lo, hi = r.choice(N_BOUNDS)
            v2 = self.fresh(r.choice(["i", "j", "k"]))
            self.emit(depth, f"for {v1} in seq({lo}, {hi}):")
            self.emit(depth + 1, f"y[{v1}] = {self.expr((vars_ + [(v1, 'N')], locs))}")
            self.emit(depth, f"for {v2} in seq({lo}, {hi}):")
            self.emit(depth + 1, f"z[{v2}, {r.choice(['0', '1'])}] += y[{r.choice([v2, f'n - 1 - {v2}'])}]"
                      f" * {r.choice(['2.0', 'a'])}")
        elif kind == "nest":
            v2 = self.fresh("j")
            lo, hi = r.choice(N_BOUNDS)
            self.emit(depth, f"for {v1} in seq({lo}, {hi}):")
            self.emit(depth + 1, f"for {v2} in seq(0, 4):")
            sc = (vars_ + [(v1, "N"), (v2, 4)], locs)
            self.emit(depth + 2, f"z[{v1}, {v2}] {r.choice(['=', '+='])} {self.expr(sc)}")
        elif kind == "idem":
            self.emit(depth, f"for {v1} in seq(0, {r.choice([1, 2, 3, 'n'])}):")
            self.emit(depth + 1, f"y[{self.idx_n(vars_)}] = x[{self.idx_n(vars_)}] * "
                                 f"{r.choice(['2.0', 'a'])}")
        else:
            name = self.fresh("acc")
            self.emit(depth, f"{name}: f32")
            self.emit(depth, f"for {v1} in seq(0, 4):")
            self.emit(depth + 1, f"{name} = w[{v1}] + {r.choice(['1.0', 'a'])}")
            self.emit(depth + 1, f"z[{self.idx_n(vars_)}, {v1}] = {name} * 2.0")

    def loop(self, depth, scope, nest):
        r = self.r
        vars_, locs = scope
        v = self.fresh(r.choice(["i", "j", "k", "l"]))
        kind = "par" if r.random() < 0.2 else "seq"
        if r.random() < 0.65:
            lo, hi = r.choice(N_BOUNDS)
            vk = "N"
        else:
            lo, hi = r.choice(C_BOUNDS)
            vk = 4
        self.emit(depth, f"for {v} in {kind}({lo}, {hi}):")
        self.block(depth + 1, (vars_ + [(v, vk)], list(locs)), r.randint(1, 3), nest + 1)

    def alloc(self, depth, scope, nest):
        r = self.r
        vars_, locs = scope
        name = self.fresh(r.choice(["s", "t", "acc"]))
        if r.random() < 0.6:
            self.emit(depth, f"{name}: f32")
            self.emit(depth, f"{name} = {self.expr(scope)}")
            locs.append((name, None))
        else:
            self.emit(depth, f"{name}: f32[4]")
            k = self.fresh("q")
            self.emit(depth, f"for {k} in seq(0, 4):")
            self.emit(depth + 1, f"{name}[{k}] = {self.expr((vars_ + [(k, 4)], locs))}")
            locs.append((name, 4))
        # use it right away sometimes (reduction into it, then a store out)
        if r.random() < 0.6:
            tgt = name if locs[-1][1] is None else f"{name}[{self.idx_4(vars_)}]"
            self.emit(depth, f"{tgt} += {self.expr(scope)}")
            self.emit(depth, f"{self.ref('y', vars_)} = {tgt}")

    def call(self, depth, scope, which=None):
        r = self.r
        vars_, locs = scope
        which = which or r.choice(["addv", "setw", "scalew", "addv", "acc1", "axpy2"])
        self.callees.add(which)
        row = self.idx_n(vars_)
        if which == "addv":
            k, win = r.choice([("4", f"z[{row}, 0:4]"), ("4", "w[0:4]"),
                               ("2", f"z[{row}, 1:3]"), ("n", "y[0:n]")])
            self.emit(depth, f"addv({k}, {win}, {self.term(scope)})")
        elif which == "setw":
            self.emit(depth, f"setw(z[{row}, {r.choice(['0', '1', '2'])}], "
                             f"z[{row}, 0:2])" if r.random() < 0.5 else
                      f"setw({self.term(scope)}, z[{row}, 2:4])")
        elif which == "scalew":
            self.emit(depth, f"scalew(4, z[{row}, 0:4], w[0:4])")
        elif which == "acc1":
            # the statement shape that `replace(p, "k", acc1)` matches
            k = self.fresh("k")
            self.emit(depth, f"for {k} in seq(0, 1):")
            self.emit(depth + 1, f"y[{row} + {k}] += x[{self.idx_n(vars_)} + {k}]")
        else:
            k = self.fresh("k")
            self.emit(depth, f"for {k} in seq(0, 2):")
            self.emit(depth + 1, f"z[{row}, {k}] = a * w[{k} + 2] + z[{row}, {k}]")

    def program(self, name: str) -> Program:
        r = self.r
        asserts = ["n >= 4"] + r.sample(["n % 2 == 0", "n % 4 == 0", "n >= 6"],
                                        r.choice([0, 0, 1]))
        self.block(1, ([], []), r.randint(1, 4), 0)
        if r.random() < 0.5:  # a statement that an instr matches (replace)
            v = self.fresh("i")
            self.emit(1, f"for {v} in seq(0, n):")
            self.call(2, ([(v, "N")], []), which=r.choice(["acc1", "axpy2"]))
        head = [f"def {name}(n: size, a: f32, x: f32[n], y: f32[n], z: f32[n, 4], "
                f"w: f32[4]):"] + [f"    assert {a}" for a in asserts]
        src = "\n".join(head + self.lines) + "\n"
        return Program("host", name, src, pick_sizes(r, asserts, ["n"]),
                       [c for c in CALL_ORDER if c in self.callees])


# ------------------------------------------------------------------ gpu / naive families


def _gpu(r: random.Random, name: str, naive: bool) -> Program:
    T = r.choice([4, 8, 16])
    lines = []
    racy = not naive and r.random() < 0.15

    def emit(d, t):
        lines.append("    " * d + t)

    bmap = "seq(0, n)" if naive else "par(0, n) @ BLOCKS"
    tmap = f"seq(0, {T})" if naive else f"par(0, {T}) @ THREADS"
    emit(1, f"for b in {bmap}:")
    d = 2
    shared = "SHARED" if not naive else r.choice(["GLOBAL", "SHARED"])
    if naive and r.random() < 0.25:
        emit(d, f"for t in {r.choice([f'seq(0, {T // 4})', f'par(0, {T // 4})'])}:")
        emit(d + 1, "for v in seq(0, 4):")
        emit(d + 2, "y[b, 4 * t + v] = x[b, 4 * t + v]")
        return Program("naive", name, _gpu_head(name, T) + "\n".join(lines) + "\n",
                       pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=4), [])
    if naive and r.random() < 0.5:
        # the simplest shape: a naive per-element body, no staging
        emit(d, f"for t in {tmap}:")
        body = r.choice([f"y[b, t] = x[b, t] * 2.0 + a",
                         f"y[b, t] += x[b, {T - 1} - t]",
                         f"y[b, t] = x[b, (t + 1) % {T}] + x[b, t]"])
        emit(d + 1, body)
        if r.random() < 0.5:
            emit(d + 1, f"for k in seq(0, 2):")
            emit(d + 2, f"y[b, t] += x[b, (t + k) % {T}]")
        return Program("naive", name, _gpu_head(name, T) + "\n".join(lines) + "\n",
                       pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=4), [])
    emit(d, f"s: f32[{T}] @ {shared}")
    if not naive and r.random() < 0.3:
        emit(d, f"reg: f32[{T}] @ REGISTER")
        reg = True
    else:
        reg = False
    rounds = r.random() < 0.35
    if rounds:
        emit(d, "for rr in seq(0, 2):")
        d += 1
    phases = r.randint(2, 3)
    for ph in range(phases):
        tv = "t" if ph == 0 or r.random() < 0.5 else f"t{ph}"
        if tv != "t" and any(f"for {tv} in" in ln for ln in lines):
            tv = "t"
        emit(d, f"for {tv} in {tmap}:")
        ph_kind = "load" if ph == 0 else r.choice(["shift", "reduce", "store", "guard"])
        if ph_kind == "load":
            src = r.choice([f"x[b, {tv}]", f"x[b, {tv}] + a", f"x[b, {T - 1} - {tv}] * 2.0"])
            if rounds:
                src = f"{src} + y[b, {tv}]"
            emit(d + 1, f"s[{tv}] = {src}")
            if reg:
                emit(d + 1, f"reg[{tv}] = s[{tv}]")
        elif ph_kind == "shift":
            emit(d + 1, f"y[b, {tv}] = s[({tv} + 1) % {T}] + s[{tv}]")
        elif ph_kind == "reduce":
            acc = "acc" if r.random() < 0.5 else f"acc{ph}"
            emit(d + 1, f"{acc}: f32")
            emit(d + 1, f"{acc} = 0.0")
            emit(d + 1, f"for k in seq(0, {r.choice([2, 3, T])}):")
            emit(d + 2, f"{acc} += s[({tv} + k) % {T}]")
            emit(d + 1, f"y[b, {tv}] = {acc}" + (f" + reg[{tv}]" if reg else ""))
        elif ph_kind == "store":
            emit(d + 1, f"y[b, {tv}] = s[{T - 1} - {tv}] * a" +
                 (f" + reg[{tv}]" if reg else ""))
        else:
            emit(d + 1, f"if {tv} < {T // 2}:")
            emit(d + 2, f"y[b, {tv}] = s[{tv} + {T // 2}] - s[{tv}]")
            emit(d + 1, "else:")
            emit(d + 2, f"y[b, {tv}] = s[{tv}]")
        if not naive and not (racy and ph == 0):
            if ph < phases - 1 or rounds:
                emit(d, "sync()")
    return Program("naive" if naive else "gpu", name,
                   _gpu_head(name, T) + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=4), [])


def _gpu_head(name, T):
    return (f"def {name}(n: size, a: f32, x: f32[n, {T}], y: f32[n, {T}]):\n"
            f"    assert n >= 1\n")


# ------------------------------------------------------------------ sizes


def pick_sizes(r: random.Random, asserts, names, lo: int = 4, hi: int = 12) -> list:
    """2-3 bindings of the size parameters satisfying the asserts (the smallest first)."""
    ok = []
    for v in range(lo, hi + 1):
        env = {nm: v for nm in names}
        if all(eval(a, {"min": min, "max": max}, env) for a in asserts):  # noqa: S307
            ok.append(v)
    picked = [ok[0]] + r.sample(ok[1:], min(len(ok) - 1, r.choice([1, 2])))
    return [{nm: v for nm in names} for v in sorted(set(picked))]


# GPUDSL_DIFF_FAMILY=async: every program of the async family (long runs of it)
FAMILY = os.environ.get("GPUDSL_DIFF_FAMILY", "")


class Gen:
    """Random programs; deterministic for a given ``random.Random``; ``family`` forces a
    family (default: ``$GPUDSL_DIFF_FAMILY``)."""

    def __init__(self, rng: random.Random, family: str | None = None):
        self.r = rng
        self.family = FAMILY if family is None else family

    def program(self, name: str = "p") -> Program:
        FAMILY = self.family
        if FAMILY == "wgmma":  # warpgroup MMAs (docs/hopper.md): only when asked for
            from .procgen_wgmma import wgmma_program
            return wgmma_program(self.r, name)
        if FAMILY == "tma":  # bulk tensor copies (docs/hopper.md): only when asked for
            from .procgen_tma import tma_program
            return tma_program(self.r, name)
        if FAMILY == "edge":  # guarded edges, remove_guard (docs/hopper.md): when asked for
            from .procgen_edges import edge_program
            return edge_program(self.r, name)
        if FAMILY == "clusters":  # thread block clusters, sync_cluster(): when asked for
            from .procgen_clusters import clusters_program
            return clusters_program(self.r, name)
        if FAMILY == "tiles":  # grids of tiles, set_block_order: when asked for
            from .procgen_tiles import tiles_program
            return tiles_program(self.r, name)
        ch = self.r.random()
        if ch < 0.12 or FAMILY == "sync":  # ranged and split barriers (docs/language.md (synchronization))
            from .procgen_sync import sync_program
            return sync_program(self.r, name)
        if ch < 0.24 or FAMILY == "async":  # asynchronous copies (docs/async_copies.md)
            from .procgen_async import async_program
            return async_program(self.r, name)
        if ch < 0.3 or FAMILY == "hopper":  # setmaxnreg, swizzled tiles (docs/hopper.md)
            from .procgen_hopper import hopper_program
            return hopper_program(self.r, name)
        ch = self.r.random()
        if ch < 0.55:
            return _Host(self.r).program(name)
        if ch < 0.8:
            return _gpu(self.r, name, naive=False)
        if ch < 0.9:
            return _gpu(self.r, name, naive=True)
        from .procgen_warp import warp_program

        return warp_program(self.r, name)


__all__ = ["Gen", "Program", "CALLEES", "CALL_ORDER", "pick_sizes"]
