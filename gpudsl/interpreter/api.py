"""``gpudsl.interpret``: binding arguments, checking them, running the proc."""
from __future__ import annotations

import numpy as np

from ..errors import InterpError
from ..ir.binding import bind, check_array_type, host_overlap
from ..ir.control import NotConstant, evaluate
from ..ir.nodes import Expr, ProcDef
from ..ir.printer import print_expr
from ..ir.procdef import as_procdef
from .compiler import compiled, run
from .race_detector import RaceContext
from ..ir.sync_meaning import uses_partial_sync


def interpret(p, /, **args) -> None:
    """Run ``p`` with the reference semantics, on numpy arrays, in place.

    Tensor arguments are numpy arrays of the declared dtype; sizes are inferred
    from their shapes (or passed, and then checked); index parameters are passed
    by name; scalars are Python or numpy numbers.  Asserts are checked before
    anything runs.  Every loop, ``par`` loops included, runs in order.  With
    ``detect_races=True`` the run also raises ``gpudsl.RaceError`` when two
    threads conflict inside a barrier phase (see ``races``).  No parameter name
    collides with the API: ``p`` is positional, and a proc with a parameter named
    ``detect_races`` takes the option as ``_detect_races``.
    """
    pdef = as_procdef(p)
    if pdef is None:
        raise InterpError(f"interpret() takes a @proc, not {type(p).__name__}")
    names = {q.name for q in pdef.params}
    detect_races = False
    for key in ("detect_races", "_detect_races"):
        if key in args and (key not in names or key == "_detect_races"):
            detect_races = args.pop(key)
    control, scalars, arrays = _bind(pdef, args)
    try:
        fn = compiled(pdef, bool(detect_races), True)
    except RecursionError:
        raise InterpError(f"the interpreter cannot run {pdef.name}: it nests calls or "
                          "expressions too deeply (Python's recursion limit)", pdef.loc,
                          "nest fewer calls: inline some of them") from None
    ctx = RaceContext() if detect_races else None
    if ctx is not None:
        ctx.partial = uses_partial_sync(pdef)
    call = [ctx]
    copy_back = []
    for prm in pdef.params:
        if prm.is_control:
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


def _bind(pdef: ProcDef, args: dict):
    """``(control, scalars, arrays)`` through the one binder (``gpudsl.ir.binding``)."""

    def array(prm, v):
        if not isinstance(v, np.ndarray):
            raise InterpError(f"'{prm.name}' of {pdef.name} must be a numpy array, got "
                              f"{type(v).__name__}", prm.loc)
        check_array_type(pdef.name, prm, v.dtype, v.ndim, InterpError,
                         hint=None if prm.ty.numpy else
                         f"the interpreter has no {prm.ty.name} arrays")
        return v

    b = bind(pdef, args, error=InterpError, array=array, overlap=host_overlap,
             pass_hint=" to interpret()")
    return b.env, b.scalars, b.arrays


def eval_control(e: Expr, env: dict):
    """The value of an expression over sizes, index parameters and constants
    (``gpudsl.ir.control.evaluate``, with a located error for what has none)."""
    try:
        return evaluate(e, env)
    except NotConstant:
        raise InterpError(f"cannot evaluate `{print_expr(e)}` from sizes and index "
                          "parameters", getattr(e, "loc", None)) from None
