"""The fp32 matmul's async pipelines on a GPU (issue 23): ``async_stages`` 2, 3 and 4
against the double-buffered default (``stages=2``), the single-stage kernel
(``stages=1``) and cuBLAS SGEMM (``torch.matmul``, TF32 off), in one run, each checked
against cuBLAS first.

    python3 benchmarks/bench_async_matmul.py [--n 4096] [--out DIR]

Writes ``async_matmul.json`` (device, each row's median ms, TFLOP/s, ratio to cuBLAS,
max relative error) into ``--out`` and prints a table."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

VARIANTS = [("stages=2 (default)", {}), ("stages=1", {"stages": 1}),
            ("async_stages=2", {"async_stages": 2}), ("async_stages=3", {"async_stages": 3}),
            ("async_stages=4", {"async_stages": 4})]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("."))
    a = ap.parse_args(argv)
    import torch

    from gpudsl.runtime.timing import measure
    from gpudsl.stdlib.matmul import big_kernel

    torch.backends.cuda.matmul.allow_tf32 = False
    n = a.n
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, n, device="cuda", generator=g)
    y = torch.randn(n, n, device="cuda", generator=g)
    ref = torch.matmul(x, y)
    flops = 2.0 * n ** 3
    t = measure(lambda: torch.matmul(x, y), reps=a.reps)
    rows = [{"variant": "cuBLAS (torch.matmul)", "median_ms": t.median_ms,
             "tflops": flops / t.median_ms / 1e9}]
    print(f"{'cuBLAS':24} {t.median_ms:8.3f} ms {flops / t.median_ms / 1e9:7.2f} TFLOP/s",
          flush=True)
    base = t.median_ms
    for name, opts in VARIANTS:
        t0 = time.perf_counter()
        p = big_kernel(False, **opts)
        k = p.compile("cuda")
        build = time.perf_counter() - t0
        c = torch.empty(n, n, device="cuda")
        k(a=x, b=y, c=c)
        torch.cuda.synchronize()
        err = float(((c - ref).abs().max() / ref.abs().max()).item())
        t = measure(lambda: k(a=x, b=y, c=c), reps=a.reps)
        row = {"variant": name, "kernel": p.name, "median_ms": t.median_ms,
               "spread_ms": t.spread_ms, "tflops": flops / t.median_ms / 1e9,
               "of_cublas": base / t.median_ms, "max_rel_error": err,
               "build_s": round(build, 1)}
        rows.append(row)
        print(f"{name:24} {t.median_ms:8.3f} ms {row['tflops']:7.2f} TFLOP/s "
              f"{100 * row['of_cublas']:5.1f}% of cuBLAS  err {err:.1e}", flush=True)
        (a.out / "async_matmul.json").write_text(json.dumps(
            {"n": n, "device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
