"""Half-precision kernels on a GPU (issue 27): ``gpudsl.ops`` attention and matmul in
float16 and bfloat16 against PyTorch's own half ops, on the same tensors.

    python3 benchmarks/half_gpu.py [--quick] [--out DIR]

Per row: the maximum absolute error against a float32 PyTorch result computed from the
same half inputs, the same figure for PyTorch's half op (so the two are judged by one
yardstick), and the time of one call of each (``gpudsl.runtime.timing.measure``: CUDA
events, L2 flushed, median).  ``ratio`` is PyTorch's time over gpudsl's (above 1: gpudsl
is faster).  ``--quick``: small shapes, for a rehearsal on a machine without a GPU
(torch CPU tensors through the emulator).  One JSON line per row on stdout and in
``DIR/half_gpu.json`` (default ``$OUT``, else ``/tmp``), each with every repetition's time
(``gpudsl_times_ms``, ``torch_times_ms``), after a first row with the provenance of
``gpudsl.bench.meta`` (commit, versions, clocks).  The campaign's bench step now covers
these cases against references chosen per backend (``matmul_f16``, ``matmul_bf16``,
``attention_suite``); this script remains for a quick look by hand."""
from __future__ import annotations

import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = pathlib.Path(sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv
                   else os.environ.get("OUT", "/tmp"))
ROWS: list = []


def log(**kw):
    ROWS.append(kw)
    print(json.dumps(kw), flush=True)
    (OUT / "half_gpu.json").write_text(json.dumps(ROWS, indent=1))


def _tensor(torch, x):
    """The emulator answers torch CPU tensors with numpy arrays: as a float32 tensor."""
    import numpy as np

    return x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x, np.float32))


def main() -> int:
    import torch
    import torch.nn.functional as F

    from gpudsl import ops
    from gpudsl.runtime.timing import measure
    from gpudsl.bench.attention_cases import planned_kernel

    quick = "--quick" in sys.argv or not torch.cuda.is_available()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    target = "cuda" if dev == "cuda" else "emulator"
    from gpudsl.bench.meta import provenance

    log(step="device", name=torch.cuda.get_device_name() if dev == "cuda" else "cpu",
        torch=torch.__version__, **provenance())
    reps = 2 if quick else 10
    attn = ([("decode", (2, 1, 64, 64), False), ("prefill causal", (2, 32, 32, 64), True)]
            if quick else
            [("decode", (32, 1, 4096, 128), False),
             ("prefill causal", (32, 1024, 1024, 128), True)])
    mm = [64] if quick else [4096]
    gen = torch.Generator(device="cpu").manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).split(".")[-1]
        for label, (h, m, n, d), causal in attn:
            q, k, v = (torch.randn(s, generator=gen).to(dev, dtype)
                       for s in ((h, m, d), (h, n, d), (h, n, d)))
            row = dict(case=f"attention {label} {h}x{m}x{n}x{d}", dtype=name)
            try:  # the proc ops.attention runs (sm_90a: attention_sm90's)
                row["kernel"] = planned_kernel(target, (1, h, m, n, d, causal), name)
                want = F.scaled_dot_product_attention(
                    q.float()[None], k.float()[None], v.float()[None], is_causal=causal)[0]
                got = _tensor(torch, ops.attention(q, k, v, causal=causal))
                ref = F.scaled_dot_product_attention(q[None], k[None], v[None],
                                                     is_causal=causal)[0]
                row.update(err=float((got.float() - want).abs().max()),
                           torch_err=float((ref.float() - want).abs().max()))
                g = measure(lambda: ops.attention(q, k, v, causal=causal), backend=target,
                            reps=reps)
                t = measure(lambda: F.scaled_dot_product_attention(
                    q[None], k[None], v[None], is_causal=causal), backend="cuda",
                    reps=reps) if dev == "cuda" else None
                t_g, t_t = g.median_ms, t.median_ms if t else float("nan")
                row.update(gpudsl_ms=t_g, torch_ms=t_t, ratio=t_t / t_g,
                           gpudsl_times_ms=g.times_ms, torch_times_ms=t.times_ms if t else [])
            except Exception as e:  # a failing case is a figure too
                row.update(error=f"{type(e).__name__}: {str(e)[:300]}")
            log(**row)
        for s in mm:
            a, b = (torch.randn((s, s), generator=gen).to(dev, dtype) for _ in range(2))
            row = dict(case=f"matmul {s}^3", dtype=name)
            try:
                want = a.float() @ b.float()
                got = _tensor(torch, ops.matmul(a, b))
                ref = a @ b
                row.update(err=float((got.float() - want).abs().max()),
                           torch_err=float((ref.float() - want).abs().max()))
                g = measure(lambda: ops.matmul(a, b), backend=target, reps=reps)
                t = measure(lambda: a @ b, backend="cuda", reps=reps) if dev == "cuda" else None
                t_g, t_t = g.median_ms, t.median_ms if t else float("nan")
                row.update(gpudsl_ms=t_g, torch_ms=t_t, ratio=t_t / t_g,
                           tflops=2 * s ** 3 / t_g / 1e9, gpudsl_times_ms=g.times_ms,
                           torch_times_ms=t.times_ms if t else [])
            except Exception as e:
                row.update(error=f"{type(e).__name__}: {str(e)[:300]}")
            log(**row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
