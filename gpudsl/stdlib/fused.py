"""The kernel of a fusion group (``gpudsl.graph.fusion``), derived, never written by
hand: a composition of the standard library's readable algorithms
(``matmul.matmul_algorithm`` / ``vecmat_algorithm`` and ``pointwise.binary`` /
``unary``), one call per node, every pointwise node computing in place on the group's
output (the chain's value lives in the output, so no intermediate tensor exists); then
scheduling primitives only:

1. ``inline`` every call (the one inliner: windows alias the caller's arrays);
2. ``fuse`` the loop nests level by level into one nest (``fuse`` proves that no
   iteration of the later body touches what a later iteration of the earlier one does);
3. pointwise: the output element staged in a register (``stage_mem``) and the
   stdlib's streaming schedule (``schedule_stream``: float4 where the innermost
   extent allows); matmul: the stdlib's schedule of the variant ``matmul_kernel``
   picks for these shapes (big tile / cut / one-kernel tiles / guarded / vector-matrix),
   whose ``stage_mem`` of ``c`` carries the epilogue into the accumulator registers.

A chain's steps are objects with ``op`` (``add``/``mul``/``relu``/``silu``) and
``args`` (``None``: the chain's value, else the index of an external operand), as
``gpudsl.graph.fusion.ChainOp`` makes them.  The graph proves and runs these procs
(``gpudsl.graph.kernels``).
"""
from __future__ import annotations

import hashlib
from functools import lru_cache

from ..ir.nodes import Call, For
from ..ir.types import REGISTER
from ..schedule import (expand_dim, fission, fuse, inline, lift_alloc, rename, simplify,
                        stage_mem, vectorize)
from ..schedule.cursors import Cursor
from . import matmul as mm
from .pointwise import binary, unary
from .stream_schedule import pick_vec, schedule_stream

# ------------------------------------------------------------------ composing


def _proc(name: str, text: str, callees):
    import gpudsl

    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    ns.update({c.name: c for c in callees})
    return gpudsl.proc_from_source(text, ns, file=f"<gpudsl.graph.{name}>")


def _step_lines(steps, dims: list[str], names: list[str], flags: list[tuple],
                chain: str, out: str):
    """Source lines (and callees) computing ``steps`` in place on ``out`` over ``dims``;
    ``names[j]`` / ``flags[j]``: external operand j's parameter and full axes."""
    rank = len(dims)
    lines, callees = [], []
    for st in steps:
        args = [chain if a is None else names[a] for a in st.args]
        if len(args) == 2:
            bflags = (True,) * rank if st.args[1] is None else flags[st.args[1]]
            callee = binary(st.op, tuple(bflags))
            lines.append(f"    {callee.name}({', '.join(dims)}, {args[0]}, {args[1]}, {out})")
        else:
            callee = unary(st.op)
            if rank == 1:
                lines.append(f"    {callee.name}({dims[0]}, {args[0]}, {out})")
            else:
                rows = [f"r{k}" for k in range(rank - 1)]
                for k, r in enumerate(rows):
                    lines.append("    " * (k + 1) + f"for {r} in seq(0, {dims[k]}):")
                win = ", ".join(rows) + f", 0:{dims[-1]}"
                lines.append("    " * rank + f"{callee.name}({dims[-1]}, {args[0]}[{win}], "
                             f"{out}[{win}])")
        callees.append(callee)
    return lines, callees


def _calls(block, base=()):
    for i, s in enumerate(block):
        a = base + (i,)
        if isinstance(s, Call):
            yield a
        for field in ("body", "orelse"):
            sub = getattr(s, field, None)
            if isinstance(sub, tuple):
                yield from _calls(sub, a + (field,))


def _at(p, addr):
    s = p.ir.body[addr[0]]
    for k in range(1, len(addr), 2):
        s = getattr(s, addr[k])[addr[k + 1]]
    return s


def _fuse_next(p, addr, depth):
    """Fuse the loop at ``addr`` with the loop after it, then their inner loops, down
    ``depth`` levels."""
    nxt = addr[:-1] + (addr[-1] + 1,)
    n0 = len(_at(p, addr).body)
    p = fuse(p, Cursor(p, "stmt", addr), Cursor(p, "stmt", nxt))
    if depth > 1:
        p = _fuse_next(p, addr + ("body", n0 - 1), depth - 1)
    return p


def inline_and_fuse(p, depth: int):
    """Every call inlined, then the top-level loop nests fused ``depth`` levels deep."""
    while True:
        calls = list(_calls(p.ir.body))
        if not calls:
            break
        p = inline(p, Cursor(p, "stmt", calls[0]))
    while len(p.ir.body) > 1:
        p = _fuse_next(p, (0,), depth)
    return p


def _nest_names(p, depth) -> list[str]:
    """The loop variables of the (single) nest of ``p``, outermost first."""
    names, s = [], p.ir.body[0]
    for _ in range(depth):
        assert isinstance(s, For) and (len(names) == depth - 1 or len(s.body) == 1)
        names.append(s.iter)
        s = s.body[0]
    return names


# ------------------------------------------------------------------ pointwise chains


def merge_axes(shape: tuple, ext_shapes: list[tuple]):
    """Drop size-1 axes and merge adjacent axes on which every operand is full or every
    operand broadcasts the same way: ``(dims, [full axes of each operand])``."""
    cols, dims = [], []
    for k, d in enumerate(shape):
        if d == 1:
            continue
        col = tuple(s[k] == d for s in ext_shapes)
        if cols and cols[-1] == col:
            dims[-1] *= d
        else:
            cols.append(col)
            dims.append(d)
    if not dims:
        return (1,), [(True,) for _ in ext_shapes]
    return tuple(dims), [tuple(c[j] for c in cols) for j in range(len(ext_shapes))]


@lru_cache(maxsize=None)
def pointwise_proc(steps: tuple, flags: tuple[tuple, ...], vec: int):
    """The fused kernel of a pointwise chain over ``len(flags[0])`` merged axes."""
    rank = len(flags[0]) if flags else 1
    dims = [f"d{k}" for k in range(rank)]
    names = [f"x{j}" for j in range(len(flags))]
    name = "fused_" + "_".join(s.op for s in steps)
    if len(steps) > 8:   # a kernel name, not the whole chain
        name = "fused_" + "_".join(s.op for s in steps[:4]) + f"_and_{len(steps) - 4}_more"
    params = [f"{d}: size" for d in dims]
    for nm, fl in zip(names, flags):
        params.append(f"{nm}: f32[{', '.join(d if f else '1' for d, f in zip(dims, fl))}]")
    params.append(f"out: f32[{', '.join(dims)}]")
    p = _chain(name, steps, tuple(params), dims, names, flags, rank,
               f"    assert {dims[-1]} % {vec} == 0\n" if vec > 1 else "")
    loops = _nest_names(p, rank)
    operands = []  # the inputs read contiguously, float4 into registers
    if vec > 1:
        for nm, fl in zip(names, flags):
            if fl[-1]:
                operands.append((nm, "".join(f"{loops[k]}, " if fl[k] else "0, "
                                             for k in range(rank - 1))))
    p = schedule_stream(p, rows=loops[:-1], inner=loops[-1], operands=operands, vec=vec)
    # the chain's value in a register, one write of the output per element (vec > 1:
    # vec registers, written out with one float4 store and never read from memory)
    inner = p.find_loop("v" if vec > 1 else "t")
    body = inner.body() if vec > 1 else p.find("out[_] = _").parent().body()
    p = stage_mem(p, body, _out_point(p), "o", REGISTER)
    if vec > 1:
        p = expand_dim(p, "o", vec, "v")
        p = lift_alloc(p, "o")
        p = fission(p, p.find("out[_] = o[_]").before())
        p = vectorize(p, p.find("out[_] = o[_]").parent(), vec)
    return simplify(p)


CHAIN_LEAF = 8   # steps composed directly; longer chains are halved (see _chain)


def _chain(name, steps, params, dims, names, flags, rank, pre=""):
    """The chain ``steps`` in place on ``out``, inlined and fused into one nest.  Up
    to ``CHAIN_LEAF`` steps: one call per step, inlined and fused.  Longer: each half
    fused on its own (a proc with the same parameters), then one call of each, inlined
    and fused: every primitive works on a proc of the size of its part, so a chain of
    N steps costs about N log N, not N**2 (one call per step on the whole chain)."""
    if len(steps) <= CHAIN_LEAF:
        body, callees = _step_lines(steps, dims, names, list(flags), "out", "out")
    else:
        h = len(steps) // 2
        callees = [_part(steps[:h], params, tuple(dims), tuple(names), flags, rank),
                   _part(steps[h:], params, tuple(dims), tuple(names), flags, rank)]
        args = ", ".join(list(dims) + list(names) + ["out"])
        body = [f"    {c.name}({args})" for c in callees]
    text = f"def {name}({', '.join(params)}):\n" + pre + "\n".join(body) + "\n"
    return inline_and_fuse(_proc(name, text, callees), rank)


@lru_cache(maxsize=4096)
def _part(steps, params, dims, names, flags, rank):
    """A half of a chain as a proc of its own, named by its content: equal parts (a
    chain that repeats itself) are derived once."""
    tag = hashlib.sha256(repr((steps, params, flags)).encode()).hexdigest()[:12]
    return _chain(f"part_{tag}", steps, params, list(dims), list(names), flags, rank)


def _out_point(p) -> str:
    """The output element the (only) statement writing ``out`` writes, as text."""
    st = p.find("out[_] = _").node()
    return "out[" + ", ".join(_print(e) for e in st.idx) + "]"


# ------------------------------------------------------------------ matmul epilogues


def matmul_variant(a_shape, b_shape, opts: dict):
    """The variant ``gpudsl.stdlib.matmul.matmul_kernel`` runs for these shapes and
    options: ``("vecmat" | "big" | "cut" | "tiles" | "guarded", vec)`` (the one choice,
    ``gpudsl.stdlib.matmul.matmul_variant``)."""
    o = dict(mm.DEFAULTS, **opts)
    if len(a_shape) == 1:
        return "vecmat", 1
    return mm.matmul_variant(a_shape[-2], a_shape[-1], b_shape[-1], o)


@lru_cache(maxsize=None)
def matmul_proc(variant: str, vec: int, batched: bool, opts: tuple,
                steps: tuple, flags: tuple[tuple, ...]):
    """``c = a @ b`` followed by the pointwise ``steps`` on ``c`` (its epilogue),
    scheduled as the stdlib schedules ``variant``.  Externals 0 and 1 are ``a`` and
    ``b``; ``flags[j]`` the full axes of external ``j`` against ``c``."""
    o = dict(mm.DEFAULTS, **dict(opts))
    tiles = {k: o[k] for k in ("bm", "bn", "bk", "tm", "tn")}
    if variant == "vecmat":
        alg = mm.vecmat_algorithm()
        sizes, dims = ["n", "k"], ["k"]
        shapes = {"a": "n", "b": "n, k"}
    else:
        divisible = {"big": (o["bm"], o["bn"], o["bk"]),
                     "cut": (1, vec, vec) if vec > 1 else None}.get(variant)
        alg = mm.matmul_algorithm(batched, divisible)
        z = ["nb"] if batched else []
        sizes, dims = z + ["m", "n", "k"], z + ["m", "k"]
        zs = "nb, " if batched else ""
        shapes = {"a": zs + "m, n", "b": zs + "n, k"}
    names = ["a", "b"] + [f"e{j}" for j in range(2, len(flags))]
    params = [f"{s}: size" for s in sizes] + [f"{nm}: f32[{shapes[nm]}]" for nm in ("a", "b")]
    for nm, fl in list(zip(names, flags))[2:]:
        params.append(f"{nm}: f32[{', '.join(d if f else '1' for d, f in zip(dims, fl))}]")
    params.append(f"c: f32[{', '.join(dims)}]")
    tag = "_".join(s.op for s in steps)
    body, callees = _step_lines(steps, dims, names, list(flags), "c", "c")
    pre = f"    assert {' and '.join(map(_print, alg.ir.preds))}\n" if alg.ir.preds else ""
    text = (f"def {alg.name}_{tag}({', '.join(params)}):\n" + pre
            + f"    {alg.name}({', '.join(sizes)}, a, b, c)\n" + "\n".join(body) + "\n")
    p = inline_and_fuse(_proc(alg.name, text, [alg] + callees), len(dims))
    if variant == "big":
        p = mm.schedule_matmul(p, **tiles, vec=o["vec"],
                               stages=o.get("stages") or (1 if batched else 2))
    elif variant == "cut":
        p = mm.schedule_matmul_cut(p, **tiles, vec=vec)
        p = rename(p, f"{'b' if batched else ''}matmul_cut"
                      f"{'_v%d' % vec if vec > 1 else ''}_{tag}")
    elif variant == "tiles":
        p = mm.schedule_matmul_guarded_tiles(p, **tiles, vec=vec)
        p = rename(p, f"{'b' if batched else ''}matmul_tiles_{tag}")
    elif variant == "guarded":
        p = mm.schedule_matmul_guarded(p)
    else:
        p = mm.schedule_vecmat(p)
    return p


def _print(e) -> str:
    from ..ir.printer import print_expr

    return print_expr(e)


def matmul_group_proc(a_shape, b_shape, opts: dict, steps: tuple, flags: tuple):
    """The fused kernel of ``a @ b`` followed by ``steps`` (the kernel the stdlib would
    run for these shapes and options, its epilogue in registers)."""
    variant, vec = matmul_variant(a_shape, b_shape, opts)
    return matmul_proc(variant, vec, len(a_shape) == 3, tuple(sorted(opts.items())),
                       steps, flags)


def pointwise_group_proc(out_shape, ext_shapes: list, steps: tuple):
    """The fused kernel of a pointwise chain with result ``out_shape`` and external
    operands of ``ext_shapes``: ``(proc, merged dims, full axes of each operand)``."""
    dims, flags = merge_axes(out_shape, ext_shapes)
    return pointwise_proc(steps, tuple(flags), pick_vec(dims[-1])), dims, flags


__all__ = ["pointwise_proc", "matmul_proc", "matmul_variant", "merge_axes",
           "inline_and_fuse", "matmul_group_proc", "pointwise_group_proc", "CHAIN_LEAF"]
