"""Printing procs as gpudsl source.

``print_proc(p)`` gives Python text that, executed where the callees are in
scope (``from gpudsl import *`` plus the called procs), defines a proc equal
to ``p``.  Parentheses follow Python precedence, so only needed ones appear.
"""
from __future__ import annotations

import math

from .nodes import (Alloc, Arrive, AsyncCommit, AsyncCopy, AsyncWait, Assign, Atomic, BinOp,
                    Builtin, Call, Collective, Const, Expr, For, If, Param, Pass, Point,
                    ProcDef, Read, Reduce, SetMaxNReg, Stmt, Sync, SyncCluster, TmaCommit, TmaLoad, TmaStore, TmaWait, UnOp, Wait, Var, Wgmma,
                    WgmmaCommit, WgmmaWait, WindowArg)
from .types import INDEX, param_memory

# Python precedence, higher binds tighter.
_PREC = {
    "or": 1, "and": 2, "not": 3,
    "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10,
    "neg": 11,
}
_ATOM = 12


def _const(c: Const) -> str:
    v = c.val
    if c.ty.kind == "bool":
        return "True" if v else "False"
    if c.ty.is_float:
        v = float(v)
        if math.isinf(v) or math.isnan(v):   # gpudsl.inf and gpudsl.nan
            return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
        return repr(v)
    return str(int(v))


def expr_prec(e: Expr) -> int:
    if isinstance(e, BinOp):
        return _PREC[e.op]
    if isinstance(e, UnOp):
        return _PREC["not"] if e.op == "not" else _PREC["neg"]
    if isinstance(e, Const) and not isinstance(e.val, bool) and e.val < 0:
        return _PREC["neg"]
    return _ATOM


def print_expr(e: Expr, prec: int = 0) -> str:
    """``e`` as Python source; parenthesised if its precedence is below ``prec``."""
    if isinstance(e, Const):
        s = _const(e)
    elif isinstance(e, Var):
        s = e.name
    elif isinstance(e, Read):
        s = e.name if not e.idx else f"{e.name}[{', '.join(print_expr(i) for i in e.idx)}]"
    elif isinstance(e, WindowArg):
        s = print_window(e)
    elif isinstance(e, BinOp):
        p = _PREC[e.op]
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            # Comparisons chain in Python: parenthesise comparison operands.
            s = f"{print_expr(e.lhs, p + 1)} {e.op} {print_expr(e.rhs, p + 1)}"
        else:
            s = f"{print_expr(e.lhs, p)} {e.op} {print_expr(e.rhs, p + 1)}"
    elif isinstance(e, UnOp):
        if e.op == "not":
            s = f"not {print_expr(e.arg, _PREC['not'])}"
        else:
            s = f"-{print_expr(e.arg, _PREC['neg'])}"
    elif isinstance(e, (Builtin, Collective)):
        s = f"{e.name}({', '.join(print_expr(a) for a in e.args)})"
    else:
        raise TypeError(f"not an expression: {e!r}")
    if expr_prec(e) < prec:
        return f"({s})"
    return s


def print_window(w: WindowArg) -> str:
    if not w.idx:
        return w.name
    parts = []
    for i in w.idx:
        if isinstance(i, Point):
            parts.append(print_expr(i.pt))
        else:
            parts.append(f"{print_expr(i.lo)}:{print_expr(i.hi)}")
    return f"{w.name}[{', '.join(parts)}]"


def print_copy_window(name: str, idx, n: int) -> str:
    """One side of an async copy: ``x[i, j:j + 4]`` (``x[i, j]`` for one element)."""
    if not idx:
        return name
    parts = [print_expr(i) for i in idx]
    if n > 1:
        parts[-1] = f"{parts[-1]}:{print_expr(BinOp('+', idx[-1], Const(n), INDEX))}"
    return f"{name}[{', '.join(parts)}]"


def _shape(shape) -> str:
    return ", ".join(print_expr(s) for s in shape)


def print_param(p: Param) -> str:
    if p.is_control:
        return f"{p.name}: {p.kind}"
    if p.kind == "scalar":
        return f"{p.name}: {p.ty.name}"
    if p.kind == "window":
        return f"{p.name}: [{p.ty.name}][{_shape(p.shape)}] @ {p.mem.name}"
    mem = "" if param_memory(p.mem) == param_memory(None) else f" @ {p.mem.name}"
    return f"{p.name}: {p.ty.name}[{_shape(p.shape)}]{mem}"


def _lhs(name: str, idx) -> str:
    return name if not idx else f"{name}[{', '.join(print_expr(i) for i in idx)}]"


def print_stmt(s: Stmt, indent: int = 0) -> list[str]:
    pad = "    " * indent
    if isinstance(s, Assign):
        return [f"{pad}{_lhs(s.name, s.idx)} = {print_expr(s.rhs)}"]
    if isinstance(s, Reduce):
        if getattr(s, "wgmma", None) is not None:  # a step of a wgmma: the wgmma itself
            return print_stmt(s.wgmma, indent)
        return [f"{pad}{_lhs(s.name, s.idx)} {s.op}= {print_expr(s.rhs)}"]
    if isinstance(s, Atomic):
        cmp = f"{print_expr(s.cmp)}, " if s.cmp is not None else ""
        old = f"{s.result} = " if s.result is not None else ""
        return [f"{pad}{old}atomic_{s.op}({_lhs(s.name, s.idx)}, {cmp}{print_expr(s.rhs)})"]
    if isinstance(s, Alloc):
        t = s.ty.name if not s.shape else f"{s.ty.name}[{_shape(s.shape)}]"
        layout = f"(swizzle={s.swizzle})" if s.swizzle else ""
        return [f"{pad}{s.name}: {t} @ {s.mem.name}{layout}"]
    if isinstance(s, For):
        hints = ", unroll=True" if s.unroll else ""
        if s.blocks_per_sm:
            hints += f", blocks_per_sm={s.blocks_per_sm}"
        if s.group:
            hints += f", group={s.group}"
        rng = f"{s.kind}({print_expr(s.lo)}, {print_expr(s.hi)}{hints})"
        if s.mapping is not None:
            rng += " @ CLUSTERS" if s.cluster else f" @ {s.mapping.name}"
        return [f"{pad}for {s.iter} in {rng}:"] + print_block(s.body, indent + 1)
    if isinstance(s, If):
        out = [f"{pad}if {print_expr(s.cond)}:"] + print_block(s.body, indent + 1)
        while len(s.orelse) == 1 and isinstance(s.orelse[0], If):
            s = s.orelse[0]
            out += [f"{pad}elif {print_expr(s.cond)}:"] + print_block(s.body, indent + 1)
        if s.orelse:
            out += [f"{pad}else:"] + print_block(s.orelse, indent + 1)
        return out
    if isinstance(s, SyncCluster):
        return [f"{pad}sync_cluster()"]
    if isinstance(s, Sync):
        if s.ranged:
            return [f"{pad}sync({print_expr(s.lo)}, {print_expr(s.hi)})"]
        return [f"{pad}sync()"]
    if isinstance(s, (Arrive, Wait)):
        fn = "arrive" if isinstance(s, Arrive) else "wait"
        bar = s.name if s.index is None else f"{s.name}[{print_expr(s.index)}]"
        count = f", count={s.count}" if isinstance(s, Arrive) and s.count != 1 else ""
        if isinstance(s, Arrive) and s.cluster:
            count += ", cluster=True"
        return [f"{pad}{fn}({bar}, {print_expr(s.lo)}, {print_expr(s.hi)}{count})"]
    if isinstance(s, AsyncCopy):
        bar = ""
        if s.bar is not None:
            bar = f", bar={s.bar if s.index is None else f'{s.bar}[{print_expr(s.index)}]'}"
        return [f"{pad}async_copy({print_copy_window(s.dst, s.dst_idx, s.n)}, "
                f"{print_copy_window(s.src, s.src_idx, s.n)}{bar})"]
    if isinstance(s, SetMaxNReg):
        return [f"{pad}setmaxnreg({s.regs}, {print_expr(s.lo)}, {print_expr(s.hi)})"]
    if isinstance(s, AsyncCommit):
        return [f"{pad}async_commit()"]
    if isinstance(s, AsyncWait):
        return [f"{pad}async_wait({s.depth})"]
    if isinstance(s, Wgmma):
        major = "" if s.b_major == "k" else f', b_major="{s.b_major}"'
        return [f"{pad}wgmma({print_expr(s.acc)}, {print_expr(s.a)}, {print_expr(s.b)}{major})"]
    if isinstance(s, TmaStore):
        return [f"{pad}tma_store({print_expr(s.dst)}, {print_expr(s.src)})"]
    if isinstance(s, TmaCommit):
        return [f"{pad}tma_commit()"]
    if isinstance(s, TmaWait):
        return [f"{pad}tma_wait({s.depth})"]
    if isinstance(s, TmaLoad):
        bar = s.name if s.index is None else f"{s.name}[{print_expr(s.index)}]"
        return [f"{pad}tma_load({print_expr(s.dst)}, {print_expr(s.src)}, bar={bar})"]
    if isinstance(s, WgmmaCommit):
        return [f"{pad}wgmma_commit()"]
    if isinstance(s, WgmmaWait):
        return [f"{pad}wgmma_wait({s.depth})"]
    if isinstance(s, Pass):
        return [f"{pad}pass"]
    if isinstance(s, Call):
        return [f"{pad}{s.proc.name}({', '.join(print_expr(a) for a in s.args)})"]
    raise TypeError(f"not a statement: {s!r}")


def print_block(body, indent: int) -> list[str]:
    if not body:
        return ["    " * indent + "pass"]
    out: list[str] = []
    for s in body:
        out += print_stmt(s, indent)
    return out


def print_proc(p: ProcDef) -> str:
    deco = "@proc" if p.instr is None else f"@instr({p.instr!r})"
    lines = [deco, f"def {p.name}({', '.join(print_param(x) for x in p.params)}):"]
    for pred in p.preds:
        lines.append(f"    assert {print_expr(pred)}")
    lines += print_block(p.body, 1) if (p.body or not p.preds) else []
    return "\n".join(lines) + "\n"
