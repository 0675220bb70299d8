"""PyTorch CPU tensors as numpy arrays and back, without copies and without importing
torch (a tensor exists only once its user imported torch).

numpy has no bfloat16 of its own and torch's ``.numpy()`` refuses it, a tensor that
requires grad, and one with its conjugate or negative bit set; here a bfloat16 tensor
is viewed as ``ml_dtypes.bfloat16`` through its int16 bits, and every refusal is a
``gpudsl.Error`` of the caller's class naming the argument.
"""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

_BF16 = np.dtype(ml_dtypes.bfloat16)


def torch_module():
    """``torch`` when the user imported it, else None (never imports it)."""
    return sys.modules.get("torch")


def is_torch(x) -> bool:
    """A ``torch.Tensor`` (any device)."""
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def is_torch_cpu(x) -> bool:
    """A ``torch.Tensor`` in CPU memory (a fake or meta tensor is not)."""
    return is_torch(x) and x.device.type == "cpu" and not _is_fake(x)


def _is_fake(x) -> bool:
    return type(x).__name__ == "FakeTensor" or x.is_meta


def check_grad(name: str, t, error, hint: str = "pass it detached: x.detach(), or call "
               "it inside torch.no_grad(); gpudsl.torch registers differentiable "
               "ops") -> None:
    """Refuse a tensor that requires grad while grad mode is on: gpudsl would record no
    gradient for it, and a silently missing gradient is wrong."""
    if t.requires_grad and torch_module().is_grad_enabled():
        raise error(f"{name} requires grad, but this call records no gradient",
                    hint=hint)


def host_view(name: str, t, error, allow_grad: bool = False) -> np.ndarray:
    """A numpy array viewing the memory of CPU tensor ``t`` (bfloat16 as
    ``ml_dtypes.bfloat16``).  ``allow_grad``: a tensor that requires grad is taken
    detached (constants), else refused under grad mode (``check_grad``)."""
    if not allow_grad:
        check_grad(name, t, error)
    torch = torch_module()
    if t.layout != torch.strided:
        raise error(f"{name} is a {t.layout} tensor; gpudsl takes dense (strided) tensors",
                    hint="pass x.to_dense()")
    t = t.detach().resolve_conj().resolve_neg()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(_BF16)
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as e:
        raise error(f"{name} ({type(t).__name__} of {t.dtype}) cannot be read as an array: "
                    f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                    hint="gpudsl holds float32, float16, bfloat16, float64, the integers "
                    "and bool: convert with x.to(torch.float32); inside torch.compile, "
                    "call gpudsl.torch's operators") from None


def from_host(a: np.ndarray):
    """A CPU tensor sharing ``a``'s memory (``ml_dtypes.bfloat16`` as bfloat16)."""
    torch = torch_module()
    if a.dtype == _BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class _Int16View:
    """A device buffer of bfloat16 as int16 bits: the array interface has no bfloat16."""

    def __init__(self, buf):
        self.buf = buf

    @property
    def __cuda_array_interface__(self) -> dict:
        return {**self.buf.__cuda_array_interface__, "typestr": "<i2"}


def from_device(buf, device):
    """A CUDA tensor on ``device`` viewing gpudsl's device buffer ``buf`` (no copy; the
    tensor keeps ``buf`` alive).  The buffer's writes must be complete (synchronized)."""
    torch = torch_module()
    if buf.dtype == _BF16:
        return torch.as_tensor(_Int16View(buf), device=device).view(torch.bfloat16)
    return torch.as_tensor(buf, device=device)


__all__ = ["torch_module", "is_torch", "is_torch_cpu", "check_grad", "host_view",
           "from_host", "from_device"]
