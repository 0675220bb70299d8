"""Compiling a proc to a Python function, caching it, and mapping faults back.

Each (proc, race mode, top-level or callee) is compiled once; the cache is
keyed by the identity of the (immutable) ``ProcDef`` so that source locations
in error messages are always the proc's own.
"""
from __future__ import annotations

import itertools
import linecache
from collections import OrderedDict

import numpy as np

from ..errors import Error, InterpError
from ..ir.nodes import ProcDef
from ..ir.numeric import shift_left, shift_right
from ..ir.procdef import as_procdef
from ..ir.types import DTYPES
from ..ir.wgmma_meaning import tf32_truncate
from . import runtime as rt
from . import warp_execution as warps
from .emit_stmt import ProcEmitter, _async_outside

_CACHE: "OrderedDict[tuple, tuple]" = OrderedDict()
_CACHE_SIZE = 1024
_LINEMAPS: dict[str, list] = {}  # generated file name -> source location per line
_counter = itertools.count(1)


def _base_env() -> dict:
    env = {
        "_np_exp": np.exp, "_np_log": np.log, "_np_sqrt": np.sqrt, "_np_tanh": np.tanh,
        "_np_sin": np.sin, "_np_cos": np.cos, "_np_erf": rt.erf, "_np_rsqrt": rt.rsqrt,
        "_np_pow": rt.power,
        "_fmin": rt.fmin, "_fmax": rt.fmax, "_shl": shift_left, "_shr": shift_right,
        "_oob": rt.oob, "_alloc": rt.alloc,
        "_bad_window": rt.bad_window, "_bad_extent": rt.bad_extent,
        "_callee_assert": rt.callee_assert, "_bad_dim": rt.bad_dim,
        "_const_write": rt.const_write, "_warp_loop": warps.warp_loop,
        "_no_warp": warps.no_warp, "_async_outside": _async_outside,
        "_tf32": tf32_truncate,   # a tf32 wgmma's operands (gpudsl.ir.wgmma_meaning)
    }
    for name, ty in DTYPES.items():
        if ty.numpy is not None:
            env[f"_cv_{name}"] = rt.converter(ty)
    return env


_BASE = _base_env()


def compiled(proc: ProcDef, race: bool, toplevel: bool, asy: bool = False):
    """The Python function that runs ``proc`` (see :mod:`.emit_stmt`); ``asy``: a
    callee of a proc holding async copies (its accesses are watched)."""
    key = (id(proc), race, toplevel, asy)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is proc:
        _CACHE.move_to_end(key)
        return hit[1]
    em = ProcEmitter(proc, race, toplevel, lambda c: compiled(c, race, False, em.asy),
                     asy)
    em.emit_proc()
    src = em.source()
    fname = f"<gpudsl-interp {proc.name} #{next(_counter)}>"
    env = dict(_BASE)
    env.update(em.env)
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    _LINEMAPS[fname] = em.locs
    try:
        code = compile(src, fname, "exec")
    except (SyntaxError, RecursionError, MemoryError) as e:  # Python's own limits
        why = e.msg if isinstance(e, SyntaxError) else type(e).__name__
        raise InterpError(f"the interpreter cannot run {proc.name}: Python refuses the code "
                          f"it translates to ({why}; Python allows 20 nested blocks)",
                          proc.loc, "nest fewer loops and ifs (merge_loops, or move the "
                          "inner ones into a proc)") from None
    exec(code, env)
    fn = env["_run"]
    fn.gpudsl_source = src
    _CACHE[key] = (proc, fn)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return fn


def python_source(proc, race: bool = False) -> str:
    """The Python source the interpreter runs for ``proc`` (for the curious)."""
    pdef = as_procdef(proc) or proc
    return compiled(pdef, race, True).gpudsl_source


def fault(exc: BaseException) -> Error:
    """A Python exception raised inside generated code, as an InterpError at the
    statement of the user's proc that caused it."""
    loc = None
    tb = exc.__traceback__
    while tb is not None:
        lm = _LINEMAPS.get(tb.tb_frame.f_code.co_filename)
        if lm is not None and 0 < tb.tb_lineno <= len(lm):
            loc = lm[tb.tb_lineno - 1]
        tb = tb.tb_next
    what = {ZeroDivisionError: "integer division or modulo by zero"}.get(type(exc), None)
    msg = what or f"{type(exc).__name__}: {exc}"
    return InterpError(f"run-time fault: {msg}", loc,
                       "guard the operation with an `if` or fix its operands")


def run(fn, args: list):
    """Call a compiled function, turning stray Python faults into InterpErrors."""
    try:
        with np.errstate(all="ignore"):
            fn(*args)
    except Error as err:
        raise err.with_traceback(None) from None
    except RecursionError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised as a located InterpError
        raise fault(exc) from None
