"""``gpudsl tune matmul --dtype float16`` (or ``bfloat16``): tune the half GEMM that
``gpudsl.ops.matmul`` and graphs run for these shapes on the device.

Which kernel that is depends on the device (:func:`~gpudsl.stdlib.matmul_sm80.plan_matmul_half_for`):
on an sm_90a GPU (H100, H200) the derived wgmma kernel ``a @ b``
(:mod:`~gpudsl.stdlib.matmul_sm90_nn`: task ``matmul_sm90_nn``, its space the tiles of
:func:`~gpudsl.stdlib.matmul_sm90.sm90_space` that the NN kernel takes); elsewhere, and
on the emulator, the sm_80 multistage kernel (task ``matmul_sm80``,
:func:`~gpudsl.stdlib.matmul_sm80.sm80_space`).  The winner goes to the tuning store
under that task, the shapes (with their dtype) and the device; ``ops.matmul`` reads it
there (``matmul_sm90_nn.tuned_sm90_nn_options``, ``tuned_sm80_options``).  A tuned sm_90a kernel
is still used only after its first run on the device equals numpy
(:mod:`~gpudsl.stdlib.first_run`).
"""
from __future__ import annotations

import json

import numpy as np

from .matmul_sm90_nn import SM90_NN_TASK, nn_keywords, tuning_shapes

HALF_DTYPES = {"float16": "f16", "bfloat16": "bf16"}


def sm90_nn_space(smem_bytes: int = 227 * 1024):
    """The sm_90a NN kernel's tiles as an autotuning space: the configurations of
    :func:`sm90_space` (those whose ring fits ``smem_bytes``), reduced to the
    parameters the NN kernel takes."""
    from ..autotune.space import Space
    from .matmul_sm90 import sm90_space

    names = nn_keywords()
    configs = [{k: v for k, v in c.items() if k in names} for c in sm90_space(smem_bytes)]
    allowed = {json.dumps(c, sort_keys=True) for c in configs}
    domains = {k: sorted({c[k] for c in configs}) for k in configs[0]}
    return Space(where=lambda c: json.dumps(dict(c), sort_keys=True) in allowed, **domains)


class Sm90NNBuild:
    """A configuration of :func:`sm90_nn_space` -> the kernel ``ops.matmul`` would run
    with it for these shapes (clipped where the tile does not divide them; picklable)."""

    task = SM90_NN_TASK

    def __init__(self, a_shape, b_shape, dt: str):
        self.a_shape, self.b_shape, self.dt = tuple(a_shape), tuple(b_shape), dt

    def __call__(self, config):
        from .matmul_sm90_nn import plan_matmul_sm90_nn

        return plan_matmul_sm90_nn(self.a_shape, self.b_shape, self.dt, **dict(config))[0]

    def __repr__(self):
        return f"Sm90NNBuild({self.a_shape}, {self.b_shape}, {self.dt!r})"


def device_kind(backend: str) -> str:
    """``"sm90"`` where ``backend`` runs the sm_90a NN kernel (a GPU with wgmma), else
    ``"sm80"``."""
    from .matmul_sm80 import _has_wgmma, arch_of

    return "sm90" if backend == "cuda" and _has_wgmma(arch_of("cuda")) else "sm80"


class HalfMatmulTask:
    """``gpudsl tune matmul --dtype float16|bfloat16``: the half kernel ``ops.matmul``
    runs on ``backend`` (module docs), with its space, arguments and reference."""

    def __init__(self, a_shape, b_shape, dt: str, backend: str):
        from .matmul_sm80 import Sm80Build

        self.a_shape, self.b_shape, self.dt = tuple(a_shape), tuple(b_shape), dt
        self.kind = device_kind(backend)
        self.backend = backend
        self.build = (Sm90NNBuild(a_shape, b_shape, dt) if self.kind == "sm90"
                      else Sm80Build(dt, batched=len(self.a_shape) == 3))
        self.task = self.build.task

    def __call__(self, config):
        return self.build(config)

    def space(self, **params):
        from ..autotune.space import Space
        from .matmul_sm80 import arch_of, sm80_space

        if self.kind == "sm90":
            full = sm90_nn_space()
        else:
            full = sm80_space(target=arch_of(self.backend))
        unknown = set(params) - set(full.domains)
        if unknown:
            raise TypeError(f"unknown parameter(s) {', '.join(sorted(unknown))}; the "
                            f"parameters are {', '.join(full.domains)}")
        domains = {k: [v for v in vals if k not in params or v in params[k]]
                   for k, vals in full.domains.items()}
        return Space(where=list(full.where), **domains)

    def shapes(self) -> dict:
        return tuning_shapes(self.a_shape, self.b_shape, self.dt)

    def args(self, seed: int) -> dict:
        from ..autotune.tune import random_args

        return random_args(self.shapes(), seed)

    def reference(self, a, b, c):
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(c.dtype)

    @property
    def rate(self) -> dict:
        sa, sb = self.a_shape, self.b_shape
        batch = sa[0] if len(sa) == 3 else 1
        return dict(flops=2.0 * batch * sa[-2] * sa[-1] * sb[-1])

    def __repr__(self):
        return f"HalfMatmulTask({self.a_shape}, {self.b_shape}, {self.dt!r}, {self.kind})"


__all__ = ["HalfMatmulTask", "Sm90NNBuild", "sm90_nn_space",
           "device_kind", "SM90_NN_TASK", "HALF_DTYPES"]
