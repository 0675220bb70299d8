"""Random applications of the primitives, with random (often illegal) arguments.

``random_step(rng, proc, instrs)`` picks a primitive of ``gpudsl.schedule`` and
arguments for it: targets found in the proc (loops, allocations, gaps, blocks,
syncs, calls, subexpressions) named by strings or cursors, and arguments that
are legal as often as not (factors, names, cut points, windows, shapes,
conditions, memories, mappings), mixed with illegal ones (floats, bools, wrong
arities, Python keywords, names already taken, out-of-range points).

A :class:`Step` is data: ``step.call(p)`` applies it, ``step.code()`` prints it
as a line of Python that reproduces it (``p = prim(p, ...)``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from gpudsl import BLOCKS, GLOBAL, REGISTER, SHARED, THREADS
from gpudsl import schedule as S
from gpudsl.ir.nodes import (Alloc, Assign, BinOp, Builtin, Call, For, If, Read, Reduce,
                             Sync, UnOp, Var)
from gpudsl.ir.printer import print_expr
from gpudsl.ir.visitor import walk as _walk
from gpudsl.schedule.cursors import Cursor, iter_stmts

PRIMITIVES = ["divide_loop", "reorder_loops", "fission", "fuse", "unroll_loop", "cut_loop",
              "remove_loop", "simplify", "rename", "specialize", "parallelize_loop",
              "stage_mem", "set_memory", "lift_alloc", "sink_alloc", "expand_dim", "pad_dim",
              "bind_expr", "insert_sync", "delete_sync", "vectorize", "inline", "replace",
              "set_unroll", "set_blocks_per_sm", "merge_loops", "rearrange_dim",
              "reorder_stmts", "rotate_loop", "make_async", "pipeline_loop",
              "warp_specialize", "add_assert", "divide_dim", "make_tma", "make_wgmma",
              "set_swizzle", "pipeline_wgmma", "make_tma_store", "remove_guard",
              "set_registers", "set_block_order", "persist_blocks"]
# Relative weights (primitives that are hard to get accepted are tried more often).
WEIGHTS = {"stage_mem": 3, "parallelize_loop": 3, "vectorize": 2, "replace": 3,
           "remove_loop": 2, "reorder_loops": 1.5, "inline": 2,
           "fuse": 2, "expand_dim": 2, "sink_alloc": 2, "lift_alloc": 2, "delete_sync": 2,
           "insert_sync": 2, "simplify": 0.5, "rename": 0.5, "set_unroll": 0.5,
           "set_blocks_per_sm": 1, "merge_loops": 1, "rearrange_dim": 1, "fission": 4,
           "reorder_stmts": 3, "rotate_loop": 2, "make_async": 3, "pipeline_loop": 3,
           "warp_specialize": 3, "add_assert": 1, "divide_dim": 1, "make_tma": 2,
           "make_wgmma": 2, "set_swizzle": 1, "pipeline_wgmma": 1,
           "make_tma_store": 2, "remove_guard": 20, "set_block_order": 3, "persist_blocks": 1}

CONSTS = [(BLOCKS, "BLOCKS"), (THREADS, "THREADS"), (SHARED, "SHARED"),
          (REGISTER, "REGISTER"), (GLOBAL, "GLOBAL"), (None, "None")]
KEYWORDS = ["for", "if", "lambda", "None", "class", "in"]


@dataclass
class Arg:
    """One argument: a literal, a cursor (by address), or a ``p.find...`` chain."""

    kind: str  # "lit" | "cursor" | "find"
    value: object = None
    code_: str = ""

    def get(self, p):
        if self.kind == "lit":
            return self.value
        if self.kind == "cursor":
            k, addr, hi = self.value
            return Cursor(p, k, addr, hi)
        method, pattern, then = self.value
        c = getattr(p, method)(pattern)
        return getattr(c, then)() if then else c

    def code(self) -> str:
        if self.code_:
            return self.code_
        if self.kind == "lit":
            return repr(self.value)
        if self.kind == "cursor":
            k, addr, hi = self.value
            return f"Cursor(p, {k!r}, {addr!r}, {hi!r})"
        method, pattern, then = self.value
        return f"p.{method}({pattern!r})" + (f".{then}()" if then else "")


def lit(v, code=""):
    if not code:
        code = next((name for k, name in CONSTS if v is k), "")
    return Arg("lit", v, code)


@dataclass
class Step:
    prim: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)

    def call(self, p):
        fn = getattr(S, self.prim)
        return fn(p, *[a.get(p) for a in self.args],
                  **{k: a.get(p) for k, a in self.kwargs.items()})

    def code(self) -> str:
        parts = ["p"] + [a.code() for a in self.args] + \
            [f"{k}={a.code()}" for k, a in self.kwargs.items()]
        return f"p = {self.prim}({', '.join(parts)})"


# ------------------------------------------------------------------ what the proc holds


def _is_threads(s) -> bool:
    return isinstance(s, For) and s.mapping == THREADS


def _stages(t, loop) -> bool:
    """Does the thread loop copy a parameter (GLOBAL) into a SHARED allocation?"""
    shared = {s.name for _, s in t.allocs if s.mem == SHARED}
    params = {p.name for p in t.pdef.params if p.is_array}
    return any(isinstance(n, Assign) and n.name in shared and isinstance(n.rhs, Read)
               and n.rhs.name in params for n in _walk(loop))


class Targets:
    def __init__(self, pdef):
        self.pdef = pdef
        self.stmts = list(iter_stmts(pdef))
        self.loops, self.allocs, self.syncs, self.calls = [], [], [], []
        self.loop_names, self.alloc_names = [], []
        seen_l, seen_a = {}, {}
        for a, s in self.stmts:
            if isinstance(s, For):
                k = seen_l.get(s.iter, 0)
                seen_l[s.iter] = k + 1
                self.loops.append((a, s))
                self.loop_names.append(s.iter + (f" #{k}" if k else ""))
            elif isinstance(s, Alloc):
                k = seen_a.get(s.name, 0)
                seen_a[s.name] = k + 1
                self.allocs.append((a, s))
                self.alloc_names.append(s.name + (f" #{k}" if k else ""))
            elif isinstance(s, Sync):
                self.syncs.append((a, s))
            elif isinstance(s, Call):
                self.calls.append((a, s))
        self.names = {p.name for p in pdef.params} | {s.iter for _, s in self.loops} | \
            {s.name for _, s in self.allocs}

    def blocks(self):
        """Block addresses with their lengths."""
        out = [((), len(self.pdef.body))]
        for a, s in self.stmts:
            if isinstance(s, (For, If)):
                out.append((a + ("body",), len(s.body)))
            if isinstance(s, If) and s.orelse:
                out.append((a + ("orelse",), len(s.orelse)))
        return out


def _pick_named(r, addrs, names, kind_fallback="stmt"):
    """A target among ``addrs``: by name (string) or by cursor."""
    i = r.randrange(len(addrs))
    if names and r.random() < 0.6:
        return lit(names[i])
    return Arg("cursor", (kind_fallback, addrs[i][0], None))


def _loop(r, t: Targets, pred=None):
    cands = [(k, x) for k, x in enumerate(t.loops) if pred is None or pred(x[1])]
    if not cands or r.random() < 0.04:
        return lit(r.choice(["zz", "i #9", 3, "y[_] = _"]))
    k, (a, s) = r.choice(cands)
    if r.random() < 0.6:
        return lit(t.loop_names[k])
    return Arg("cursor", ("stmt", a, None))


def _alloc(r, t: Targets):
    if not t.allocs or r.random() < 0.04:
        return lit(r.choice(["zz", "x", "i"]))
    k = r.randrange(len(t.allocs))
    if r.random() < 0.6:
        return lit(t.alloc_names[k])
    return Arg("cursor", ("stmt", t.allocs[k][0], None))


def _gap(r, t: Targets):
    baddr, n = r.choice(t.blocks())
    i = r.randint(0, n)
    return Arg("cursor", ("gap", baddr + (i,), None))


def _block(r, t: Targets):
    baddr, n = r.choice(t.blocks())
    if n == 0:
        return lit("zz")
    i = r.randrange(n)
    j = r.randint(i + 1, min(n, i + 3)) if r.random() < 0.4 else i + 1
    if j == i + 1 and r.random() < 0.5:
        return Arg("cursor", ("stmt", baddr + (i,), None))
    return Arg("cursor", ("block", baddr + (i,), j))


def _fresh(r, t: Targets, base):
    if r.random() < 0.15:
        return r.choice(KEYWORDS + sorted(t.names) + ["1x", "", "a b"])
    k = 0
    while f"{base}{k}" in t.names:
        k += 1
    return f"{base}{k}"


def _bad_int(r):
    return r.choice([0, -1, 2.5, "2", True, None, 100])


def _subexprs(e, out):
    out.append(e)
    for f in ("lhs", "rhs", "arg", "args", "idx"):
        v = getattr(e, f, None)
        if v is None:
            continue
        for c in (v if isinstance(v, tuple) else (v,)):
            if isinstance(c, (BinOp, UnOp, Builtin, Read, Var)):
                _subexprs(c, out)


def _exprs(t: Targets):
    out = []
    for _, s in t.stmts:
        if isinstance(s, (Assign, Reduce)):
            _subexprs(s.rhs, out)
    return out


def _shape_of(t: Targets, name):
    prm = t.pdef.param(name)
    if prm is not None:
        return prm.shape
    for _, s in t.allocs:
        if s.name == name:
            return s.shape
    return None


def _accesses(stmts, out):
    for s in stmts:
        if isinstance(s, (Assign, Reduce)):
            out.append((s.name, s.idx))
            ex = []
            _subexprs(s.rhs, ex)
            out += [(e.name, e.idx) for e in ex if isinstance(e, Read)]
        for f in ("body", "orelse"):
            _accesses(getattr(s, f, ()), out)


def _inner_iters(stmts, out):
    for s in stmts:
        if isinstance(s, For):
            out.add(s.iter)
        for f in ("body", "orelse"):
            _inner_iters(getattr(s, f, ()), out)
    return out


def _written_only(stmts) -> set:
    """The arrays ``stmts`` assign and never read (write-only outputs: issue 40's
    staging without a copy in)."""
    nodes = [n for s in stmts for n in _walk(s)]
    return {n.name for n in nodes if isinstance(n, Assign)} - \
        {n.name for n in nodes if isinstance(n, (Read, Reduce))}


def _window(r, t: Targets, stmts):
    """A window of an array that ``stmts`` access: dimensions that use a loop
    variable bound inside the block become whole ranges (a write-only array more
    often than its share)."""
    acc = []
    _accesses(stmts, acc)
    acc = [(n, ix) for n, ix in acc if _shape_of(t, n) is not None]
    out = _written_only(stmts)
    if out and r.random() < 0.4:
        acc = [(n, ix) for n, ix in acc if n in out]
    if not acc or r.random() < 0.1:
        return r.choice(["x[0:n + 0.5]", "q[0]", "y[i:i]", "y", "x[0:n, 0:1]", "y[-1:2]"])
    name, idx = r.choice(acc)
    shape = _shape_of(t, name)
    if not idx:
        return name
    inner = _inner_iters(stmts, set())
    parts = []
    for e, ext in zip(idx, shape):
        used = _vars(e)
        if used & inner or r.random() < 0.1:
            ch = r.random()
            if 0.7 <= ch < 0.8:  # a stepped range (issue 25), without another draw
                parts.append(f"0:{print_expr(ext)}:{2 + int(ch * 100) % 2}")
            elif ch < 0.8:
                parts.append(f"0:{print_expr(ext)}")
            elif ch < 0.9:
                parts.append(f"0:{print_expr(ext)} + 1")
            else:
                parts.append(f"1:{print_expr(ext)}")
        else:
            parts.append(print_expr(e))
    return f"{name}[{', '.join(parts)}]"


def _output_tile(r, t: Targets, blk, win):
    """The edge family's clipped output window: ``y``'s rows of the block
    (``y[4 * bi:4 * bi + 4, 0:F]``, past ``m`` in the last block) around the thread
    loop that stores them (or a shifted window, or ``(blk, win)`` unchanged where no
    loop stores ``y``)."""
    stores = [a for a, s in t.loops if _is_threads(s) and any(
        isinstance(x, Assign) and x.name == "y" for x in _walk(s.body))]
    shape = _shape_of(t, "y")
    if not stores or shape is None:
        return blk, win
    lo = r.choice(["4 * bi", "4 * bi", "4 * bi", "4 * bi + 1", "4 * bi - 1"])
    cols = print_expr(shape[1]) if len(shape) > 1 else None
    w = f"y[{lo}:{lo} + 4, 0:{cols}]" if cols else f"y[{lo}:{lo} + 4]"
    return Arg("cursor", ("stmt", r.choice(stores), None)), w


def _vars(e) -> set:
    out = []
    _subexprs(e, out)
    return {x.name for x in out if isinstance(x, Var)}


# ------------------------------------------------------------------ one step per primitive


# Primitives only the family programs give something to work on (the tma and wgmma
# families' plain copy and product nests): drawn, often, where the proc has a candidate.
FAMILY_ONLY = {"make_tma": "tma", "make_wgmma": "wgmma", "set_swizzle": "tma",
               "pipeline_wgmma": "wgmma", "make_tma_store": "tma", "remove_guard": "edge",
               "set_registers": "whole warpgroups", "set_block_order": "tiles",
               "persist_blocks": "wgmma"}


def _block_threads(t) -> int:
    """The largest constant bound of the proc's thread loops (its block size, in 1-D)."""
    his = [s.hi.val for _, s in t.loops if _is_threads(s) and _const_bounds(s)]
    return max(his, default=0)


def _candidates(t, prim) -> bool:
    if prim == "set_registers":   # a block of two or more whole warpgroups
        n = _block_threads(t)
        return n >= 256 and n % 128 == 0
    if prim == "set_swizzle":   # the tiles of TMA copies and wgmmas (and their plain forms)
        from gpudsl.ir.tma_meaning import uses_tma
        from gpudsl.ir.wgmma_meaning import uses_wgmma
        return uses_tma(t.pdef) or uses_wgmma(t.pdef) or any(
            _candidates(t, x) for x in ("make_tma", "make_wgmma"))
    if prim == "pipeline_wgmma":   # a ring loop of wgmmas (the wgmma family's ring form)
        return any(_ring_loop(s) for _, s in t.loops)
    if prim == "persist_blocks":   # a pair of BLOCKS loops around a ring loop of wgmmas
        return any(_ring_loop(x) for _, s in _block_pairs(t) for x in s.body[0].body)
    if prim == "make_tma_store":   # one-thread copies into a parameter (the tma family's)
        return any(_store_loop(t, s) for _, s in t.loops)
    n = 1 if prim == "make_tma" else 128
    body = Reduce if prim == "make_wgmma" else Assign
    return any(_is_threads(s) and _const_bounds(s) and s.hi.val - s.lo.val == n and
               any(isinstance(x, body) for x in _walk(s.body)) for _, s in t.loops)


def _ring_loop(s) -> bool:
    """A seq loop holding a wgmma and an arrive (what ``pipeline_wgmma`` rewrites)."""
    from gpudsl.ir.nodes import Arrive, Wgmma
    return isinstance(s, For) and s.mapping is None and s.kind == "seq" and \
        any(isinstance(x, Wgmma) for x in _walk(s.body)) and \
        any(isinstance(x, Arrive) for x in s.body)


def _store_loop(t, s) -> bool:
    """A one-thread loop copying into a parameter (what ``make_tma_store`` rewrites)."""
    params = {q.name for q in t.pdef.params}
    return _is_threads(s) and _const_bounds(s) and s.hi.val - s.lo.val == 1 and \
        any(isinstance(x, Assign) and x.name in params and isinstance(x.rhs, Read) and
            x.rhs.name not in params for x in _walk(s.body))


def random_step(r: random.Random, p, instrs: dict, family: str = "") -> Step:
    t = Targets(p.ir)
    prims = PRIMITIVES
    # (no candidate: make_tma and make_wgmma keep their weight, set_swizzle, drawn last,
    # none: the default run draws what it drew before they existed)
    # (pipeline_wgmma, drawn last too, likewise: weight 0 without a ring loop of wgmmas;
    # remove_guard, last of all, only in the edge family's programs)
    late = ("set_swizzle", "pipeline_wgmma", "make_tma_store", "set_registers",
            "persist_blocks")
    edge = family.startswith("edge")
    # (set_block_order, last: weight 0 without a BLOCKS loop around a BLOCKS loop, so the
    # programs without one draw what they drew before it existed)
    tiles = 10 if family.startswith("tiles") else 1
    weights = [(tiles * WEIGHTS[x] if _block_pairs(t) else 0) if x == "set_block_order" else
               (WEIGHTS[x] if edge else 0) if x == "remove_guard" else
               WEIGHTS.get(x, 1) if x not in FAMILY_ONLY else
               (30 if x not in ("set_swizzle", "set_registers") else 5)
               if _candidates(t, x) else
               (WEIGHTS[x] if x not in late else 0) for x in prims]
    prim = r.choices(prims, weights)[0]
    return make_step(r, prim, t, instrs, edge)


def make_step(r, prim, t: Targets, instrs, edge: bool = False) -> Step:
    L = lambda pred=None: _loop(r, t, pred)  # noqa: E731
    if prim == "divide_loop":
        factor = r.choice([2, 2, 4, 3, 8, 16]) if r.random() < 0.8 else _bad_int(r)
        if r.random() < 0.85:
            names = [_fresh(r, t, "o"), _fresh(r, t, "ii")]
        else:
            names = r.choice([["o"], "oi", ["o", "o"], ["o", "ii", "iii"], ["x", "ii"]])
        tail = r.choice(["guard", "cut", "perfect", "guard", "cut", "perfect", "bogus"])
        return Step(prim, [L(), lit(factor), lit(names)], {"tail": lit(tail)})
    if prim == "remove_loop" and r.random() < 0.7:
        return Step(prim, [L(lambda s: not _uses(s.body, s.iter))])
    if prim in ("reorder_loops", "unroll_loop", "remove_loop"):
        if prim == "unroll_loop" and r.random() < 0.7:
            return Step(prim, [L(lambda s: _small(s))])
        return Step(prim, [L()])
    if prim == "fission":
        kw = {"n_lifts": lit(r.choice([1, 2, 0, -1, "1"]))} if r.random() < 0.3 else {}
        inner = [(a + ("body", i), s) for a, s in t.loops for i in range(1, len(s.body))]
        if inner and r.random() < 0.7:  # a gap strictly inside a loop body
            g, _ = r.choice(inner)
            return Step(prim, [Arg("cursor", ("gap", g, None))], kw)
        return Step(prim, [_gap(r, t)], kw)
    if prim == "fuse":
        pairs = []
        for (a, s) in t.loops:
            nxt = a[:-1] + (a[-1] + 1,)
            for (b, s2) in t.loops:
                if b == nxt:
                    pairs.append((a, b))
        if pairs and r.random() < 0.85:
            a, b = r.choice(pairs)
            return Step(prim, [Arg("cursor", ("stmt", a, None)),
                               Arg("cursor", ("stmt", b, None))])
        return Step(prim, [L(), L()])
    if prim == "cut_loop":
        loop = L()
        at = r.choice([1, 2, "n // 2", "n - 1", "n - 2", 0, "2", "n", "n + 1",
                       "max(0, 4, n + 5)", "min(n)", "n * 0.5", "True", -1, 2.5, "n // 2 + 1",
                       "min(n, 3)", "max(2, n - 2)"])
        return Step(prim, [loop, lit(at)])
    if prim == "simplify":
        return Step(prim)
    if prim == "rename":
        return Step(prim, [lit(r.choice(["q2", "renamed", "for", "1abc", "", 5, "p"]))])
    if prim == "specialize":
        conds = r.choice([["n > 4"], ["n % 2 == 0", "n < 8"], "n == 4", ["n > 0.5"],
                          ["x[0] > 0.0"], ["i > 0"], [], ["n >= 6"], ["n % 4 == 0"],
                          ["n"], ["t < 2"], ["b == 0"]])
        return Step(prim, [_block(r, t), lit(conds)])
    if prim == "parallelize_loop":
        m = r.choice([BLOCKS, BLOCKS, THREADS, THREADS, None, "BLOCKS"])
        if m is BLOCKS and r.random() < 0.7:
            # the outermost loop of a kernel candidate
            top = [k for k, (a, s) in enumerate(t.loops) if len(a) == 1]
            if top:
                k = r.choice(top)
                return Step(prim, [Arg("cursor", ("stmt", t.loops[k][0], None)), lit(m)])
        return Step(prim, [L(lambda s: s.kind == "seq" or r.random() < 0.2), lit(m)])
    if prim == "stage_mem":
        blk = _block(r, t)
        try:
            c = blk.get(_Dummy(t.pdef)) if blk.kind == "cursor" else None
            stmts = c.stmts() if c is not None else ()
        except Exception:  # noqa: BLE001
            stmts = ()
        win = _window(r, t, stmts)
        mem = r.choice([SHARED, SHARED, REGISTER, GLOBAL])
        kw = {"zeros": lit(True)} if edge and mem is SHARED else {}   # no draw: same stream
        if edge and r.random() < 0.35:   # a block's output tile, past the edge (issue 36)
            blk, win = _output_tile(r, t, blk, win)
        return Step(prim, [blk, lit(win), lit(_fresh(r, t, "st")), lit(mem)], kw)
    if prim == "remove_guard":
        ifs = [a for a, s in t.stmts if isinstance(s, If)]
        if ifs and r.random() < 0.9:
            return Step(prim, [Arg("cursor", ("stmt", r.choice(ifs), None))])
        return Step(prim, [lit(r.choice(["if _: _", "y[_] = _", "zz"]))])
    if prim == "set_memory":
        return Step(prim, [_alloc(r, t), lit(r.choice([SHARED, REGISTER, GLOBAL, "SHARED"]))])
    if prim == "lift_alloc":
        kw = {"n_lifts": lit(r.choice([1, 2, 0, -1, 5, "1"]))} if r.random() < 0.4 else {}
        return Step(prim, [_alloc(r, t)], kw)
    if prim == "sink_alloc":
        return Step(prim, [_alloc(r, t)])
    if prim == "expand_dim":
        iters = [s.iter for _, s in t.loops] + ["n", "0"]
        size = r.choice(["n", 4, "4", 2, 16, "n + 1", 2.5, "n * 0.5", "True", 0])
        return Step(prim, [_alloc(r, t), lit(size), lit(r.choice(iters + ["n - 1", "1.5"]))])
    if prim == "pad_dim":
        a = _alloc(r, t)
        dim = r.choice([0, 0, 1, -1, 5, "0"])
        size = r.choice(["n + 1", 5, 17, 9, "n", 3, 2.5, "n * 0.5", "True", "m + 1"])
        if a.kind == "cursor" and r.random() < 0.6:
            al = _block_at(t.pdef, a.value[1][:-1])[a.value[1][-1]]
            if al.shape and isinstance(dim, int) and 0 <= dim < len(al.shape):
                size = f"{print_expr(al.shape[dim])} + {r.choice([1, 1, 2, -1])}"
        return Step(prim, [a, lit(dim), lit(size)])
    if prim == "merge_loops":
        nested = [(a, s) for (a, s) in t.loops if len(s.body) == 1 and isinstance(s.body[0], For)]
        loop = (Arg("cursor", ("stmt", r.choice(nested)[0], None))
                if nested and r.random() < 0.8 else L())
        return Step(prim, [loop, lit(r.choice([_fresh(r, t, "mm"), _fresh(r, t, "mm"), "n",
                                               "for", 3]))])
    if prim == "reorder_stmts":
        pairs = [(baddr, n) for baddr, n in t.blocks() if n >= 2]
        if pairs and r.random() < 0.9:
            baddr, n = r.choice(pairs)
            i = r.randrange(n - 1)
            return Step(prim, [Arg("cursor", ("block", baddr + (i,), i + 2))])
        return Step(prim, [_block(r, t)])
    if prim == "make_async":  # a run of thread loops at block level (docs/async_copies.md)
        runs = [(baddr, i, n) for baddr, n in t.blocks() for i in range(n)
                if _is_threads(_block_at(t.pdef, baddr)[i])]
        staged = [x for x in runs if _stages(t, _block_at(t.pdef, x[0])[x[1]])]
        if staged and r.random() < 0.8:
            runs = staged
        if runs and r.random() < 0.9:
            baddr, i, n = r.choice(runs)
            j = i + 1
            while j < n and _is_threads(_block_at(t.pdef, baddr)[j]) and r.random() < 0.6:
                j += 1
            return Step(prim, [Arg("cursor", ("block", baddr + (i,), j))])
        return Step(prim, [_block(r, t)])
    if prim == "pipeline_loop":
        from gpudsl.schedule.async_copy_primitives import _copy_part
        ready = [(a, s) for a, s in t.loops if s.kind == "seq" and _copy_part(s.body)]
        if ready and r.random() < 0.8:
            loop = Arg("cursor", ("stmt", r.choice(ready)[0], None))
        elif r.random() < 0.9:
            loop = L(lambda s: s.kind == "seq" and s.mapping is None)
        else:
            loop = L()
        return Step(prim, [loop], {"stages": lit(r.choice([2, 2, 3, 4, 1, 9, "2"]))})
    if prim == "warp_specialize":
        from gpudsl.schedule.producers import _parts
        ready = [(a, s) for a, s in t.loops if s.kind == "seq" and s.mapping is None
                 and not isinstance(_parts(s.body), str)]
        fit = None
        if ready and r.random() < 0.85:
            addr, s = r.choice(ready)
            loop = Arg("cursor", ("stmt", addr, None))
            _, ps, cs = _parts(s.body)
            w = [-(-max(x.hi.val - x.lo.val for x in part) // 32) * 32 for part in (ps, cs)]
            if r.random() < 0.5:
                fit = ((0, w[0]), (w[0], w[0] + w[1]))
            elif r.random() < 0.6:
                fit = ((w[1], w[1] + w[0]), (0, w[1]))
        else:
            loop = L(lambda s: s.kind == "seq" and s.mapping is None)
        prod, cons = fit or r.choice([((0, 64), (64, 128)), ((64, 128), (0, 64)),
                                      ((0, 32), (32, 64)), ((32, 64), (0, 32)),
                                      ((0, 64), (64, 96)), ((0, 64), (32, 96)),
                                      ((0, 16), (32, 64)), ((0, 64), "x")])
        kw = {"producers": lit(prod), "consumers": lit(cons),
              "stages": lit(r.choice([1, 2, 2, 3, 4, 0, 9]))}
        if r.random() < 0.5:  # barrier rings instead of unrolled barrier pairs
            kw["ring"] = lit(True)
            if fit is not None and prod[0] >= cons[1]:   # (no draw: the stream is kept)
                # a producer warpgroup whose first thread waits, copies and arrives
                kw["producers"] = lit((prod[0], prod[0] + 128))
                kw["issuers"] = lit(prod)
        return Step(prim, [loop], kw)
    if prim == "set_registers":
        n = _block_threads(t)
        lo, hi = r.choice([(0, 128), (128, 256), (0, 256), (n - 128, n), (0, n), (0, 100)])
        regs = r.choice([40, 232, 24, 256, 168, 100, 0, "40"])
        return Step(prim, [L(lambda s: s.mapping == BLOCKS), lit(regs), lit(lo), lit(hi)])
    if prim == "rotate_loop":
        loop = L(lambda s: len(s.body) >= 2) if r.random() < 0.85 else L()
        return Step(prim, [loop, lit(r.choice([1, 1, 2, 1, 3, 0, -1, "1", 9]))])
    if prim == "rearrange_dim":
        a = _alloc(r, t)
        perm = r.choice([[1, 0], [0, 1], [0], [], [2, 1, 0], [1, 2, 0], [0, 0], "10",
                         [True, False], [1, 0, 2]])
        if a.kind == "cursor" and r.random() < 0.6:
            al = _block_at(t.pdef, a.value[1][:-1])[a.value[1][-1]]
            perm = list(range(len(al.shape)))
            r.shuffle(perm)
        return Step(prim, [a, lit(perm)])
    if prim == "set_swizzle":
        return Step(prim, [_alloc(r, t), lit(r.choice([128, 128, 64, 32, 0, 96, "128"]))])
    if prim == "divide_dim":
        a = _alloc(r, t)
        dim, q = r.choice([0, 0, 1, 1, 2, 5]), r.choice([2, 2, 4, 8, 3, 0, "2"])
        if a.kind == "cursor" and r.random() < 0.6:
            al = _block_at(t.pdef, a.value[1][:-1])[a.value[1][-1]]
            if al.shape:
                dim = r.randrange(len(al.shape))
        return Step(prim, [a, lit(dim), lit(q)])
    if prim == "pipeline_wgmma":
        return Step(prim, [L(_ring_loop) if r.random() < 0.85 else L()])
    if prim == "make_tma_store":
        return Step(prim, [L(lambda s: _store_loop(t, s)) if r.random() < 0.85 else L()])
    if prim in ("make_tma", "make_wgmma"):
        # make_tma: one-thread loops; make_wgmma: thread loops over whole warpgroups
        n, body = (1, Assign) if prim == "make_tma" else (128, Reduce)
        want = (lambda s: _is_threads(s) and s.hi.val - s.lo.val == n and
                any(isinstance(x, body) for x in _walk(s.body)))
        return Step(prim, [L(lambda s: _const_bounds(s) and want(s))
                           if r.random() < 0.85 else L()])
    if prim == "bind_expr":
        ex = [e for e in _exprs(t) if not isinstance(e, Var)]
        if ex and r.random() < 0.9:
            pat = print_expr(r.choice(ex))
        else:
            pat = r.choice(["a * 2.0", "zz", "_ + _", "x[_]"])
        return Step(prim, [lit(pat), lit(_fresh(r, t, "bnd"))])
    if prim == "insert_sync":
        # ranged barriers too (docs/language.md (synchronization))
        kw = {"threads": lit(r.choice([(0, 64), (0, 32), (32, 64), (0, 8)]))} \
            if r.random() < 0.3 else {}
        if t.syncs and r.random() < 0.6:  # a gap at block level, beside a barrier
            a = r.choice(t.syncs)[0]
            n = len(_block_at(t.pdef, a[:-1]))
            return Step(prim, [Arg("cursor", ("gap", a[:-1] + (r.randint(0, n),), None))], kw)
        return Step(prim, [_gap(r, t)], kw)
    if prim == "delete_sync":
        if t.syncs and r.random() < 0.9:
            k = r.randrange(len(t.syncs))
            if r.random() < 0.5:
                pat = "sync()" if not t.syncs[k][1].ranged else "sync(_, _)"
                same = [x for x in t.syncs[:k] if x[1].ranged == t.syncs[k][1].ranged]
                return Step(prim, [lit(pat + (f" #{len(same)}" if same else ""))])
            return Step(prim, [Arg("cursor", ("stmt", t.syncs[k][0], None))])
        return Step(prim, [_block(r, t)])
    if prim == "vectorize":
        return Step(prim, [L(lambda s: _small(s) and (r.random() < 0.1 or (
            len(s.body) == 1 and isinstance(s.body[0], Assign) and
            isinstance(s.body[0].rhs, Read)))), lit(r.choice([2, 4, 4, 3, "4"]))])
    if prim == "inline":
        if t.calls and r.random() < 0.9:
            a, s = r.choice(t.calls)
            if r.random() < 0.5:
                return Step(prim, [lit(f"{s.proc.name}(_)")])
            return Step(prim, [Arg("cursor", ("stmt", a, None))])
        return Step(prim, [_block(r, t)])
    if prim == "replace":
        name = r.choice(sorted(instrs))
        ext = {"acc1": 1, "axpy2": 2}.get(name)
        shape = {"acc1": Reduce, "axpy2": Assign}.get(name)
        tgt = L(lambda s: _small(s) and (ext is None or s.hi.val - s.lo.val == ext) and (
            shape is None or len(s.body) == 1 and isinstance(s.body[0], shape))) \
            if r.random() < 0.8 else _block(r, t)
        return Step(prim, [tgt, Arg("lit", instrs[name], name)])
    if prim == "add_assert":  # narrows the domain (the oracle compares inside it)
        sizes = [q.name for q in t.pdef.params if q.kind in ("size", "index")] or ["n"]
        v = r.choice(sizes)
        conds = [f"{v} % 2 == 0", f"{v} >= 4", f"{v} <= 8", f"{v} % 3 == 0", f"{v} >= 1",
                 f"{v} > 1000", f"{v} % 4 == 1 and {v} % 2 == 0", f"{v} + 1",
                 "x[0] > 0.0", "i > 0", 2.5, f"{v} != 5"]
        return Step(prim, [lit(r.choice(conds))])
    if prim == "set_unroll":
        return Step(prim, [L(), lit(r.choice([True, False]))])
    if prim == "set_blocks_per_sm":
        return Step(prim, [L(lambda s: s.mapping is not None or r.random() < 0.2),
                           lit(r.choice([0, 1, 2, -1, 2.5]))])
    if prim == "set_block_order":
        group = {"group": lit(r.choice([1, 2, 3, 8, 0, -1, 2.5]))} if r.random() < 0.8 else {}
        pairs = _block_pairs(t)
        if pairs and r.random() < 0.8:   # a BLOCKS pair; else any two loops (mostly refused)
            a, _s = r.choice(pairs)
            return Step(prim, [Arg("cursor", ("stmt", a, None)),
                               Arg("cursor", ("stmt", a + ("body", 0), None))], group)
        return Step(prim, [L(), L()], group)
    if prim == "persist_blocks":
        pairs = [(a, s) for a, s in _block_pairs(t)
                 if any(_ring_loop(x) for x in s.body[0].body)] or _block_pairs(t)
        blocks = lit(r.choice([1, 2, 3, 0, -1]))
        if pairs and r.random() < 0.9:   # the pair's ring loop; else any loop (refused)
            a, s = r.choice(pairs)
            ring = next((x.iter for x in s.body[0].body if _ring_loop(x)), "po")
            return Step(prim, [Arg("cursor", ("stmt", a, None)), blocks],
                        {"steps": lit(ring if r.random() < 0.9 else "po")})
        return Step(prim, [L(), blocks])
    raise AssertionError(prim)


def _block_pairs(t) -> list:
    """``(addr, loop)`` of the BLOCKS loops whose only statement is a BLOCKS loop."""
    return [(a, s) for a, s in t.loops if s.mapping == BLOCKS and len(s.body) == 1 and
            isinstance(s.body[0], For) and s.body[0].mapping == BLOCKS]


def _const_bounds(s) -> bool:
    return hasattr(s.lo, "val") and hasattr(s.hi, "val")


def _uses(stmts, name) -> bool:
    import re

    from gpudsl.ir.printer import print_stmt

    text = "\n".join(ln for s in stmts for ln in print_stmt(s))
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def _block_at(pdef, baddr):
    from gpudsl.schedule.cursors import block_of

    return block_of(pdef, baddr)


def _small(s: For) -> bool:
    from gpudsl.ir.nodes import Const

    return isinstance(s.lo, Const) and isinstance(s.hi, Const) and s.hi.val - s.lo.val <= 16


class _Dummy:
    """Enough of a Proc for a cursor to read its node."""

    def __init__(self, ir):
        self.ir = ir


__all__ = ["PRIMITIVES", "Step", "Arg", "random_step", "make_step", "Targets"]
