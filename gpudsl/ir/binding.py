"""The one argument binder: user arguments → a proc's parameters.

Both the interpreter (``gpudsl.interpret``) and compiled kernels (``kernel(...)``)
bind through :func:`bind`: it checks names and missing arguments, control integers
and scalars, hands each tensor argument to the caller's ``array`` adapter (numpy
only in the interpreter; numpy, DLPack and CUDA arrays for kernels), infers sizes
from the arrays' shapes (solving affine shape expressions), checks that the sizes
agree with each other and with compile-time bindings, that sizes are positive, the
proc's asserts, and that distinct tensor arguments do not overlap in memory when
the proc writes one of them.  Every
failure raises the caller's error class (``InterpError`` / ``LaunchError``) before
anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .control import NotConstant, control_names, evaluate
from .nodes import Expr, Param, ProcDef
from .printer import print_expr


@dataclass
class Bound:
    """The checked arguments of one call."""

    env: dict[str, int]  # sizes and index parameters
    scalars: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Any] = field(default_factory=dict)  # name -> the adapter's handle


def is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def merge_positional(pdef: ProcDef, args: tuple, kwargs: dict, error) -> dict:
    """``args`` (in parameter order) and ``kwargs`` as one dict by name."""
    names = [p.name for p in pdef.params]
    if len(args) > len(names):
        raise error(f"{pdef.name} takes {len(names)} argument(s) ({', '.join(names)}), got "
                    f"{len(args)} positional ones")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given:
            raise error(f"argument '{k}' of {pdef.name} is given twice")
        given[k] = v
    return given


def check_array_type(pname: str, prm: Param, dtype, ndim: int, error, *,
                     dtype_ok: bool | None = None, shown=None, hint: str | None = None):
    """The dtype and number of dimensions of a tensor argument.  ``dtype_ok``
    overrides the dtype test (bf16 device arrays), ``shown`` the dtype printed."""
    if dtype_ok is None:
        dtype_ok = prm.ty.numpy is not None and np.dtype(dtype) == np.dtype(prm.ty.numpy)
    if not dtype_ok:
        if hint is None and prm.ty.numpy:
            hint = f"convert it: x.astype(np.{prm.ty.numpy})"
        raise error(f"'{prm.name}' of {pname} holds {prm.ty.name}, but the array's dtype is "
                    f"{dtype if shown is None else shown}", prm.loc, hint)
    if ndim != len(prm.shape):
        raise error(f"'{prm.name}' of {pname} has {len(prm.shape)} dimension(s), the array "
                    f"has {ndim}", prm.loc)


def check_scalar(pname: str, prm: Param, v, error):
    """A scalar argument as a Python int / bool, or a numpy float of the type."""
    ty = prm.ty
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    ok = (isinstance(v, (bool, np.bool_)) if ty.kind == "bool" else
          is_int(v) if ty.kind == "int" else
          isinstance(v, (int, float, np.integer, np.floating))
          and not isinstance(v, (bool, np.bool_)))
    if not ok:
        raise error(f"scalar '{prm.name}' of {pname} is {ty.name}, got "
                    f"{type(v).__name__} {v!r}", prm.loc)
    if ty.kind == "int":
        lo, hi = -(1 << (ty.bits - 1)), 1 << (ty.bits - 1)
        if not lo <= int(v) < hi:
            raise error(f"scalar '{prm.name}' = {v} does not fit in {ty.name}", prm.loc)
        return int(v)
    if ty.kind == "bool":
        return bool(v)
    if ty.numpy is None:
        raise error(f"scalar parameters of type {ty.name} cannot be passed from Python",
                    prm.loc, "pass the value in a one-element array")
    return np.dtype(ty.numpy).type(v)


def solve(d: Expr, name: str, actual: int, env: dict):
    """The value of ``name`` making shape expression ``d`` equal ``actual``, when
    ``d`` is affine in it; else None."""
    try:
        f = [evaluate(d, {**env, name: x}) for x in (0, 1, 2)]
    except (NotConstant, ZeroDivisionError):
        return None
    slope = f[1] - f[0]
    if slope == 0 or f[2] - f[1] != slope or (actual - f[0]) % slope:
        return None
    v = (actual - f[0]) // slope
    try:
        return v if evaluate(d, {**env, name: v}) == actual else None
    except (NotConstant, ZeroDivisionError):
        return None


def bind(pdef: ProcDef, given: dict, *, error, array: Callable[[Param, Any], Any],
         overlap: Callable[[Any, Any], bool], bindings: dict | None = None,
         array_hint: str = "pass a numpy array", pass_hint: str = "") -> Bound:
    """Bind ``given`` (argument name → value) to ``pdef``'s parameters.

    ``array(prm, value)`` checks one tensor argument and returns a handle with a
    ``shape``; ``overlap(h1, h2)`` tells whether two handles share memory;
    ``bindings`` are sizes fixed at compile time.  ``pass_hint`` ends the hint for
    a missing size (``pass n=...<pass_hint>``)."""
    pname = pdef.name
    names = [p.name for p in pdef.params]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise error(f"{pname} has no parameter {', '.join(repr(u) for u in unknown)}",
                    pdef.loc, f"its parameters are: {', '.join(names)}")
    b = Bound({})
    env = b.env
    origin: dict[str, str] = {}
    for prm in pdef.params:
        v = given.get(prm.name)
        if prm.is_control:
            if v is None:
                continue
            if not is_int(v):
                raise error(f"{prm.kind} parameter '{prm.name}' of {pname} must be an "
                            f"integer, got {v!r}", prm.loc)
            env[prm.name] = int(v)
            origin[prm.name] = "the argument"
        elif prm.kind == "scalar":
            if v is None:
                raise error(f"missing argument '{prm.name}' ({prm.ty.name}) of {pname}",
                            prm.loc)
            b.scalars[prm.name] = check_scalar(pname, prm, v, error)
        else:
            if v is None:
                raise error(f"missing array argument '{prm.name}' of {pname}", prm.loc,
                            array_hint)
            b.arrays[prm.name] = array(prm, v)
    for k, v in (bindings or {}).items():
        if k in env and env[k] != v:
            raise error(f"'{k}' of {pname} was bound to {v} at compile time, but the "
                        f"argument is {env[k]}")
        env.setdefault(k, v)
        origin.setdefault(k, "the compile-time binding")
    key = (tuple(sorted(env.items())), tuple((n, tuple(a.shape)) for n, a in b.arrays.items()))
    known = _SIZES.get(id(pdef))
    if known is not None and known[0] is pdef and key in known[1]:
        env.update(known[1][key])  # these sizes and shapes were checked before
    else:
        _check_sizes(pdef, b, origin, error, pass_hint)
        if known is None or known[0] is not pdef or len(known[1]) > 256:
            if len(_SIZES) > 1024:
                _SIZES.clear()
            known = _SIZES[id(pdef)] = (pdef, {})
        known[1][key] = dict(env)
    _check_aliasing(pdef, b.arrays, overlap, error)
    return b


# id(ProcDef) -> (that ProcDef, {(the given sizes, the arrays' shapes): the whole env}):
# a call with the sizes and shapes of an earlier one that passed skips the inference and
# the checks of sizes, shapes and assertions (a pure function of those); the arrays
# themselves (types, aliasing) are checked at every call
_SIZES: dict = {}


def _check_sizes(pdef: ProcDef, b: Bound, origin: dict, error, pass_hint: str) -> None:
    pname, env = pdef.name, b.env
    _infer_sizes(pdef, b, origin)
    for prm in pdef.params:
        if prm.is_control and prm.name not in env:
            raise error(f"{prm.kind} '{prm.name}' of {pname} is not given" +
                        (" and cannot be inferred from the arrays' shapes"
                         if prm.kind == "size" else ""), prm.loc,
                        f"pass {prm.name}=...{pass_hint}")
        if prm.kind == "size" and env[prm.name] <= 0:
            raise error(f"size '{prm.name}' of {pname} must be positive, got "
                        f"{env[prm.name]} (from {origin.get(prm.name, '?')})", prm.loc)
    _check_shapes(pdef, b, origin, error)
    _check_asserts(pdef, env, error)


def _infer_sizes(pdef: ProcDef, b: Bound, origin: dict) -> None:
    env = b.env
    dims = [(prm, i, d, b.arrays[prm.name].shape[i]) for prm in pdef.params
            if prm.name in b.arrays for i, d in enumerate(prm.shape)]
    progress = True
    while progress:
        progress = False
        for prm, i, d, actual in dims:
            free = sorted(control_names(d) - set(env))
            if len(free) != 1:
                continue
            v = solve(d, free[0], actual, env)
            if v is not None:
                env[free[0]] = v
                origin[free[0]] = f"{prm.name}.shape[{i}]"
                progress = True


def infer_sizes(pdef: ProcDef, b: Bound) -> None:
    """Solve ``b.env``'s missing sizes from the shapes of ``b.arrays`` (objects with a
    ``shape``), as a call does, without checking anything."""
    _infer_sizes(pdef, b, {})


def _check_shapes(pdef: ProcDef, b: Bound, origin: dict, error) -> None:
    env = b.env
    for prm in pdef.params:
        if prm.name not in b.arrays:
            continue
        try:
            want = tuple(evaluate(d, env) for d in prm.shape)
        except (NotConstant, ZeroDivisionError):
            want = None
        got = tuple(b.arrays[prm.name].shape)
        if want != got:
            used = sorted(set().union(*(control_names(d) for d in prm.shape)))
            detail = ", ".join(f"{n}={env[n]} (from {origin.get(n, '?')})" for n in used
                               if n in env)
            raise error(f"'{prm.name}' of {pdef.name} must have shape "
                        f"[{', '.join(print_expr(d) for d in prm.shape)}] = {want}"
                        f"{' with ' + detail if detail else ''}, but its shape is {got}",
                        prm.loc, "the sizes must agree across all arguments")


def _check_asserts(pdef: ProcDef, env: dict, error) -> None:
    for pred in pdef.preds:
        try:
            ok = evaluate(pred, env)
        except (NotConstant, ZeroDivisionError):
            ok = False
        if not ok:
            vals = ", ".join(f"{n}={env[n]}" for n in sorted(control_names(pred)) if n in env)
            raise error(f"precondition of {pdef.name} fails: `assert {print_expr(pred)}`"
                        f"{' with ' + vals if vals else ''}", pred.loc,
                        "pass arguments (array shapes, sizes, index parameters) that "
                        "satisfy it")


# id(ProcDef) -> (that ProcDef, the names of the parameters it writes, through its
# callees too); by identity: hashing a ProcDef walks all of it, and a call asks each time
_WRITTEN: dict = {}


def written_params(pdef: ProcDef) -> frozenset:
    """The tensor parameters ``pdef`` writes (its callees' writes included)."""
    hit = _WRITTEN.get(id(pdef))
    if hit is not None and hit[0] is pdef:
        return hit[1]
    from .inline import inline_calls, written_names

    if len(_WRITTEN) > 1024:
        _WRITTEN.clear()
    try:
        w = frozenset(written_names(inline_calls(pdef).body))
    except Exception:  # a call the inliner refuses: every parameter may be written
        w = frozenset(p.name for p in pdef.params)
    _WRITTEN[id(pdef)] = (pdef, w)
    return w


def _check_aliasing(pdef: ProcDef, arrays: dict, overlap, error) -> None:
    """Two arguments may share memory only when the proc writes neither (reading the
    same array twice, ``add(x, x)``, is as safe as it is in numpy)."""
    items = list(arrays.items())
    if len(items) < 2:
        return
    written = written_params(pdef)
    for i, (n1, a1) in enumerate(items):
        for n2, a2 in items[i + 1:]:
            if n1 not in written and n2 not in written:
                continue
            if overlap(a1, a2):
                raise error(f"the arrays passed as '{n1}' and '{n2}' of {pdef.name} overlap "
                            "in memory", pdef.loc,
                            f"{pdef.name} writes {n1 if n1 in written else n2}: tensor "
                            "arguments it writes must be distinct buffers; pass a copy")


def host_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two numpy arrays share memory (assumed so when that is too hard to tell)."""
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except Exception:  # numpy.exceptions.TooHardError
        return True


__all__ = ["Bound", "bind", "infer_sizes", "merge_positional", "check_array_type",
           "check_scalar", "solve", "is_int", "host_overlap"]
