"""An ``@instr``'s template against its body: both run on random inputs and compared.

An ``@instr`` has two meanings: its body (what the interpreter runs and ``check()``
proves) and its CUDA C template (what code generation emits).  Nothing else ties them
together, so :func:`check_instr` runs both: it wraps the instruction in a one-thread
kernel whose array parameters hold the instruction's arguments (copied into SHARED or
REGISTER arrays where the instruction's parameters live there, and back), compiles that
kernel twice — once calling the ``@instr`` (its template is emitted) and once calling
the same body as a plain proc (inlined) — runs both on the same random inputs and
compares every array afterwards.

One thread runs each instruction: a warp-wide template (``mma.sync``) is compared in
the code path the emulator takes (its per-thread fallback); on a GPU
(``backend="cuda"``) it would need a whole warp, which this check does not provide.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import CompileError
from ..runtime.backends import backend_of
from ..ir.nodes import (Alloc, Assign, Call, Const, For, Interval, Param, ProcDef, Read, Var,
                        WindowArg)
from ..ir.procdef import as_procdef
from ..ir.types import BLOCKS, GLOBAL, THREADS, memory_with, param_memory
from ..ir.control import NotConstant, evaluate
from ..ir.visitor import fresh_name


@dataclass
class InstrCheck:
    """What :func:`check_instr` found: ``ok`` when template and body agreed on every
    trial; ``mismatches`` lists the first differing element of each array and trial
    (``trial``, ``array``, ``element``, ``template``, ``body``); ``inputs`` the
    arguments of the first failing trial."""

    name: str
    trials: int
    backend: str
    mismatches: list = field(default_factory=list)
    inputs: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return (f"check_instr({self.name}): template and body agree on {self.trials} "
                    f"random inputs ({self.backend})")
        lines = [f"check_instr({self.name}): the template differs from the body "
                 f"({len(self.mismatches)} array(s) over {self.trials} trials, {self.backend})"]
        for m in self.mismatches[:8]:
            lines.append(f"  trial {m['trial']}: {m['array']}{list(m['element'])}: template "
                         f"{m['template']!r}, body {m['body']!r}")
        return "\n".join(lines)

    def raise_if_failed(self) -> "InstrCheck":
        if not self.ok:
            raise CompileError(str(self), hint="the body is what check() proves and the "
                               "interpreter runs: make the template compute the same")
        return self


def check_instr(instr, *, trials: int = 8, seed: int = 0, backend: str | None = None,
                rtol: float = 0.0, atol: float = 0.0, target=None, **sizes) -> InstrCheck:
    """Run ``instr``'s template and its body on ``trials`` random inputs (float arrays
    uniform in [-1, 1], integers in [-100, 100]) and compare them (``rtol``/``atol`` for
    floats, exact by default); the template runs on ``backend`` (``"emulator"`` by
    default; ``target=`` naming a backend is its old spelling), generated for the
    architecture ``target``.  Sizes and index parameters of the instruction are given
    as keywords (``check_instr(copy, n=8)``); index parameters default to 0."""
    try:
        backend, target = backend_of(backend, target, "check_instr", default="emulator")
    except ValueError as e:
        raise CompileError(str(e)) from None
    ir = as_procdef(instr)
    if ir is None or ir.instr is None:
        raise CompileError(f"check_instr takes an @instr, not {instr!r:.60}")
    from .compiled_kernel import Kernel

    missing = [q.name for q in ir.params if q.kind == "size" and q.name not in sizes]
    if missing:
        raise CompileError(f"check_instr({ir.name}): give the sizes {', '.join(missing)}",
                           hint=f"check_instr({ir.name}, {missing[0]}=8)")
    env = {q.name: int(sizes.get(q.name, 0)) for q in ir.params if q.is_control}
    plain = ProcDef(ir.name + "_body", ir.params, ir.preds, ir.body, None, ir.loc)
    with_template = Kernel(_wrapper(ir), backend, env, check=False, target=target)
    with_body = Kernel(_wrapper(plain), "emulator", env, check=False)
    rng = np.random.default_rng(seed)
    out = InstrCheck(ir.name, trials, backend)
    for trial in range(trials):
        args = _random_args(ir, env, rng)
        a1 = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        a2 = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        with_template(**a1)
        with_body(**a2)
        bad = _compare(ir, a1, a2, rtol, atol, trial)
        if bad and not out.mismatches:
            out.inputs = args
        out.mismatches += bad
    return out


# ------------------------------------------------------------------ the wrapper


def _wrapper(ir: ProcDef) -> ProcDef:
    """A one-block, one-thread proc with ``ir``'s parameters (arrays in GLOBAL) that
    calls ``ir`` once, its SHARED/REGISTER arguments copied in and out."""
    taken = {q.name for q in ir.params}
    blk, thr = fresh_name("blk", taken), fresh_name("thr", taken | {"blk"})
    taken |= {blk, thr}
    shared, regs, copy_in, copy_out, args = [], [], [], [], []
    for q in ir.params:
        if not q.is_array:
            args.append(Var(q.name) if q.kind != "scalar" else Read(q.name, (), q.ty))
            continue
        full = tuple(Interval(Const(0), e) for e in q.shape)
        if param_memory(q.mem) == param_memory(None):
            args.append(WindowArg(q.name, full, q.ty))
            continue
        local = fresh_name(q.name + "_m", taken)
        taken.add(local)
        in_block = q.mem.per_block  # a copy in the block's memory, else one per thread
        (shared if in_block else regs).append(
            Alloc(local, q.ty, q.shape, q.mem if in_block else memory_with(scope="thread")))
        copy_in.append(_copy(local, q.name, q, taken))
        copy_out.append(_copy(q.name, local, q, taken))
        args.append(WindowArg(local, full, q.ty))
    call = Call(ir, tuple(args))
    thread = For(thr, Const(0), Const(1), tuple(regs + copy_in + [call] + copy_out),
                 "par", THREADS)
    block = For(blk, Const(0), Const(1), tuple(shared) + (thread,), "par", BLOCKS)
    params = tuple(q if not q.is_array else Param(q.name, "tensor", q.ty, q.shape, GLOBAL)
                   for q in ir.params)
    return ProcDef(f"check_{ir.name}", params, ir.preds, (block,))


def _copy(dst: str, src: str, q: Param, taken: set):
    idx = []
    for k in range(len(q.shape)):
        v = fresh_name(f"i{k}", taken)
        taken.add(v)
        idx.append(v)
    body = Assign(dst, tuple(Var(v) for v in idx), Read(src, tuple(Var(v) for v in idx), q.ty))
    for v, e in reversed(list(zip(idx, q.shape))):
        body = For(v, Const(0), e, (body,))
    return body


# ------------------------------------------------------------------ inputs, comparison


def _shape(q: Param, env: dict) -> tuple:
    try:
        return tuple(int(evaluate(e, env)) for e in q.shape)
    except (NotConstant, ZeroDivisionError):
        raise CompileError(f"check_instr: the shape of {q.name} is not known from the "
                           "sizes given") from None


def _random_args(ir: ProcDef, env: dict, rng) -> dict:
    args: dict = {}
    for q in ir.params:
        if q.is_control:
            args[q.name] = env[q.name]
            continue
        dt = np.dtype(q.ty.numpy)
        shp = _shape(q, env) if q.is_array else ()
        if q.ty.is_float:
            v = rng.uniform(-1, 1, size=shp).astype(dt)
        elif dt.kind == "b":
            v = rng.integers(0, 2, size=shp).astype(dt)
        else:
            v = rng.integers(-100, 101, size=shp).astype(dt)
        args[q.name] = v if q.is_array else v.item()
    return args


def _compare(ir: ProcDef, a1: dict, a2: dict, rtol: float, atol: float, trial: int) -> list:
    out = []
    for q in ir.params:
        if not q.is_array:
            continue
        x, y = a1[q.name], a2[q.name]
        if q.ty.is_float:
            x, y = x.astype(np.float64), y.astype(np.float64)
            bad = ~(np.isclose(x, y, rtol=rtol, atol=atol) | (np.isnan(x) & np.isnan(y)))
        else:
            bad = x != y
        if bad.any():
            el = tuple(int(i) for i in np.argwhere(bad)[0])
            out.append(dict(trial=trial, array=q.name, element=el, template=x[el].item(),
                            body=y[el].item()))
    return out


__all__ = ["check_instr", "InstrCheck"]
