"""``gpudsl bench``: every standard-library node against its reference, measured in the
same run, with the achieved rate and the fraction of the device's roofline.

Each row has the node's achieved TFLOP/s (matmul family) or GB/s (bandwidth-bound
nodes: bytes read + written once), the fraction of the device's peak
(:mod:`gpudsl.perf.devices`: FP32 on CUDA cores, HBM bandwidth), and the ratio to
its reference timed in the same run the same way: matmul against ``torch.matmul``
with TF32 off (cuBLAS SGEMM), bandwidth nodes against a device-to-device copy of
the same number of elements (its read + write bytes per second).  Bandwidth nodes
run at several sizes: some fit in the L2 (timed twice: L2 flushed before each
repetition, ``cold``, and not, ``warm``) and some are far above it.  Every time
comes from :func:`gpudsl.runtime.timing.measure` (CUDA events, warm-up, L2 flush, a
spin kernel that lets the host enqueue ahead so the events time the device's work,
median and interquartile range); ``host us/call`` beside it is the host's own time per
call, the launch overhead.  Each node's result is compared with its
reference once before it is timed; a wrong one is reported, never timed.

``--target emulator`` runs the same cases at small sizes on the CPU emulator (numpy
references, perf_counter): the figures are labelled emulated, have no roofline
fraction, and only show that the benchmark runs (CI runs it).
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

NODES = ["matmul", "matmul_1stage", "matmul_async", "matmul_4000", "bmatmul", "vecmat", "matmul_tf32",
         "matmul_tf32_async", "matmul_f16", "add",
         "add_bcast",
         "mul", "relu", "silu", "permute2d", "permute3d_021", "permute3d_210", "slice",
         "replace_slice", "rms_norm", "sliced_softmax", "complex_hadamard", "attention"]
MATMULS = {"matmul", "matmul_1stage", "matmul_async", "matmul_4000", "bmatmul", "vecmat", "matmul_tf32",
           "matmul_tf32_async", "matmul_f16"}

# (rows, cols) of the 2-D bandwidth cases: 4 MB and 16 MB per array fit in a 50 MB L2,
# 256 MB is five times it.  3-D permutes: the same element counts.
GPU_SIZES = [(1024, 1024), (2048, 2048), (8192, 8192)]
GPU_CUBES = [(4, 512, 512), (16, 512, 512), (64, 1024, 1024)]
EMU_SIZES = [(64, 96), (128, 256)]
EMU_CUBES = [(4, 16, 24), (8, 32, 32)]


@dataclass
class Case:
    node: str
    size: str
    kind: str  # "flops" or "bytes"
    amount: float  # FLOPs, or bytes read + written
    run: Callable  # the gpudsl node; returns its result
    want: Callable  # the expected result (reference library)
    reference: Callable | None  # timed reference (matmul); None: the copy of `elements`
    elements: int = 0  # elements of the copy reference
    l2_resident: bool = False
    reference_name: str | None = None  # the timed reference's name (flops rows)


class _Env:
    """Arrays and reference operations of one target: PyTorch on the GPU, numpy on the
    emulator."""

    def __init__(self, target: str, seed: int = 0):
        self.target = target
        if target == "cuda":
            import torch

            self.torch = torch
            self.gen = torch.Generator(device="cuda").manual_seed(seed)
        else:
            import numpy as np

            self.np = np
            self.gen = np.random.default_rng(seed)

    def randn(self, *shape):
        if self.target == "cuda":
            return self.torch.randn(*shape, device="cuda", dtype=self.torch.float32,
                                    generator=self.gen)
        return self.gen.standard_normal(shape, dtype=self.np.float32)

    def put(self, a):
        """A host numpy array where this target's operations run."""
        if self.target == "cuda":
            return self.torch.as_tensor(a, device="cuda")
        return a

    def empty(self, n):
        if self.target == "cuda":
            return self.torch.empty(n, device="cuda", dtype=self.torch.float32)
        return self.np.empty(n, self.np.float32)

    def matmul(self, a, b, tf32: bool = False):
        if self.target == "cuda":
            old = self.torch.backends.cuda.matmul.allow_tf32
            self.torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                return self.torch.matmul(a, b)
            finally:
                self.torch.backends.cuda.matmul.allow_tf32 = old
        return a @ b

    def transpose(self, x, perm):
        return x.permute(*perm).contiguous() if self.target == "cuda" else \
            self.np.ascontiguousarray(self.np.transpose(x, perm))

    def silu(self, x):
        if self.target == "cuda":
            return self.torch.nn.functional.silu(x)
        return x / (1 + self.np.exp(-x))

    def relu(self, x):
        return x.clamp_min(0) if self.target == "cuda" else self.np.maximum(x, 0)

    def rms_norm(self, x, w):
        if self.target == "cuda":
            return w * x * self.torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5)
        return w * x / self.np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)

    def sliced_softmax(self, x, k):
        out = x.clone() if self.target == "cuda" else x.copy()
        out[..., :k] = (self.torch.softmax(x[..., :k], -1) if self.target == "cuda" else
                        _np_softmax(self.np, x[..., :k]))
        return out

    def complex_mul(self, a, b):
        ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
        stack = self.torch.stack if self.target == "cuda" else self.np.stack
        return stack([ar * br - ai * bi, ar * bi + ai * br], -1)

    def half(self, x):
        return x.half() if self.target == "cuda" else x.astype(self.np.float16)

    def index(self, v):
        if self.target == "cuda":
            return self.torch.tensor([v], device="cuda", dtype=self.torch.int64)
        return self.np.array([v], dtype=self.np.int64)

    def rel_error(self, got, want) -> float:
        if self.target == "cuda":
            got, want = got.double(), want.double()
            return float((got - want).norm() / max(float(want.norm()), 1e-30))
        got, want = got.astype("float64"), want.astype("float64")
        return float(self.np.linalg.norm(got - want) / max(self.np.linalg.norm(want), 1e-30))


def _matmul_cases(env: _Env, small: bool, nodes: set) -> list[Case]:
    from .stdlib import ops

    out = []

    def mm(node, sa, sb, label, tf32=False, runner=None, half=False):
        if node not in nodes:
            return
        a, b = env.randn(*sa), env.randn(*sb)
        if half:  # float16 operands: the reference is cuBLAS HGEMM (numpy's float16 here)
            a, b = env.half(a), env.half(b)
        flops = 2.0
        for d in sa:
            flops *= d
        flops *= sb[-1]
        run = runner(a, b) if runner is not None else (lambda: ops.matmul(a, b))
        out.append(Case(node, label, "flops", flops, run, lambda: env.matmul(a, b, tf32),
                        lambda: env.matmul(a, b, tf32)))

    m, odd, bt, bm, v = (64, 50, 2, 32, 96) if small else (4096, 4000, 16, 1024, 8192)
    mm("matmul", (m, m), (m, m), f"{m}^3")
    # the single-stage big-tile kernel (stages=1), against cuBLAS and, in the same run,
    # the double-buffered default of the row above
    m2 = 128 if small else m  # the big-tile kernel needs m % 128 == 0
    mm("matmul_1stage", (m2, m2), (m2, m2), f"{m2}^3 1-stage",
       runner=lambda a, b: (lambda: ops.matmul(a, b, stages=1)))
    # the async-copy pipeline (2 stages of cp.async), in the same run
    mm("matmul_async", (m2, m2), (m2, m2), f"{m2}^3 async 2",
       runner=lambda a, b: (lambda: ops.matmul(a, b, async_stages=2)))
    mm("matmul_4000", (odd, odd), (odd, odd), f"{odd}^3")
    mm("bmatmul", (bt, bm, bm), (bt, bm, bm), f"{bt}x{bm}^3")
    mm("vecmat", (v,), (v, v), f"{v}@{v}x{v}")
    # the TF32 tensor-core path (gpudsl.stdlib.matmul_tf32, through ops.matmul's
    # precision="tf32"); its reference is cuBLAS TF32 (torch.matmul with TF32 allowed);
    # its tiles need m % 128 == 0, so the emulator mode runs 128^3
    mt = 128 if small else m
    mm("matmul_tf32", (mt, mt), (mt, mt), f"{mt}^3 tf32", tf32=True,
       runner=lambda a, b: (lambda: ops.matmul(a, b, precision="tf32")))
    # the TF32 kernel with its tiles in a 3-stage circular buffer of cp.async copies
    mm("matmul_tf32_async", (mt, mt), (mt, mt), f"{mt}^3 tf32 async 3", tf32=True,
       runner=lambda a, b: (lambda: ops.matmul(a, b, precision="tf32", async_stages=3)))
    # float16 operands on the mma.m16n8k16 tensor-core kernel (float32 accumulation),
    # against torch.matmul of the same halves (cuBLAS HGEMM); tiles of 64 x 128 x 32
    mm("matmul_f16", (mt, mt), (mt, mt), f"{mt}^3 f16", half=True)
    return out


def _attention_cases(env: _Env, small: bool, nodes: set) -> list[Case]:
    """Fused attention at a decode shape (one query row per head against the whole
    cache) and a causal prefill shape (as many rows as keys), against PyTorch's
    ``scaled_dot_product_attention`` (numpy's float64 reference on the emulator).
    FLOPs: the two products, ``4 H M L D`` (the causal one counts its whole square)."""
    from .stdlib import ops

    if "attention" not in nodes:
        return []
    out = []
    shapes = ([(2, 1, 64, 64, False), (2, 32, 32, 64, True)] if small else
              [(32, 1, 4096, 128, False), (32, 1024, 1024, 128, True)])
    for h, m, n, d, causal in shapes:
        q, k, v = env.randn(h, m, d), env.randn(h, n, d), env.randn(h, n, d)
        if env.target == "cuda":
            sdpa = env.torch.nn.functional.scaled_dot_product_attention

            def ref(q=q, k=k, v=v, causal=causal):
                return sdpa(q, k, v, is_causal=causal)

            def want(q=q, k=k, v=v, causal=causal):
                return sdpa(q.double(), k.double(), v.double(), is_causal=causal)
            name = "torch scaled_dot_product_attention"
        else:
            from .stdlib.attention import attention_reference

            def want(q=q, k=k, v=v, causal=causal):
                return attention_reference(q, k, v, causal)
            ref, name = want, "numpy float64 reference"
        out.append(Case("attention", f"{h}x{m}x{n}x{d}{' causal' if causal else ''}",
                        "flops", 4.0 * h * m * n * d,
                        lambda q=q, k=k, v=v, causal=causal: ops.attention(q, k, v, causal),
                        want, ref, reference_name=name))
    return out


def _bandwidth_cases(env: _Env, small: bool, nodes: set, l2: int | None) -> list[Case]:
    from .stdlib import ops

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

        add("add", 3 * nb, lambda x=x, y=y: ops.add(x, y), lambda x=x, y=y: x + y)
        add("add_bcast", 2 * nb + 4 * r, lambda x=x, col=col: ops.add(x, col),
            lambda x=x, col=col: x + col)
        add("mul", 3 * nb, lambda x=x, y=y: ops.mul(x, y), lambda x=x, y=y: x * y)
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
            lambda y=y, part=part, q=q: _replaced(y, part, q), h * c)
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
    from .stdlib.node_table import all_nodes

    return [n.name for n in all_nodes() if n.example is not None and n.name not in NODES]


def _table_cases(env: _Env, small: bool, nodes: set, l2: int | None) -> list[Case]:
    """A table node on its declaration's example operands (``example(rng, rows,
    cols)``), against its reference; bytes: its operands and its result, once."""
    import numpy as np

    from .stdlib import ops
    from .stdlib.node_table import get

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


def _np_softmax(np, x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _replaced(y, part, begin):
    want = y.clone() if hasattr(y, "clone") else y.copy()
    want[begin:begin + part.shape[0]] = part
    return want


def _need_gpu() -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device is visible to PyTorch"
    from .runtime.driver import driver_available

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
    if node.startswith("matmul_f16"):
        return dev.half_flops
    return dev.fp32_flops


def run_bench(target: str, nodes: list[str], reps: int = 15, warmup: int = 3,
              device: str | None = None, log=print) -> dict:
    """Time the cases; the results as a dict (what ``--out`` writes)."""
    small = target == "emulator"
    facts, dev = _device_facts(target, device)
    env = _Env(target)
    wanted = set(nodes)
    cases = (_matmul_cases(env, small, wanted) + _attention_cases(env, small, wanted) +
             _bandwidth_cases(env, small, wanted, facts.get("l2_bytes")) +
             _table_cases(env, small, wanted, facts.get("l2_bytes")))
    run = _Run(target, env, reps, warmup, dev, log)
    rows = [r for c in cases for r in run.rows(c)]
    return {"emulated": small, "target": target, **facts,
            "device_table": dev.name if dev else None, "driver": _driver_version()
            if target == "cuda" else None, "reps": reps, "warmup": warmup,
            "copy_references": list(run.copies.values()), "results": rows}


def _device_facts(target: str, device: str | None):
    """(what the run measures on: device name, L2 size...; the device's table of peaks,
    or None: the emulator, or a device the table does not know)."""
    from .perf.devices import device as device_table
    from .runtime.timing import device_facts

    facts = device_facts() if target == "cuda" else {
        "device": f"cpu {platform.machine()} (emulator)", "l2_bytes": None}
    dev = None
    if target == "cuda":
        try:
            dev = device_table(device or facts["device"] or "H100")
        except Exception:
            dev = None
    return facts, dev


class _Run:
    """One benchmark run: how it times (``measure`` with these repetitions), the device's
    peaks, where it logs, and the copy references timed so far (``copies``)."""

    def __init__(self, target: str, env: _Env, reps: int, warmup: int, dev, log):
        self.target, self.env, self.reps, self.warmup = target, env, reps, warmup
        self.dev, self.log = dev, log
        self.copies: dict = {}

    def timed(self, fn, flush=True):
        from .runtime.timing import measure

        return measure(fn, target=self.target, warmup=self.warmup, reps=self.reps,
                       flush=flush)

    def copy_rate(self, elements: int, flush: bool) -> dict:
        """The copy reference of ``elements`` float32, timed once per (size, flush)."""
        key = (elements, flush)
        if key not in self.copies:
            env = self.env
            src, dst = env.randn(elements), env.empty(elements)
            fn = (lambda: dst.copy_(src)) if self.target == "cuda" else \
                (lambda: env.np.copyto(dst, src))
            t = self.timed(fn, flush)
            self.copies[key] = {"elements": elements, "flushed": flush,
                                "median_ms": t.median_ms, "spread_ms": t.spread_ms,
                                "bytes_per_s": t.rate(8 * elements)}
        return self.copies[key]

    def rows(self, c: Case) -> list[dict]:
        """The case's rows: one that says why when it fails or is wrong, else one per
        L2 state it is timed in (cold, and warm where its data fit in the L2)."""
        row = self.checked(c)
        if "status" in row:
            return [row]
        return [self.timed_row(c, row, flush)
                for flush in ([True, False] if c.l2_resident else [True])]

    def checked(self, c: Case) -> dict:
        """The case's row after comparing its result with the expected one once: with
        ``status`` ``error`` or ``wrong`` (and the reason, logged) when it fails."""
        row = {"node": c.node, "size": c.size, "kind": c.kind, "amount": c.amount}
        try:
            err = self.env.rel_error(c.run(), c.want())
        except Exception as e:  # a node that fails is a row, not the end of the run
            row.update(status="error", reason=f"{type(e).__name__}: {e}"[:500])
            self.log(f"{c.node:16} {c.size:>14}  ERROR {row['reason'][:80]}")
            return row
        tol = 1e-2 if c.node.startswith(("matmul_tf32", "matmul_f16")) else 1e-4
        row["rel_error"] = err
        if not err <= tol:
            row.update(status="wrong", reason=f"relative error {err:.3g} > {tol}")
            self.log(f"{c.node:16} {c.size:>14}  WRONG {row['reason']}")
        return row

    def timed_row(self, c: Case, row: dict, flush: bool) -> dict:
        """The case timed (the L2 flushed before each repetition or not) beside its
        reference, timed the same way; logged."""
        r = dict(row, status="ok", l2="cold" if flush else "warm")
        t = self.timed(c.run, flush)
        rate = t.rate(c.amount)
        r.update(timing=t.to_dict(), median_ms=t.median_ms, spread_ms=t.spread_ms,
                 rate=rate, unit="FLOP/s" if c.kind == "flops" else "B/s",
                 host_ms=t.host_ms)
        peak = _peak(self.dev, c.kind, c.node)
        r["roofline_fraction"] = rate / peak if peak else None
        if c.kind == "flops":
            self.flops_reference(r, c, t, flush)
        else:
            cp = self.copy_rate(c.elements, flush)
            r.update(reference=f"device copy of {c.elements} float32 (read + write)"
                     if self.target == "cuda" else "numpy copy",
                     reference_median_ms=cp["median_ms"], reference_rate=cp["bytes_per_s"])
            r["ratio"] = rate / cp["bytes_per_s"]
        scale, unit = (1e12, "TF/s") if c.kind == "flops" else (1e9, "GB/s")
        roof = f"{r['roofline_fraction']:6.1%}" if r["roofline_fraction"] else "   n/a"
        host = f"  host {t.host_ms * 1e3:.0f} us/call" if t.host_ms is not None else ""
        self.log(f"{c.node:16} {c.size:>14} {r['l2']:4} {rate / scale:9.2f} {unit}  "
                 f"roofline {roof}  vs ref {r['ratio']:6.1%}  "
                 f"({t.median_ms:.4f} ms +- {t.spread_ms:.4f}){host}")
        return r

    def flops_reference(self, r: dict, c: Case, t, flush: bool) -> None:
        """The matmul family's reference (cuBLAS through torch, or numpy), timed; its
        name, time and rate, and the ratio, into the row ``r``."""
        target = self.target
        rt = self.timed(c.reference, flush)
        r["reference_host_ms"] = rt.host_ms
        r.update(reference=c.reference_name or (
            "cuBLAS TF32" if c.node.startswith("matmul_tf32") else
            "cuBLAS HGEMM (torch.matmul, float16)" if c.node == "matmul_f16" and
            target == "cuda" else
            "cuBLAS SGEMM (torch.matmul, TF32 off)" if target == "cuda"
            else "numpy matmul"), reference_median_ms=rt.median_ms,
            reference_rate=rt.rate(c.amount))
        r["ratio"] = rt.median_ms / t.median_ms


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="gpudsl bench",
                                 description=__doc__.split("\n\n")[0].replace("``", "'"))
    ap.add_argument("--nodes", default=",".join(NODES), help="comma-separated subset")
    ap.add_argument("--target", choices=["cuda", "emulator"], default="cuda",
                    help="emulator: small sizes on the CPU, figures labelled emulated")
    ap.add_argument("--reps", type=int, default=None, help="default 15 (emulator: 3)")
    ap.add_argument("--warmup", type=int, default=None, help="default 3 (emulator: 1)")
    ap.add_argument("--device", default=None, help="device table for the roofline "
                    "(default: from the device's name)")
    ap.add_argument("--out", help="write the results (JSON) with device, driver, date, command")
    ns = ap.parse_args(argv)
    nodes = [n for n in ns.nodes.split(",") if n]
    known = NODES + table_nodes()
    bad = [n for n in nodes if n not in known]
    if bad:
        print(f"gpudsl bench: unknown node(s) {', '.join(bad)}; nodes: {', '.join(known)}",
              file=sys.stderr)
        return 2
    emu = ns.target == "emulator"
    if emu:
        from .stdlib.ops import target

        if target() != "emulator":
            print("gpudsl bench: --target emulator needs ops to run on the emulator; set "
                  "GPUDSL_NO_GPU=1 on a GPU machine", file=sys.stderr)
            return 2
    else:
        why = _need_gpu()
        if why:
            print(f"gpudsl bench needs an NVIDIA GPU with PyTorch: {why}. Run it on a GPU "
                  "machine (gpudsl bench --out results.json), or try --target emulator",
                  file=sys.stderr)
            return 2
    if emu:
        print("EMULATED: CPU times of the emulator at small sizes; no GPU figure here")
    print(f"{'node':16} {'size':>14} {'L2':4} {'achieved':>14}  {'':17} reference ratio")
    res = run_bench(ns.target, nodes, ns.reps or (3 if emu else 15),
                    ns.warmup if ns.warmup is not None else (1 if emu else 3), ns.device)
    res.update(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               command=" ".join(["gpudsl", "bench", *map(shlex.quote, argv)]),
               host=platform.node())
    if ns.out:
        with open(ns.out, "w") as f:
            json.dump(res, f, indent=1)
        print(f"results: {ns.out}")
    bad_rows = [r for r in res["results"] if r.get("status") in ("error", "wrong")]
    return 1 if bad_rows else 0
