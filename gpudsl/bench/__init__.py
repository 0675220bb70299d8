"""``gpudsl bench``: every standard-library node against its reference, measured in the
same run, with the achieved rate and the fraction of the device's roofline.

Each row has the node's achieved TFLOP/s (matmul family, attention) or GB/s
(bandwidth-bound nodes: bytes read + written once), the fraction of the device's peak
(:mod:`gpudsl.perf.devices`: FP32 on CUDA cores, tensor cores for TF32 and halves, HBM
bandwidth), and the ratio to its reference timed in the same run the same way.  Every
row names its reference, the backend that ran it and (GPU) the kernels it launched
(:mod:`gpudsl.bench.case_timing`): the GEMMs (4096^3 and 8192^3 in fp32 with TF32 off, TF32,
float16 and bfloat16) against ``torch.matmul`` (cuBLAS) in the same precision;
attention against ``scaled_dot_product_attention`` on 4-D tensors under each SDPA
backend, the fastest correct one kept (:mod:`gpudsl.bench.attention_cases`); bandwidth nodes
against a device-to-device copy of the same number of bytes, at 4 MB, 16 MB and 256 MB
per array, each timed with the L2 flushed before every repetition (``cold``) and not
(``warm``), all reported.  Decode attention carries its bytes/s against such a copy
too (``copy_fraction``).  Every time comes from :func:`gpudsl.runtime.timing.measure`
(CUDA events, warm-up, L2 flush, a spin kernel that lets the host enqueue ahead so the
events time the device's work, median and interquartile range, every repetition's
time kept); ``host us/call`` beside it is the host's own time per call, the launch
overhead.  Each node's result, and each reference's, is compared with the expected one
once before it is timed; a wrong one is reported, never timed.  The JSON (``--out``,
rewritten after each case) records what ran (:mod:`gpudsl.bench.meta`: commit, dirty
flag, versions, clocks and power limit at start and end).

``--backend emulator`` runs the same cases at small sizes on the CPU emulator (the
node table's numpy references, perf_counter): the figures are labelled emulated, have
no roofline fraction, and only show that the benchmark runs (CI runs it).

The cases' names come from the node table (``gpudsl.stdlib.node_table``): each node's
declaration names its cases here (``Node.bench``), and a node with none is timed on
its declaration's ``example`` operands against its reference (a node a user
registered included).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys

from ..backend_names import backend_keyword
from .case_timing import Case, Ref, Run


def bench_nodes() -> list[str]:
    """Every case name ``gpudsl bench`` knows: each node's own cases (its declaration's
    ``bench``), then the table nodes timed on their ``example``."""
    from ..stdlib.node_table import all_nodes

    return [c for n in all_nodes() for c in n.bench] + table_nodes()


def __getattr__(name: str):
    """``NODES``: every case name now (``bench_nodes()``); ``MATMULS``: the matmul
    node's cases."""
    if name == "NODES":
        return bench_nodes()
    if name == "MATMULS":
        from ..stdlib.node_table import get

        return set(get("matmul").bench)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# (rows, cols) of the 2-D bandwidth cases: 4 MB and 16 MB per array fit in a 50 MB L2,
# 256 MB is five times it.  3-D permutes: the same element counts.
GPU_SIZES = [(1024, 1024), (2048, 2048), (8192, 8192)]
GPU_CUBES = [(4, 512, 512), (16, 512, 512), (64, 1024, 1024)]
EMU_SIZES = [(64, 96), (128, 256)]
EMU_CUBES = [(4, 16, 24), (8, 32, 32)]


class _Env:
    """Arrays and reference operations of one backend: PyTorch on the GPU, the node
    table's numpy references (``Node.reference``) on the emulator."""

    def __init__(self, backend: str, seed: int = 0):
        self.backend = backend
        if backend == "cuda":
            import torch

            self.torch = torch
            self.gen = torch.Generator(device="cuda").manual_seed(seed)
        else:
            import numpy as np

            self.np = np
            self.gen = np.random.default_rng(seed)

    def reference(self, node: str, *args, **attrs):
        """Node ``node``'s reference on the emulator: its declaration's, as float32."""
        from ..stdlib.node_table import get

        want = self.np.asarray(get(node).reference(*args, **attrs))
        return want.astype(self.np.float32) if want.dtype == self.np.float64 else want

    def randn(self, *shape):
        if self.backend == "cuda":
            return self.torch.randn(*shape, device="cuda", dtype=self.torch.float32,
                                    generator=self.gen)
        return self.gen.standard_normal(shape, dtype=self.np.float32)

    def put(self, a):
        """A host numpy array where this backend's operations run."""
        if self.backend == "cuda":
            return self.torch.as_tensor(a, device="cuda")
        return a

    def empty(self, n):
        if self.backend == "cuda":
            return self.torch.empty(n, device="cuda", dtype=self.torch.float32)
        return self.np.empty(n, self.np.float32)

    def matmul(self, a, b, tf32: bool = False):
        if self.backend == "cuda":
            old = self.torch.backends.cuda.matmul.allow_tf32
            self.torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                return self.torch.matmul(a, b)
            finally:
                self.torch.backends.cuda.matmul.allow_tf32 = old
        return self.reference("matmul", a, b)

    def add(self, a, b):
        return a + b if self.backend == "cuda" else self.reference("add", a, b)

    def mul(self, a, b):
        return a * b if self.backend == "cuda" else self.reference("mul", a, b)

    def transpose(self, x, perm):
        return x.permute(*perm).contiguous() if self.backend == "cuda" else \
            self.np.ascontiguousarray(self.reference("permute", x, perm=perm))

    def silu(self, x):
        if self.backend == "cuda":
            return self.torch.nn.functional.silu(x)
        return self.reference("silu", x)

    def relu(self, x):
        return x.clamp_min(0) if self.backend == "cuda" else self.reference("relu", x)

    def rms_norm(self, x, w):
        if self.backend == "cuda":
            from ..stdlib.rms_norm import DEFAULT_EPS

            return w * x * self.torch.rsqrt((x * x).mean(-1, keepdim=True) + DEFAULT_EPS)
        return self.reference("rms_norm", x, w)

    def sliced_softmax(self, x, k):
        if self.backend != "cuda":
            return self.reference("sliced_softmax", x, k)
        out = x.clone()
        out[..., :k] = self.torch.softmax(x[..., :k], -1)
        return out

    def complex_mul(self, a, b):
        if self.backend != "cuda":
            return self.reference("complex_hadamard_product", a, b)
        ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
        return self.torch.stack([ar * br - ai * bi, ar * bi + ai * br], -1)

    def replaced(self, y, part, begin: int):
        """``y`` with rows ``begin..`` replaced by ``part`` (a copy)."""
        if self.backend != "cuda":
            return self.reference("replace_slice", y, part, begin, begin + part.shape[0])
        want = y.clone()
        want[begin:begin + part.shape[0]] = part
        return want

    def cast(self, x, dtype: str):
        """``x`` in ``dtype`` ("float32", "float16", "bfloat16")."""
        if dtype == "float32":
            return x
        if self.backend == "cuda":
            return x.to(getattr(self.torch, dtype))
        if dtype == "bfloat16":
            import ml_dtypes

            return x.astype(ml_dtypes.bfloat16)
        return x.astype(self.np.float16)

    def index(self, v):
        if self.backend == "cuda":
            return self.torch.tensor([v], device="cuda", dtype=self.torch.int64)
        return self.np.array([v], dtype=self.np.int64)

    def rel_error(self, got, want) -> float:
        if self.backend == "cuda":
            got, want = got.double(), want.double()
            return float((got - want).norm() / max(float(want.norm()), 1e-30))
        got, want = got.astype("float64"), want.astype("float64")
        return float(self.np.linalg.norm(got - want) / max(self.np.linalg.norm(want), 1e-30))


GEMM_SIZES, EMU_GEMM_SIZES = (4096, 8192), (128,)
# precision of each GEMM node: (ops.matmul's precision, operand dtype, cuBLAS's name)
GEMMS = {"matmul": ("fp32", "float32", "cuBLAS SGEMM (TF32 off)"),
         "matmul_tf32": ("tf32", "float32", "cuBLAS TF32 (allow_tf32)"),
         "matmul_f16": ("fp32", "float16", "cuBLAS HGEMM (fp32 accumulate)"),
         "matmul_bf16": ("fp32", "bfloat16", "cuBLAS BF16 GEMM (fp32 accumulate)")}


def _matmul_cases(env: _Env, small: bool, nodes: set, variants: bool = False) -> list[Case]:
    """The four GEMMs at both sizes, or (``variants``) the kernel variants after them."""
    from ..stdlib import array_ops as ops

    out = []

    def mm(node, sa, sb, label, tf32=False, runner=None, dtype="float32"):
        if node not in nodes:
            return
        a, b = env.cast(env.randn(*sa), dtype), env.cast(env.randn(*sb), dtype)
        flops = 2.0
        for d in sa:
            flops *= d
        flops *= sb[-1]
        run = runner(a, b) if runner is not None else (lambda: ops.matmul(a, b))
        lib = "numpy" if env.backend != "cuda" else _cublas_name(dtype, tf32)
        ref = Ref("torch.matmul" if env.backend == "cuda" else "numpy matmul", lib,
                  lambda: env.matmul(a, b, tf32))
        out.append(Case(node, label, "flops", flops, run, lambda: env.matmul(a, b, tf32),
                        None, tol=1e-2 if tf32 or dtype != "float32" else 1e-4, refs=[ref],
                        extra={"dtype": dtype, "tf32": tf32}))

    for n in (EMU_GEMM_SIZES if small else GEMM_SIZES) if not variants else ():
        for node, (prec, dtype, _) in GEMMS.items():  # the four precisions, two sizes
            mm(node, (n, n), (n, n), f"{n}^3", tf32=prec == "tf32", dtype=dtype,
               runner=lambda a, b, prec=prec: (lambda: ops.matmul(a, b, precision=prec)))
    if not variants:
        return out
    m, odd, bt, bm, v = (64, 50, 2, 32, 96) if small else (4096, 4000, 16, 1024, 8192)
    # the single-stage big-tile kernel (stages=1), against cuBLAS and, in the same run,
    # the double-buffered default of the row above
    m2 = 128 if small else m  # the big-tile kernel needs m % 128 == 0
    mm("matmul_1stage", (m2, m2), (m2, m2), f"{m2}^3 1-stage",
       runner=lambda a, b: (lambda: ops.matmul(a, b, stages=1)))
    # the async-copy pipeline (2 stages of cp.async), in the same run
    mm("matmul_async", (m2, m2), (m2, m2), f"{m2}^3 async 2",
       runner=lambda a, b: (lambda: ops.matmul(a, b, async_stages=2)))
    # bk = 16 (one barrier per 1024 FFMA), two stages: at 2 blocks per SM (ptxas spills
    # on sm_90 at the 128-register cap) and at 1 (147 registers, no spill)
    from ..stdlib.matmul import W64, matmul_with

    for node, mb in (("matmul_bk16", 2), ("matmul_bk16_b1", 1)):
        mm(node, (m2, m2), (m2, m2), f"{m2}^3 bk16 {mb} block{'s' if mb > 1 else ''}/SM",
           runner=lambda a, b, mb=mb: (lambda: matmul_with(a, b, bk=16, min_blocks=mb)))
    # 4 warps of 64x64, 8x16 outputs per thread, bk = 16 (cuBLAS's SIMT shape)
    mm("matmul_w64", (m2, m2), (m2, m2), f"{m2}^3 64x64 warps 8x16",
       runner=lambda a, b: (lambda: matmul_with(a, b, **W64)))
    mm("matmul_4000", (odd, odd), (odd, odd), f"{odd}^3")
    mm("bmatmul", (bt, bm, bm), (bt, bm, bm), f"{bt}x{bm}^3")
    mm("vecmat", (v,), (v, v), f"{v}@{v}x{v}")
    # the TF32 kernel with its tiles in a 3-stage circular buffer of cp.async copies
    mt = 128 if small else m
    mm("matmul_tf32_async", (mt, mt), (mt, mt), f"{mt}^3 tf32 async 3", tf32=True,
       runner=lambda a, b: (lambda: ops.matmul(a, b, precision="tf32", async_stages=3)))
    # the sm_80 half GEMM (multistage cp.async, 128x256 tiles), whatever the device
    from ..stdlib.matmul_sm80 import matmul_sm80

    for n in (EMU_GEMM_SIZES if small else GEMM_SIZES):
        for dtype in ("float16", "bfloat16"):
            node = f"matmul_{'f16' if dtype == 'float16' else 'bf16'}_sm80"
            mm(node, (n, n), (n, n), f"{n}^3 sm80", dtype=dtype,
               runner=lambda a, b: (lambda: matmul_sm80(a, b)))
    # the sm_90a GEMM derived by primitives (TMA, wgmma, barrier rings): a @ bt^T with
    # bt = b^T made once, outside the timing (the reference multiplies a @ b)
    from ..stdlib.matmul_sm90 import TALL, matmul_nt_sm90

    for n in (EMU_GEMM_SIZES if small else GEMM_SIZES):
        for dtype in ("float16", "bfloat16"):
            node = f"matmul_{'f16' if dtype == 'float16' else 'bf16'}_sm90"
            mm(node, (n, n), (n, n), f"{n}^3 sm90 (TMA + wgmma)", dtype=dtype,
               runner=lambda a, b: _nt_runner(a, b, matmul_nt_sm90))
    # its TF32 twin (f32 operands read as tf32, tf32 wgmma), against cuBLAS TF32
    # (torch.matmul with allow_tf32) in the same run
    from ..stdlib.matmul_sm90_tf32 import matmul_tf32_sm90

    for n in (EMU_GEMM_SIZES if small else GEMM_SIZES):
        mm("matmul_tf32_sm90", (n, n), (n, n), f"{n}^3 tf32 sm90 (TMA + wgmma)", tf32=True,
           runner=lambda a, b: _nt_runner(a, b, matmul_tf32_sm90))
    # the persistent tile scheduler (persist_blocks: as many blocks as fill the
    # multiprocessors, each walking a column of tiles), f16
    for n in (EMU_GEMM_SIZES if small else GEMM_SIZES):
        mm("matmul_f16_sm90_persistent", (n, n), (n, n), f"{n}^3 sm90 persistent",
           dtype="float16", runner=lambda a, b: _nt_runner(
               a, b, lambda x, y: matmul_nt_sm90(x, y, persistent=True)))
    # the same 128 x 256 tiles in row order, beside the default column groups
    # (raster.with_column_groups): the block order's share, in the same run
    wide = dict(bn=256, wgs=2, stages=4)
    for n in (EMU_GEMM_SIZES if small else GEMM_SIZES):
        mm("matmul_f16_sm90_rows", (n, n), (n, n), f"{n}^3 sm90 row order", dtype="float16",
           runner=lambda a, b: _nt_runner(
               a, b, lambda x, y: matmul_nt_sm90(x, y, **wide, bk=64, raster=0)))
        mm("matmul_tf32_sm90_rows", (n, n), (n, n), f"{n}^3 tf32 sm90 row order", tf32=True,
           runner=lambda a, b: _nt_runner(
               a, b, lambda x, y: matmul_tf32_sm90(x, y, **wide, bk=32, columns=0)))
    # the 256 x 128 tile (two m64 tiles per consumer warpgroup) at the same shapes, beside
    # the default 128 x 256
    for n in (EMU_GEMM_SIZES if small else GEMM_SIZES):
        mm("matmul_f16_sm90_tall", (n, n), (n, n), f"{n}^3 sm90 256x128", dtype="float16",
           runner=lambda a, b: _nt_runner(a, b, lambda x, y: matmul_nt_sm90(x, y, **TALL)))
    # both batched (blocks over the batch): [bt, bm, bm] @ [bt, bm, bm]^T
    mm("bmatmul_f16_sm90", (bt, bm, bm), (bt, bm, bm), f"{bt}x{bm}^3 f16 sm90", dtype="float16",
       runner=lambda a, b: _nt_runner(a, b, matmul_nt_sm90))
    mm("bmatmul_tf32_sm90", (bt, bm, bm), (bt, bm, bm), f"{bt}x{bm}^3 tf32 sm90", tf32=True,
       runner=lambda a, b: _nt_runner(a, b, matmul_tf32_sm90))
    return out


def _cublas_name(dtype: str, tf32: bool) -> str:
    """What cuBLAS runs for ``torch.matmul`` on operands of ``dtype``."""
    key = {"float16": "matmul_f16", "bfloat16": "matmul_bf16"}.get(
        dtype, "matmul_tf32" if tf32 else "matmul")
    return GEMMS[key][2]


def _nt_runner(a, b, fn):
    """``fn(a, bt)`` with ``bt`` the contiguous transpose of ``b`` (its last two axes),
    made once."""
    bt = b.transpose(-1, -2).contiguous() if hasattr(b, "contiguous") else \
        b.swapaxes(-1, -2).copy()
    return lambda: fn(a, bt)


def _bandwidth_cases(env: _Env, small: bool, nodes: set, l2: int | None) -> list[Case]:
    from ..stdlib import array_ops as ops

    out = []
    sizes, cubes = (EMU_SIZES, EMU_CUBES) if small else (GPU_SIZES, GPU_CUBES)
    for (r, c), cube in zip(sizes, cubes):
        el = r * c
        nb = 4 * el
        fits = l2 is not None and 3 * nb <= l2  # all arrays of an add at once
        x, y, col = env.randn(r, c), env.randn(r, c), env.randn(r, 1)
        h = r // 2
        part = env.randn(h, c)
        b0, e0 = env.index(r // 4), env.index(r // 4 + h)
        xc = env.randn(*cube)

        def add(node, amount, run, want, elements=el):
            if node in nodes:
                out.append(Case(node, "x".join(map(str, cube if "3d" in node else (r, c))),
                                "bytes", amount, run, want, None, elements, fits))

        add("add", 3 * nb, lambda x=x, y=y: ops.add(x, y), lambda x=x, y=y: env.add(x, y))
        add("add_bcast", 2 * nb + 4 * r, lambda x=x, col=col: ops.add(x, col),
            lambda x=x, col=col: env.add(x, col))
        add("mul", 3 * nb, lambda x=x, y=y: ops.mul(x, y), lambda x=x, y=y: env.mul(x, y))
        add("relu", 2 * nb, lambda x=x: ops.relu(x), lambda x=x: env.relu(x))
        add("silu", 2 * nb, lambda x=x: ops.silu(x), lambda x=x: env.silu(x))
        add("permute2d", 2 * nb, lambda x=x: ops.permute(x, (1, 0)),
            lambda x=x: env.transpose(x, (1, 0)))
        cel = 1
        for d in cube:
            cel *= d
        add("permute3d_021", 8 * cel, lambda xc=xc: ops.permute(xc, (0, 2, 1)),
            lambda xc=xc: env.transpose(xc, (0, 2, 1)), cel)
        add("permute3d_210", 8 * cel, lambda xc=xc: ops.permute(xc, (2, 1, 0)),
            lambda xc=xc: env.transpose(xc, (2, 1, 0)), cel)
        q = r // 4  # bound as default arguments: the lambdas run after the loop
        add("slice", 2 * 4 * h * c, lambda x=x, q=q, h=h: ops.slice(x, q, q + h),
            lambda x=x, q=q, h=h: x[q:q + h], h * c)
        # in place and idempotent: y[q:q+h] = part each time
        add("replace_slice", 2 * 4 * h * c,
            lambda y=y, part=part, b0=b0, e0=e0: ops.replace_slice(y, part, b0, e0),
            lambda y=y, part=part, q=q: env.replaced(y, part, q), h * c)
        # the whole-model nodes: one row-wise reduction, a prefix softmax, a broadcast
        # complex product (bytes: x read and written, the row of w / b read once)
        w = env.randn(c)
        add("rms_norm", 2 * nb + 4 * c, lambda x=x, w=w: ops.rms_norm(x, w),
            lambda x=x, w=w: env.rms_norm(x, w))
        k = c // 2
        add("sliced_softmax", 2 * nb, lambda x=x, k=k: ops.sliced_softmax(x, k),
            lambda x=x, k=k: env.sliced_softmax(x, k))
        xz, bz = x.reshape(r, c // 2, 2), y[:1].reshape(1, c // 2, 2)
        add("complex_hadamard", 2 * nb + 4 * c,
            lambda xz=xz, bz=bz: ops.complex_hadamard_product(xz, bz),
            lambda xz=xz, bz=bz: env.complex_mul(xz, bz))
    return out


def table_nodes() -> list[str]:
    """Nodes of the node table with a bench example and no case of their own above
    (a node a user or a test registered): timed as bandwidth nodes."""
    from ..stdlib.node_table import all_nodes

    return [n.name for n in all_nodes() if n.example is not None and not n.bench]


def _table_cases(env: _Env, small: bool, nodes: set, l2: int | None) -> list[Case]:
    """A table node on its declaration's example operands (``example(rng, rows,
    cols)``), against its reference; bytes: its operands and its result, once."""
    import numpy as np

    from ..stdlib import array_ops as ops
    from ..stdlib.node_table import get

    out = []
    for name in [n for n in table_nodes() if n in nodes]:
        decl = get(name)
        for r, c in (EMU_SIZES if small else GPU_SIZES):
            host, attrs = decl.example(np.random.default_rng(0), r, c)
            want = decl.reference(*host, **attrs)
            amount = sum(a.nbytes for a in host) + 4 * want.size
            dev = [env.put(a) for a in host]
            out.append(Case(name, f"{r}x{c}", "bytes", amount,
                            lambda dev=dev, attrs=attrs, op=getattr(ops, name): op(*dev, **attrs),
                            lambda want=want: env.put(want.astype(np.float32)), None,
                            amount // 8, l2 is not None and amount <= l2))
    return out


def _need_gpu() -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device is visible to PyTorch"
    from ..runtime.driver import driver_available

    if not driver_available():
        return "no NVIDIA driver"
    return None


def _driver_version() -> str | None:
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() \
            else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def _peak(dev, kind: str, node: str) -> float | None:
    """The roofline a row is measured against: HBM bandwidth for bytes, and for FLOPs
    the peak of the units the node's kernel runs on (tensor cores in TF32 or halves,
    CUDA cores otherwise)."""
    if dev is None:
        return None
    if kind == "bytes":
        return dev.bandwidth
    if node.startswith("matmul_tf32"):
        return dev.tf32_flops
    if node.startswith(("matmul_f16", "matmul_bf16")):
        return dev.half_flops
    return dev.fp32_flops


def run_bench(backend: str | None = None, nodes: list[str] | None = None, reps: int = 15,
              warmup: int = 3, device: str | None = None, log=print, on_rows=None, *,
              target: str | None = None) -> dict:
    """Time the cases on ``backend`` (``"cuda"`` / ``"emulator"``; ``target=``: its old,
    deprecated spelling); the results as a dict (what ``--out`` writes).
    ``on_rows(res)`` is called with the results so far after each case (``--out``
    writes them as the run goes: a run stopped by a time limit keeps what it had)."""
    from .attention_cases import attention_cases
    from .meta import finish, provenance

    backend = backend_keyword(backend, target, "gpudsl.bench.run_bench")
    if backend is None or nodes is None:
        raise TypeError("run_bench: give the backend and the nodes")
    small = backend == "emulator"
    facts, dev = _device_facts(backend, device)
    env = _Env(backend)
    wanted = set(nodes)
    run = Run(backend, env, reps, warmup, dev, log, _peak)
    rows: list = []
    res = {"emulated": small, "backend": backend, "target": backend, **facts,
           "device_table": dev.name if dev else None, "driver": _driver_version()
           if backend == "cuda" else None, "reps": reps, "warmup": warmup,
           **provenance(), "complete": False, "copy_references": [], "results": rows}
    for make in (lambda: _matmul_cases(env, small, wanted),  # in priority order
                 lambda: attention_cases(env, small, wanted),
                 lambda: _bandwidth_cases(env, small, wanted, facts.get("l2_bytes")),
                 lambda: _matmul_cases(env, small, wanted, variants=True),
                 lambda: _table_cases(env, small, wanted, facts.get("l2_bytes"))):
        for c in make():
            rows += run.rows(c)
            res["copy_references"] = list(run.copies.values())
            if on_rows:
                on_rows(res)
    res.update(finish(res), complete=True)
    return res


def _device_facts(backend: str, device: str | None):
    """(what the run measures on: device name, L2 size...; the device's table of peaks,
    or None: the emulator, or a device the table does not know)."""
    from ..perf.devices import device as device_table
    from ..runtime.timing import device_facts

    facts = device_facts() if backend == "cuda" else {
        "device": f"cpu {platform.machine()} (emulator)", "l2_bytes": None}
    dev = None
    if backend == "cuda":
        try:
            dev = device_table(device or facts["device"] or "H100")
        except Exception:
            dev = None
    return facts, dev


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="gpudsl bench",
                                 description=__doc__.split("\n\n")[0].replace("``", "'"))
    ap.add_argument("--nodes", default=",".join(n for n in bench_nodes()
                                                if n != "attention_suite"),
                    help="comma-separated subset (default: all but attention_suite, the "
                    "FlashAttention sweep, minutes on a GPU)")
    ap.add_argument("--backend", choices=["cuda", "emulator"], default=None,
                    help="where the cases run (default cuda); emulator: small sizes on the "
                    "CPU, figures labelled emulated")
    ap.add_argument("--target", choices=["cuda", "emulator"], default=None,
                    help=argparse.SUPPRESS)  # the old name of --backend
    ap.add_argument("--reps", type=int, default=None, help="default 15 (emulator: 3)")
    ap.add_argument("--warmup", type=int, default=None, help="default 3 (emulator: 1)")
    ap.add_argument("--device", default=None, help="device table for the roofline "
                    "(default: from the device's name)")
    ap.add_argument("--out", help="write the results (JSON) with device, driver, date, command")
    ns = ap.parse_args(argv)
    nodes = [n for n in ns.nodes.split(",") if n]
    known = bench_nodes()
    bad = [n for n in nodes if n not in known]
    if bad:
        print(f"gpudsl bench: unknown node(s) {', '.join(bad)}; nodes: {', '.join(known)}",
              file=sys.stderr)
        return 2
    if ns.target is not None:
        print("gpudsl bench: --target is deprecated (a target is an architecture now); "
              "write --backend", file=sys.stderr)
        if ns.backend not in (None, ns.target):
            print("gpudsl bench: --backend and --target disagree", file=sys.stderr)
            return 2
    ns.backend = ns.backend or ns.target or "cuda"
    emu = ns.backend == "emulator"
    if emu:
        from ..stdlib.array_ops import backend

        if backend() != "emulator":
            print("gpudsl bench: --backend emulator needs ops to run on the emulator; set "
                  "GPUDSL_NO_GPU=1 on a GPU machine", file=sys.stderr)
            return 2
    else:
        why = _need_gpu()
        if why:
            print(f"gpudsl bench needs an NVIDIA GPU with PyTorch: {why}. Run it on a GPU "
                  "machine (gpudsl bench --out results.json), or try --backend emulator",
                  file=sys.stderr)
            return 2
    if emu:
        print("EMULATED: CPU times of the emulator at small sizes; no GPU figure here")
    print(f"{'node':16} {'size':>14} {'L2':4} {'achieved':>14}  {'':17} reference ratio")
    stamp = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), command=" ".join(["gpudsl", "bench", *map(shlex.quote, argv)]),
        host=platform.node())

    def write(res):
        if ns.out:
            tmp = ns.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump({**res, **stamp}, f, indent=1)
            os.replace(tmp, ns.out)

    res = run_bench(ns.backend, nodes, ns.reps or (3 if emu else 15),
                    ns.warmup if ns.warmup is not None else (1 if emu else 3), ns.device,
                    on_rows=write)
    write(res)
    res.update(stamp)
    if ns.out:
        print(f"results: {ns.out}")
    bad_rows = [r for r in res["results"] if r.get("status") in ("error", "wrong")]
    return 1 if bad_rows else 0
