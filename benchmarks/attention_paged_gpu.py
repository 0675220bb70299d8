"""Grouped-query decode over a paged KV cache on a GPU (issue 37): ``gpudsl.ops.attention``
with ``block_table=`` / ``seq_lens=`` against the float64 reference, PyTorch's
``scaled_dot_product_attention`` on the same keys made contiguous (``enable_gqa``), and
the device's copy rate (a ``clone`` of the cache's bytes).

    python3 benchmarks/attention_paged_gpu.py            # a GPU: the shapes below
    python3 benchmarks/attention_paged_gpu.py --emulator # tiny shapes, the CPU emulator

Per shape (batch B, query heads H, KV heads Hkv, length L, head dimension 128, pages of
16, float16): the worst error of gpudsl against the reference, the median time of one
call (CUDA events through ``gpudsl.runtime.timing.measure``), the bytes a decode must
read (every used key and value row once) over that time, and that rate as a fraction
of the copy rate (the issue's target: 0.85).  One JSON line per row on stdout and in
``$OUT/attention_paged_gpu.json``."""
from __future__ import annotations

import json
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = pathlib.Path(os.environ.get("OUT", "/tmp"))
ROWS: list = []

GPU_SHAPES = [(8, 32, 8, 4096), (32, 32, 8, 1024), (4, 64, 8, 16384), (8, 32, 32, 4096)]
EMULATOR_SHAPES = [(2, 8, 2, 40)]


def log(**kw):
    ROWS.append(kw)
    print(json.dumps(kw), flush=True)
    (OUT / "attention_paged_gpu.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS))


def inputs(B, H, Hkv, L, D=128, P=16, seed=0):
    """A shuffled page pool with exactly the pages the batch uses, float16."""
    g = np.random.default_rng(seed)
    per = -(-L // P)
    pages = B * per
    table = g.permutation(pages).reshape(B, per).astype(np.int32)
    f = lambda s: g.standard_normal(s, dtype=np.float32).astype(np.float16)  # noqa: E731
    return f((B, H, 1, D)), f((pages, P, Hkv, D)), f((pages, P, Hkv, D)), table, \
        np.full((B,), L, np.int32)


def contiguous(cache, table, L):
    """``[B, Hkv, L, D]``: each sequence's pages in order."""
    kb = cache[table].reshape(table.shape[0], -1, cache.shape[2], cache.shape[3])[:, :L]
    return np.ascontiguousarray(kb.transpose(0, 2, 1, 3))


def main(emulator: bool):
    from gpudsl import ops
    from gpudsl.stdlib.attention import attention_tolerance
    from gpudsl.stdlib.attention_paged import gqa_reference

    for B, H, Hkv, L in EMULATOR_SHAPES if emulator else GPU_SHAPES:
        q, k, v, table, lens = inputs(B, H, Hkv, L)
        want = gqa_reference(q, k, v, lens, False, table)
        label = f"B{B} H{H} Hkv{Hkv} L{L} D128 P16 f16"
        if emulator:
            got = ops.attention(q, k, v, block_table=table, seq_lens=lens)
            err = float(np.abs(got.astype(np.float64) - want).max())
            log(case=label, target="emulator", err=err, tol=attention_tolerance("f16"))
            continue
        gpu_case(label, q, k, v, table, lens, want, L)


def gpu_case(label, q, k, v, table, lens, want, L):  # pragma: no cover  (a GPU)
    import torch
    import torch.nn.functional as F

    from gpudsl import ops
    from gpudsl.runtime.timing import measure

    dev = torch.device("cuda")
    tq, tk, tv, tt, tl = (torch.from_numpy(a).to(dev) for a in (q, k, v, table, lens))
    call = lambda: ops.attention(tq, tk, tv, block_table=tt, seq_lens=tl)  # noqa: E731
    got = call().cpu().numpy()
    err = float(np.abs(got.astype(np.float64) - want).max())
    t = measure(call, warmup=3, reps=20)
    used = 2 * k.itemsize * k.shape[2] * k.shape[3] * L * q.shape[0]  # K and V rows read
    copy_src = torch.empty(used // 2, dtype=torch.float16, device=dev)
    c = measure(lambda: copy_src.clone(), warmup=3, reps=20)
    copy_rate = 2 * copy_src.numel() * 2 / c.median_ms / 1e6  # read + write, GB/s
    rate = used / t.median_ms / 1e6
    log(case=label, kernel="gpudsl paged", median_ms=round(t.median_ms, 4),
        times_ms=t.times_ms, err=err, gb_per_s=round(rate, 1),
        copy_gb_per_s=round(copy_rate, 1), of_copy=round(rate / copy_rate, 3))
    kc, vc = (torch.from_numpy(contiguous(a, table, L)).to(dev) for a in (k, v))
    try:
        s = measure(lambda: F.scaled_dot_product_attention(tq, kc, vc, enable_gqa=True),
                    warmup=3, reps=20)
        log(case=label, kernel="torch sdpa (contiguous, enable_gqa)",
            median_ms=round(s.median_ms, 4), times_ms=s.times_ms,
            gpudsl_over_sdpa=round(s.median_ms / t.median_ms, 3))
    except Exception as e:  # a row, not the end of the run
        log(case=label, kernel="torch sdpa", error=f"{type(e).__name__}: {e}"[:300])


if __name__ == "__main__":
    main("--emulator" in sys.argv)
