"""Attention on a GPU (issue 27): the split-key decode kernel and the tiled prefill kernel
against the float64 reference and against PyTorch's scaled_dot_product_attention.

    python3 benchmarks/attention_gpu.py [--quick]

Per kernel: the maximum absolute error against ``attention_reference``, the time of one
call through ``gpudsl.runtime.timing.measure`` (CUDA events, L2 flushed; a compiled
kernel's call allocates its GLOBAL temporaries and synchronizes, which that time
includes) and the device time of its kernels alone read by ``torch.profiler`` (CUPTI),
the median over the calls.  The kernel module before the split (commit 276b873,
through git, or ``benchmarks/_attention_before.py``) adds the earlier kernels as
"before" rows.  One JSON line per row on stdout and in ``$OUT/attention_gpu.json``
(``--llama``: the LLaMA example's tokens/s, in ``attention_gpu_llama.json``).  Every timed
row keeps its repetitions' times (``times_ms``); the first row carries the provenance
of ``gpudsl.bench.meta``.  Its SDPA rows use PyTorch's default backend choice;
``gpudsl bench --nodes attention`` measures every backend."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = pathlib.Path(os.environ.get("OUT", "/tmp"))
ROWS: list = []
FILE = "attention_gpu_llama.json" if "--llama" in sys.argv else "attention_gpu.json"


def log(**kw):
    ROWS.append(kw)
    print(json.dumps(kw), flush=True)
    (OUT / FILE).write_text(json.dumps(ROWS, indent=1))


BEFORE = "276b873"  # the commit whose attention kernel the "before" rows run


def before_module():
    """The kernel module before the split (``benchmarks/_attention_before.py``, else
    from git at :data:`BEFORE`), or None."""
    import subprocess

    path = ROOT / "benchmarks/_attention_before.py"
    if not path.exists():
        try:
            text = subprocess.run(["git", "show", f"{BEFORE}:gpudsl/stdlib/attention.py"],
                                  cwd=ROOT, capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        path = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / "_attention_before.py"
        path.write_text(text.replace("from ..proc import", "from gpudsl.proc import")
                        .replace("from .common import", "from gpudsl.stdlib.common import"))
    spec = importlib.util.spec_from_file_location("attention_before", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def device_us(fn, prefixes, calls=10):
    """Median device time (us) per call of the kernels whose names start with one of
    ``prefixes`` (None: every kernel), read by torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total, names = 0.0, set()
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0.0)
        if t and (prefixes is None or any(e.key.startswith(p) for p in prefixes)):
            total += t
            names.add(e.key)
    return total / calls, sorted(names)


def main(quick: bool = False):
    import torch
    import torch.nn.functional as F

    from gpudsl import ops
    from gpudsl.runtime.timing import measure
    from gpudsl.stdlib.attention import attention_kernel, attention_reference
    from gpudsl.stdlib.attention_split import plan_chunk, split_kernel

    from gpudsl.bench.meta import provenance

    dev = torch.device("cuda")
    log(step="device", name=torch.cuda.get_device_name(), torch=torch.__version__,
        **provenance())
    g = np.random.default_rng(0)

    # ------------------------------------------------ correctness through gpudsl.ops
    t0 = time.time()
    worst = 0.0
    for d in (48, 64, 128):
        for prefix in (1, 17, 256):
            for m, n, causal in ((1, 256, False), (1, 256, True), (prefix, prefix + 5, True)):
                if d == 48 and m > 4:
                    continue
                q, k, v = (g.standard_normal(s, dtype=np.float32)
                           for s in ((2, m, d), (2, n, d), (2, n, d)))
                got = ops.attention(*(torch.from_numpy(a).to(dev) for a in (q, k, v)),
                                    causal=causal,
                                    prefix=torch.tensor([prefix], dtype=torch.int64, device=dev))
                err = float(np.abs(got.cpu().numpy() -
                                   attention_reference(q, k, v, causal, prefix)).max())
                worst = max(worst, err)
    log(step="ops correctness", worst_abs_error=worst, seconds=round(time.time() - t0, 1))

    before = before_module()

    def run_case(label, shape, causal, kernels, reps):
        h, m, n, d = shape
        q, k, v = (g.standard_normal(s, dtype=np.float32)
                   for s in ((h, m, d), (h, n, d), (h, n, d)))
        want = attention_reference(q, k, v, causal, n)
        tq, tk, tv = (torch.from_numpy(a).to(dev) for a in (q, k, v))
        pre = torch.tensor([n], dtype=torch.int64, device=dev)
        flops = 4.0 * h * m * n * d * (0.5 if causal and m == n else 1.0)
        sd = F.scaled_dot_product_attention
        q4, k4, v4 = tq[None], tk[None], tv[None]
        sdpa_ms = float("nan")
        try:
            t = measure(lambda: sd(q4, k4, v4, is_causal=causal), warmup=3, reps=reps)
            sdpa_ms = t.median_ms
            us, names = device_us(lambda: sd(q4, k4, v4, is_causal=causal), None)
            got = sd(q4, k4, v4, is_causal=causal)[0].cpu().numpy()
            log(case=label, kernel="torch sdpa", median_ms=round(t.median_ms, 4),
                times_ms=t.times_ms, device_us=round(us, 1), kernels=names[:3],
                err=float(np.abs(got - want).max()),
                gflops=round(flops / t.median_ms / 1e6, 1))
        except Exception as e:
            log(case=label, kernel="torch sdpa", error=f"{type(e).__name__}: {e}"[:300])
        for name, p in kernels:
            try:
                kern = p.compile("cuda")
                out = torch.empty_like(tq)
                err_t = torch.zeros(1, dtype=torch.int32, device=dev)
                args = dict(q=tq, k=tk, v=tv, prefix=pre, scale=np.float32(1 / np.sqrt(d)),
                            out=out, err=err_t)
                kern(**args)
                err = float(np.abs(out.cpu().numpy() - want).max())
                t = measure(lambda: kern(**args), warmup=2, reps=reps)
                try:
                    us, names = device_us(lambda: kern(**args), ("attention",))
                except Exception as e:
                    us, names = float("nan"), [f"profiler: {e}"[:100]]
                log(case=label, kernel=name, proc=p.name, median_ms=round(t.median_ms, 4),
                    times_ms=t.times_ms, device_us=round(us, 1), kernels=names, err=err,
                    pct_of_sdpa=round(100 * sdpa_ms / t.median_ms, 1),
                    gflops=round(flops / t.median_ms / 1e6, 1))
            except Exception as e:  # a row, not the end of the run
                log(case=label, kernel=name, error=f"{type(e).__name__}: {e}"[:300])

    decode = [("split (plan)", split_kernel(128, False, plan_chunk(32, 1, 4096))),
              ("split c64", split_kernel(128, False, 64)),
              ("split c128", split_kernel(128, False, 128)),
              ("split c32 step4", split_kernel(128, False, 32, step=4)),
              ("split c32 w8", split_kernel(128, False, 32, warps=8)),
              ("tiled r1 (warp reductions)", attention_kernel(128, False, 1))]
    if before is not None:
        decode.append(("tiled r1 before", before.attention_kernel(128, False, 1)))
    run_case("decode 32x1x4096x128", (32, 1, 4096, 128), False,
             decode[:2] if quick else decode, 10)
    prefill = [("tiled r4 (warp reductions)", attention_kernel(128, True, 4)),
               ("tiled r8 (warp reductions)", attention_kernel(128, True, 8))]
    if before is not None:
        prefill.append(("tiled r4 before", before.attention_kernel(128, True, 4)))
    run_case("prefill causal 32x1024x1024x128", (32, 1024, 1024, 128), True, prefill, 5)
    if not quick:
        run_case("decode 8x1x16384x128", (8, 1, 16384, 128), False,
                 [("split (plan)", split_kernel(128, False, plan_chunk(8, 1, 16384)))], 10)


def llama(layers: int = 6, tokens: int = 16):
    """Tokens/s of examples/llama.py's graph with the attention fusion and without it
    (same weights, numpy's tokens checked), and their launches per token."""
    from dataclasses import replace

    from gpudsl import graph
    from gpudsl.graph import attention_fusion

    spec = importlib.util.spec_from_file_location("llama_example", ROOT / "examples/llama.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    cfg = replace(mod.STORIES15M, n_layers=layers)
    w = mod.random_weights(cfg, 0)
    ref_tokens, _ = mod.generate(mod.NumpyLlama(cfg, w), 1, tokens)
    keep = attention_fusion.attention_groups
    for fused in (True, False):
        if not fused:
            attention_fusion.attention_groups = lambda *a: []
        t0 = time.time()
        model = graph.compile(mod.build_graph(cfg, w))
        compile_s = time.time() - t0
        attention_fusion.attention_groups = keep
        step = mod.gpudsl_stepper(cfg, w, model)
        mod.generate(step, 1, 2)
        model.reset_buffers()
        t0 = time.time()
        toks, _ = mod.generate(step, 1, tokens)
        log(step="llama", fused=fused, layers=layers, steps_per_token=len(model.kernels),
            tokens_per_s=round(tokens / (time.time() - t0), 2),
            compile_s=round(compile_s, 1), tokens_agree=toks == ref_tokens)


if __name__ == "__main__":
    if "--llama" in sys.argv:
        llama()
    else:
        main("--quick" in sys.argv)
