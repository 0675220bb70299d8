"""``gpudsl.interpret``: binding arguments, checking them, running the proc."""
from __future__ import annotations

import numpy as np

from ..errors import InterpError
from ..ir.nodes import BinOp, Builtin, Const, Expr, ProcDef, UnOp, Var
from ..ir.printer import print_expr
from .compiler import compiled, run
from .races import RaceContext


def interpret(p, detect_races: bool = False, **args) -> None:
    """Run ``p`` with the reference semantics, on numpy arrays, in place.

    Tensor arguments are numpy arrays of the declared dtype; sizes are inferred
    from their shapes (or passed, and then checked); index parameters are passed
    by name; scalars are Python or numpy numbers.  Asserts are checked before
    anything runs.  Every loop, ``par`` loops included, runs in order.  With
    ``detect_races=True`` the run also raises :class:`gpudsl.RaceError` when two
    threads conflict inside a barrier phase (see :mod:`.races`).
    """
    from ..proc import Proc

    if isinstance(p, Proc):
        pdef = p.ir
    elif isinstance(p, ProcDef):
        pdef = p
    else:
        raise InterpError(f"interpret() takes a @proc, not {type(p).__name__}")
    control, scalars, arrays = _bind(pdef, args)
    _check_asserts(pdef, control)
    _check_aliasing(pdef, arrays)
    fn = compiled(pdef, bool(detect_races), True)
    ctx = RaceContext() if detect_races else None
    call = [ctx]
    copy_back = []
    for prm in pdef.params:
        if prm.kind in ("size", "index"):
            call.append(control[prm.name])
        elif prm.kind == "scalar":
            call.append(scalars[prm.name])
        else:
            arr = arrays[prm.name]
            work = arr
            if not arr.flags.c_contiguous:
                work = np.ascontiguousarray(arr)
                copy_back.append((arr, work))
            base = work.reshape(-1)
            tr = ctx.tracker(None, prm.name, arr.shape, param=True) if ctx else None
            call.append((base, 0, (), tr))
    try:
        run(fn, call)
    finally:
        for arr, work in copy_back:
            arr[...] = work
    return None


# ---------------------------------------------------------------- binding


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _bind(pdef: ProcDef, args: dict):
    names = {prm.name for prm in pdef.params}
    unknown = sorted(set(args) - names)
    if unknown:
        raise InterpError(
            f"{pdef.name} has no parameter {', '.join(repr(u) for u in unknown)}", pdef.loc,
            f"its parameters are: {', '.join(prm.name for prm in pdef.params)}")
    control: dict[str, int] = {}
    scalars: dict = {}
    arrays: dict[str, np.ndarray] = {}
    for prm in pdef.params:
        v = args.get(prm.name)
        if prm.kind in ("size", "index"):
            if v is None:
                continue
            if not _is_int(v):
                raise InterpError(f"{prm.kind} parameter '{prm.name}' of {pdef.name} must be "
                                  f"an integer, got {v!r}", prm.loc)
            control[prm.name] = int(v)
        elif prm.kind == "scalar":
            if v is None:
                raise InterpError(f"missing argument '{prm.name}' ({prm.ty.name}) of "
                                  f"{pdef.name}", prm.loc)
            scalars[prm.name] = _scalar(prm, v, pdef)
        else:
            if v is None:
                raise InterpError(f"missing array argument '{prm.name}' of {pdef.name}",
                                  prm.loc, "pass a numpy array")
            if not isinstance(v, np.ndarray):
                raise InterpError(f"'{prm.name}' of {pdef.name} must be a numpy array, got "
                                  f"{type(v).__name__}", prm.loc)
            want = np.dtype(prm.ty.numpy) if prm.ty.numpy else None
            if want is None or v.dtype != want:
                raise InterpError(
                    f"'{prm.name}' of {pdef.name} holds {prm.ty.name}, but the array's dtype "
                    f"is {v.dtype}", prm.loc,
                    f"convert it: x.astype(np.{want})" if want else
                    f"the interpreter has no {prm.ty.name} arrays")
            if v.ndim != len(prm.shape):
                raise InterpError(f"'{prm.name}' of {pdef.name} has {len(prm.shape)} "
                                  f"dimension(s), the array has {v.ndim}", prm.loc)
            arrays[prm.name] = v
    _infer_sizes(pdef, control, arrays)
    return control, scalars, arrays


def _scalar(prm, v, pdef):
    ty = prm.ty
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    ok = (isinstance(v, (bool, np.bool_)) if ty.kind == "bool" else
          _is_int(v) if ty.kind == "int" else
          isinstance(v, (int, float, np.integer, np.floating))
          and not isinstance(v, (bool, np.bool_)))
    if not ok:
        raise InterpError(f"scalar '{prm.name}' of {pdef.name} is {ty.name}, got {v!r}",
                          prm.loc)
    if ty.kind == "int":
        lo, hi = -(1 << (ty.bits - 1)), 1 << (ty.bits - 1)
        if not lo <= int(v) < hi:
            raise InterpError(f"scalar '{prm.name}' = {v} does not fit in {ty.name}", prm.loc)
        return int(v)
    if ty.kind == "bool":
        return bool(v)
    if ty.numpy is None:
        raise InterpError(f"the interpreter cannot compute in {ty.name}", prm.loc)
    return np.dtype(ty.numpy).type(v)


def _infer_sizes(pdef: ProcDef, control: dict, arrays: dict):
    sizes = [prm for prm in pdef.params if prm.kind == "size"]
    dims = [(prm, k, d, arrays[prm.name].shape[k]) for prm in pdef.params
            if prm.name in arrays for k, d in enumerate(prm.shape)]
    inferred_from: dict[str, str] = {}
    progress = True
    while progress:
        progress = False
        for prm, k, d, actual in dims:
            free = sorted({n.name for n in _vars(d)} - set(control))
            if len(free) != 1:
                continue
            v = _solve(d, free[0], actual, control)
            if v is not None:
                control[free[0]] = v
                inferred_from[free[0]] = f"{prm.name}.shape[{k}]"
                progress = True
    for prm in pdef.params:
        if prm.kind in ("size", "index") and prm.name not in control:
            raise InterpError(
                f"{prm.kind} '{prm.name}' of {pdef.name} is not given" +
                (" and cannot be inferred from the arrays' shapes" if prm.kind == "size"
                 else ""), prm.loc, f"pass {prm.name}=... to interpret()")
    for prm in sizes:
        if control[prm.name] <= 0:
            src = inferred_from.get(prm.name)
            raise InterpError(f"size '{prm.name}' of {pdef.name} must be positive, got "
                              f"{control[prm.name]}" + (f" (from {src})" if src else ""),
                              prm.loc)
    for prm in pdef.params:
        if prm.name not in arrays:
            continue
        want = tuple(eval_control(d, control) for d in prm.shape)
        got = arrays[prm.name].shape
        if want != got:
            bound = ", ".join(f"{n}={control[n]}" for n in sorted(
                {v.name for d in prm.shape for v in _vars(d)}))
            raise InterpError(
                f"'{prm.name}' of {pdef.name} must have shape "
                f"[{', '.join(print_expr(d) for d in prm.shape)}] = {want}"
                f"{' with ' + bound if bound else ''}, but the array's shape is {got}",
                prm.loc, "the sizes must agree across all arguments")


def _vars(e: Expr):
    from ..ir.visitor import walk

    return [n for n in walk(e) if isinstance(n, Var)]


def _solve(d: Expr, name: str, actual: int, control: dict):
    """The value of ``name`` making ``d == actual``, when ``d`` is affine in it."""
    try:
        f = [eval_control(d, {**control, name: x}) for x in (0, 1, 2)]
    except ZeroDivisionError:
        return None
    slope = f[1] - f[0]
    if slope == 0 or f[2] - f[1] != slope or (actual - f[0]) % slope:
        return None
    v = (actual - f[0]) // slope
    try:
        return v if eval_control(d, {**control, name: v}) == actual else None
    except ZeroDivisionError:
        return None


# ---------------------------------------------------------------- control values

_INT_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "//": lambda a, b: a // b, "%": lambda a, b: a % b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def eval_control(e: Expr, env: dict):
    """The value of an expression over sizes, index parameters and constants."""
    if isinstance(e, Const):
        return e.val
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, BinOp):
        if e.op == "and":
            return eval_control(e.lhs, env) and eval_control(e.rhs, env)
        if e.op == "or":
            return eval_control(e.lhs, env) or eval_control(e.rhs, env)
        return _INT_OPS[e.op](eval_control(e.lhs, env), eval_control(e.rhs, env))
    if isinstance(e, UnOp):
        v = eval_control(e.arg, env)
        return (not v) if e.op == "not" else -v
    if isinstance(e, Builtin) and e.name in ("min", "max", "abs", "select"):
        a = [eval_control(x, env) for x in e.args]
        if e.name == "select":
            return a[1] if a[0] else a[2]
        return {"min": min, "max": max, "abs": abs}[e.name](*a)
    raise InterpError(f"cannot evaluate `{print_expr(e)}` from sizes and index parameters",
                      getattr(e, "loc", None))


def _check_asserts(pdef: ProcDef, control: dict):
    for pred in pdef.preds:
        try:
            ok = eval_control(pred, control)
        except ZeroDivisionError:
            ok = False
        if not ok:
            names = sorted({v.name for v in _vars(pred)})
            vals = ", ".join(f"{n}={control[n]}" for n in names)
            raise InterpError(
                f"precondition of {pdef.name} fails: `assert {print_expr(pred)}`"
                f"{' with ' + vals if vals else ''}", pred.loc,
                "pass arguments (array shapes, sizes, index parameters) that satisfy it")


def _check_aliasing(pdef: ProcDef, arrays: dict):
    items = list(arrays.items())
    for i, (n1, a1) in enumerate(items):
        for n2, a2 in items[i + 1:]:
            try:
                overlap = np.shares_memory(a1, a2, max_work=100_000)
            except np.exceptions.TooHardError if hasattr(np, "exceptions") else Exception:
                overlap = True
            if overlap:
                raise InterpError(
                    f"the arrays passed as '{n1}' and '{n2}' of {pdef.name} overlap in memory",
                    pdef.loc, "tensor arguments must be distinct buffers; pass a copy")
