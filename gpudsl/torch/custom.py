"""A proved proc (or its ``Kernel``) as a PyTorch operator: ``torch.library.custom_op``
with a schema and a fake implementation derived from the proc's parameters.

The parameters become the operator's: a tensor the proc only reads is a ``Tensor``
argument; one it writes and also reads (``y[i] += ...``), or one named in
``mutates``, a mutated ``Tensor(a!)`` argument; one it writes without ever reading,
an output, allocated (zeroed) by the operator and returned; a scalar a ``float``,
``int`` or ``bool``; a size that no input's shape determines, an ``int``.  The fake
implementation allocates the outputs from the input shapes by the proc's own shape
expressions, so ``torch.compile`` traces the operator without running it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import Error
from ..ir.binding import Bound, infer_sizes
from ..ir.control import NotConstant, control_names, evaluate
from ..ir.stmt_effects import collect
from ..ir.inline import inline_calls
from ..ir.nodes import Var
from ..ir.printer import print_expr
from ..ir.procdef import as_procdef

# gpudsl's element types -> torch's
TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
                "bool": torch.bool}


@dataclass(frozen=True)
class Signature:
    """How a proc's parameters map to an operator's: ``args`` (name, schema type, is
    mutated) in schema order (sizes no input's shape gives among them, as ``int``),
    ``outputs`` the returned tensors' names."""

    proc: object
    args: tuple
    outputs: tuple

    @property
    def mutated(self) -> tuple:
        return tuple(n for n, _, m in self.args if m)

    def schema(self) -> str:
        params = ", ".join(f"Tensor(a{i}!) {n}" if m else f"{t} {n}"
                           for i, (n, t, m) in enumerate(self.args))
        outs = ("()" if not self.outputs else "Tensor" if len(self.outputs) == 1 else
                "(" + ", ".join("Tensor" for _ in self.outputs) + ")")
        return f"({params}) -> {outs}"


def signature(proc, outputs=None, mutates=()) -> Signature:
    """The operator signature of ``proc`` (see the module)."""
    pdef = as_procdef(proc)
    if pdef is None:
        raise Error(f"gpudsl.torch.op takes a @proc or a Kernel, not {type(proc).__name__}")
    flat = inline_calls(pdef)
    written, read = set(), set()
    for a in collect(flat.body):
        (written if a.writes else read).add(a.buf)
        if a.mode != "w":
            read.add(a.buf)
    arrays = [p for p in pdef.params if p.is_array]
    names = {p.name for p in pdef.params}
    for n in tuple(outputs or ()) + tuple(mutates):
        if n not in names:
            raise Error(f"{pdef.name} has no parameter {n!r}", pdef.loc)
    if outputs is None:
        outputs = tuple(p.name for p in arrays if p.name in written and p.name not in read
                        and p.name not in mutates)
    mutated = {p.name for p in arrays if p.name in written and p.name not in outputs}
    known = _sizes_from_inputs(pdef, set(outputs))
    args = []
    for p in pdef.params:
        if p.is_array and p.name not in outputs:
            args.append((p.name, "Tensor", p.name in mutated))
        elif p.kind == "scalar":
            args.append((p.name, _scalar_type(p), False))
        elif p.is_control and p.name not in known:
            args.append((p.name, "int", False))
    return Signature(proc, tuple(args), tuple(outputs))


def _scalar_type(p) -> str:
    kind = p.ty.kind
    return "bool" if kind == "bool" else "int" if kind == "int" else "float"


def _sizes_from_inputs(pdef, outputs: set) -> set:
    """The size names some input tensor's shape gives (a dimension that is the name
    itself, or affine in it)."""
    return {n for p in pdef.params if p.is_array and p.name not in outputs
            for d in p.shape for n in control_names(d)}


def output_shapes(sig: Signature, given: dict) -> dict:
    """The outputs' shapes from the inputs' (``given``: name -> argument): the sizes
    solved from the input shapes as a kernel call solves them, then the outputs'
    shape expressions evaluated.  Symbolic sizes (torch.compile's) are kept where a
    dimension is the size itself."""
    pdef = as_procdef(sig.proc)
    env = {n: v for n, v in given.items() if not isinstance(v, torch.Tensor)
           and any(p.name == n and p.is_control for p in pdef.params)}
    env.update(getattr(sig.proc, "bindings", None) or {})
    arrays = {n: v for n, v in given.items() if isinstance(v, torch.Tensor)}
    params = {p.name: p for p in pdef.params}
    for n, t in arrays.items():  # a dimension that is a size: the size, as torch has it
        for d, actual in zip(params[n].shape, t.shape):
            if isinstance(d, Var) and d.name not in env:
                env[d.name] = actual
    if all(isinstance(v, int) for v in env.values()) or not _all_known(sig, env):
        env = {k: int(v) for k, v in env.items()}
        b = Bound(env, arrays={n: _Shape(t.shape) for n, t in arrays.items()})
        infer_sizes(pdef, b)
        env = b.env
    try:
        return {n: tuple(evaluate(d, env) for d in params[n].shape) for n in sig.outputs}
    except (NotConstant, KeyError):
        got = ", ".join(f"{n}: {tuple(t.shape)}" for n, t in arrays.items())
        want = ", ".join(f"{n}: [{', '.join(print_expr(d) for d in params[n].shape)}]"
                         for n in arrays)
        raise Error(f"the sizes of {pdef.name}'s outputs cannot be solved from its inputs' "
                    f"shapes ({got})", pdef.loc,
                    f"the inputs' shapes must fit the proc's ({want})") from None


def _all_known(sig: Signature, env: dict) -> bool:
    pdef = as_procdef(sig.proc)
    need = {n for p in pdef.params if p.name in sig.outputs for d in p.shape
            for n in control_names(d)}
    return need <= set(env)


class _Shape:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(int(d) for d in shape)


def output_dtypes(sig: Signature) -> dict:
    pdef = as_procdef(sig.proc)
    return {p.name: TORCH_DTYPES[p.ty.name] for p in pdef.params if p.name in sig.outputs}


__all__ = ["Signature", "signature", "output_shapes", "output_dtypes", "TORCH_DTYPES"]
