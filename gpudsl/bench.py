"""``gpudsl bench``: each graph node at large sizes against its reference,
measured in the same run on the GPU.

References: matmul against ``torch.matmul`` with TF32 disabled (cuBLAS
SGEMM); bandwidth-bound nodes against the device-to-device copy rate (bytes
read + written per second of ``dst.copy_(src)``).  Working sets are far above
the L2 (>= 1 GB moved per launch), kernels are timed back to back with CUDA
events after a warm-up, and the median of the repetitions is reported.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys

NODES = ["matmul", "matmul_4000", "bmatmul", "vecmat", "add", "add_bcast", "mul", "relu",
         "silu", "permute2d", "permute3d_021", "permute3d_210", "slice", "replace_slice",
         "rms_norm", "sliced_softmax", "complex_hadamard"]


def _need_gpu():
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


def _time(fn, reps: int, inner: int) -> float:
    """Median seconds per call of ``fn`` over ``reps`` batches of ``inner``."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / inner)
    return statistics.median(times)


def _cases(torch, scale: int):
    """(node, gpudsl callable, reference kind, bytes moved or flops)."""
    from .stdlib import ops

    f32 = dict(device="cuda", dtype=torch.float32)
    n = 8192 * scale
    big = torch.randn(n, 8192, **f32)
    other = torch.randn(n, 8192, **f32)
    col = torch.randn(n, 1, **f32)
    el = big.numel() * 4
    m = 4096
    a, b = torch.randn(m, m, **f32), torch.randn(m, m, **f32)
    a4, b4 = torch.randn(4000, 4000, **f32), torch.randn(4000, 4000, **f32)  # tiles + edges
    ba, bb = torch.randn(16, 1024, 1024, **f32), torch.randn(16, 1024, 1024, **f32)
    v, w = torch.randn(8192, **f32), torch.randn(8192, 8192, **f32)
    cube = torch.randn(64 * scale, 1024, 1024, **f32)
    r = torch.randn(n // 2, 8192, **f32)
    beg = torch.tensor([n // 4], device="cuda", dtype=torch.int64)
    end = torch.tensor([n // 4 + n // 2], device="cuda", dtype=torch.int64)
    return {
        "matmul": (lambda: ops.matmul(a, b), lambda: torch.matmul(a, b), "flops",
                   2 * m ** 3),
        "matmul_4000": (lambda: ops.matmul(a4, b4), lambda: torch.matmul(a4, b4), "flops",
                        2 * 4000 ** 3),
        "bmatmul": (lambda: ops.matmul(ba, bb), lambda: torch.matmul(ba, bb), "flops",
                    2 * 16 * 1024 ** 3),
        "vecmat": (lambda: ops.matmul(v, w), lambda: torch.matmul(v, w), "flops",
                   2 * 8192 ** 2),
        "add": (lambda: ops.add(big, other), None, "bytes", 3 * el),
        "add_bcast": (lambda: ops.add(big, col), None, "bytes", 2 * el),
        "mul": (lambda: ops.mul(big, other), None, "bytes", 3 * el),
        "relu": (lambda: ops.relu(big), None, "bytes", 2 * el),
        "silu": (lambda: ops.silu(big), None, "bytes", 2 * el),
        "permute2d": (lambda: ops.permute(big, (1, 0)), None, "bytes", 2 * el),
        "permute3d_021": (lambda: ops.permute(cube, (0, 2, 1)), None, "bytes",
                          2 * cube.numel() * 4),
        "permute3d_210": (lambda: ops.permute(cube, (2, 1, 0)), None, "bytes",
                          2 * cube.numel() * 4),
        "slice": (lambda: ops.slice(big, n // 4, n // 4 + n // 2), None, "bytes", el),
        "replace_slice": (lambda: ops.replace_slice(big, r, beg, end), None, "bytes", el),
        "rms_norm": (lambda: ops.rms_norm(big, other[0]), None, "bytes", 2 * el),
        "sliced_softmax": (lambda: ops.sliced_softmax(big, 4096), None, "bytes", 2 * el),
        "complex_hadamard": (lambda: ops.complex_hadamard_product(
            big.reshape(n, 4096, 2), other[:1].reshape(1, 4096, 2)), None, "bytes", 2 * el),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpudsl bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default=",".join(NODES), help="comma-separated subset")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--inner", type=int, default=5, help="launches per timed batch")
    ap.add_argument("--scale", type=int, default=1, help="multiply the sizes")
    ap.add_argument("--out", help="write results (JSON) with device, date and command")
    ns = ap.parse_args(argv)
    why = _need_gpu()
    if why:
        print(f"gpudsl bench needs an NVIDIA GPU with PyTorch: {why}. "
              "Run it on a GPU machine: gpudsl bench [--out results.json]", file=sys.stderr)
        return 2
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases = _cases(torch, ns.scale)
    src = torch.randn(256 * 1024 * 1024, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    copy_s = _time(lambda: dst.copy_(src), ns.reps, ns.inner)
    copy_bw = 2 * src.numel() * 4 / copy_s
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; copy rate {copy_bw / 1e12:.2f} TB/s (read + write)")
    print(f"{'node':16} {'gpudsl':>10} {'reference':>14} {'ratio':>7}")
    rows = []
    for name in ns.nodes.split(","):
        fn, ref, kind, amount = cases[name]
        t = _time(fn, ns.reps, ns.inner)
        if kind == "flops":
            rt = _time(ref, ns.reps, ns.inner)
            ratio = rt / t
            line = (f"{name:16} {amount / t / 1e12:7.1f} TF/s {amount / rt / 1e12:8.1f} TF/s "
                    f"(cuBLAS) {ratio:6.1%}")
        else:
            bw = amount / t
            ratio = bw / copy_bw
            line = f"{name:16} {bw / 1e12:6.2f} TB/s {copy_bw / 1e12:8.2f} TB/s (copy) {ratio:6.1%}"
        print(line)
        rows.append({"node": name, "seconds": t, "ratio": ratio, "kind": kind})
    if ns.out:
        with open(ns.out, "w") as f:
            json.dump({"device": dev, "date": datetime.date.today().isoformat(),
                       "command": "gpudsl bench " + " ".join(argv or []),
                       "host": platform.node(), "copy_bytes_per_s": copy_bw,
                       "results": rows}, f, indent=2)
    return 0
