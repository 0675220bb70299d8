"""Half precision in the standard library: the tensor dtypes the nodes take
(``f32``, ``f16``, ``bf16``), the refusal of mixed precisions, and the text of
loads and stores that compute in f32 (a half is widened when read, the f32 result
rounded once when stored: for one ``+ - * /`` this is the correctly rounded half
result, as numpy's float16 gives, since f32 has more than twice the halves'
precision plus two bits)."""
from __future__ import annotations

import numpy as np

from ..ir.types import DTYPES
from .shapes import NodeError

# the numpy names of the node dtypes (bfloat16: ml_dtypes, imported by gpudsl.ir.types)
NUMPY = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_BY_NUMPY = {v: k for k, v in NUMPY.items()}


def dtype_of(x) -> str | None:
    """``"f32"``, ``"f16"`` or ``"bf16"`` for a numpy / PyTorch / CuPy array of that
    precision; None for any other dtype."""
    name = str(getattr(x, "dtype", "")).replace("torch.", "")
    name = {"half": "float16", "float": "float32"}.get(name, name)
    return _BY_NUMPY.get(name)


def common_dtype(op: str, **arrays) -> str:
    """The one precision of ``arrays``; a ``NodeError`` naming them when they mix."""
    seen = {name: dtype_of(a) for name, a in arrays.items()}
    kinds = set(seen.values())
    if len(kinds) > 1:
        parts = ", ".join(f"{n} is {NUMPY.get(d, d)}" for n, d in seen.items())
        raise NodeError(f"{op}: mixed precisions ({parts}); the operands of one node share "
                        "a dtype", None, "convert one of them, e.g. b.astype(a.dtype)")
    return kinds.pop()


def numpy_dtype(dt: str) -> np.dtype:
    return np.dtype(NUMPY[dt])


def torch_dtype(dt: str):
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt]


def is_half(dt: str) -> bool:
    return dt in ("f16", "bf16")


def load(expr: str, dt: str) -> str:
    """``expr`` (a read of a ``dt`` array) as an f32 value."""
    return f"f32({expr})" if is_half(dt) else expr


def store(expr: str, dt: str) -> str:
    """The f32 value ``expr`` rounded to ``dt`` (once, to nearest even)."""
    return f"{dt}({expr})" if is_half(dt) else expr


def halve_text(text: str, dt: str, reads: tuple, writes: tuple) -> str:
    """The f32 proc ``text`` on ``dt`` tensors: the parameters ``reads`` and
    ``writes`` declared ``dt``, every read of a ``reads`` array widened to f32, every
    assignment to a ``writes`` array rounded once (f32 text unchanged)."""
    import re

    if not is_half(dt):
        return text
    for a in reads + writes:
        text = re.sub(rf"\b{a}: f32\[", f"{a}: {dt}[", text)
    for a in reads:
        text = re.sub(rf"(?<![\w.]){a}\[([^\]]*)\](?!\s*=[^=])", rf"f32({a}[\1])", text)
    for a in writes:
        text = re.sub(rf"^(\s*{a}\[[^\]]*\] = )(.*)$", rf"\1{dt}(\2)", text, flags=re.M)
    return text


def unit_roundoff(dt: str) -> float:
    """Half an ulp at 1: the relative error of one rounding to ``dt``."""
    return {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[dt]


assert set(NUMPY) <= set(DTYPES)

__all__ = ["NUMPY", "dtype_of", "common_dtype", "numpy_dtype", "torch_dtype", "is_half",
           "load", "store", "halve_text", "unit_roundoff"]
