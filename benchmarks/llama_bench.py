"""LLaMA tokens/s (issue 34): ``examples/llama.py``'s graph in gpudsl against the same
model in PyTorch run three ways (``benchmarks/llama_torch.py``: eager, CUDA graphs of
the eager forward, ``torch.compile(mode="reduce-overhead")``), each in the same dtype
as gpudsl's (float32, float16, bfloat16), prefill and decode timed apart, the median of
``--passes`` passes.

    python3 benchmarks/llama_bench.py [--out DIR] [--quick] [--variants eager,graph,compile]

A pass: the buffers reset, a prompt of ``--prompt`` random tokens, then ``--tokens``
greedy tokens.  gpudsl's graph takes one token per call, so its prefill is ``--prompt``
calls (each returns the logits to the host); PyTorch's prefill is one forward over
the whole prompt, and its decoded tokens stay on the device until the pass ends.
Prefill tokens/s = prompt / prefill time; decode tokens/s = (tokens - 1) / decode time
(the first token comes from the prefill).  Each row keeps every pass's times; the
tokens are checked against the numpy model (``tokens_agree``).  Rows are written to
``DIR/llama.json`` (default ``$OUT``, else /tmp) as they come, eager first and
``compile`` (the slowest to build) last, with the provenance of ``gpudsl.bench.meta``.
``--quick`` (or no GPU): 1 layer, vocabulary 512, short passes, on the emulator."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import sys
import time
from dataclasses import asdict, replace

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
DTYPES = ("float32", "float16", "bfloat16")


def _example():
    spec = importlib.util.spec_from_file_location("llama_example", ROOT / "examples/llama.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


class Log:
    def __init__(self, out: pathlib.Path, head: dict):
        out.mkdir(parents=True, exist_ok=True)
        self.path, self.data = out / "llama.json", {**head, "rows": []}
        self.write()

    def row(self, **kw):
        self.data["rows"].append(kw)
        print(json.dumps({k: v for k, v in kw.items() if k != "passes"}), flush=True)
        self.write()

    def write(self):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)


def summary(passes: list[dict], prompt: int, tokens: int) -> dict:
    pre = statistics.median(p["prefill_s"] for p in passes)
    dec = statistics.median(p["decode_s"] for p in passes)
    return {"prefill_tokens_per_s": prompt / pre, "decode_tokens_per_s": (tokens - 1) / dec,
            "prefill_s_median": pre, "decode_s_median": dec, "passes": passes}


def gpudsl_pass(mod, cfg, w, model, prompt: list[int], tokens: int):
    step = mod.gpudsl_stepper(cfg, w, model)
    model.reset_buffers()
    t0 = time.perf_counter()
    for i, t in enumerate(prompt):
        logits = step(t, i)
    t1 = time.perf_counter()
    out = [int(logits.argmax())]
    for i in range(tokens - 1):
        out.append(int(step(out[-1], len(prompt) + i).argmax()))
    return out, t1 - t0, time.perf_counter() - t1


def numpy_tokens(mod, cfg, w, prompt, tokens):
    ref = mod.NumpyLlama(cfg, mod.widened(w))
    for i, t in enumerate(prompt):
        logits = ref(t, i)
    out = [int(logits.argmax())]
    for i in range(tokens - 1):
        out.append(int(ref(out[-1], len(prompt) + i).argmax()))
    return out


def run_gpudsl(log, mod, cfg, w32, dtype, prompt, ns, want):
    from gpudsl import graph

    w = mod.in_dtype(w32, dtype)
    t0 = time.perf_counter()
    model = graph.compile(mod.build_graph(cfg, w))
    compile_s = time.perf_counter() - t0
    gpudsl_pass(mod, cfg, w, model, prompt[:2], 2)  # warm-up: kernels loaded
    passes, toks = [], None
    for _ in range(ns.passes):
        toks, pre, dec = gpudsl_pass(mod, cfg, w, model, prompt, ns.tokens)
        passes.append({"prefill_s": pre, "decode_s": dec})
    log.row(impl="gpudsl", variant=f"graph.compile ({model.device})", dtype=dtype,
            compile_s=compile_s, launches_per_token=len(model.kernels),
            tokens_agree=toks == want, first_difference=_first_difference(toks, want),
            **summary(passes, len(prompt), ns.tokens))


def _first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def run_torch(log, cfg, w32, dtype, variant, prompt, ns, want, device):
    import llama_torch

    t0 = time.perf_counter()
    model = llama_torch.build(cfg, w32, dtype, device)
    run = llama_torch.runner(model, variant, len(prompt))
    for _ in range(2):  # warm-up: compile builds, then records its CUDA graphs
        llama_torch.generate(run, prompt, 3, device)
    build_s = time.perf_counter() - t0
    passes, toks = [], None
    for _ in range(ns.passes):
        toks, pre, dec = llama_torch.generate(run, prompt, ns.tokens, device)
        passes.append({"prefill_s": pre, "decode_s": dec})
    log.row(impl="torch", variant=variant, dtype=dtype, device=device, build_s=build_s,
            tokens_agree=toks == want, first_difference=_first_difference(toks, want),
            **summary(passes, len(prompt), ns.tokens))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--variants", default="eager,graph,compile")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ns = ap.parse_args(argv)
    from gpudsl.bench.meta import finish, provenance
    from gpudsl.stdlib.array_ops import backend

    mod = _example()
    quick = ns.quick or backend() != "cuda"
    cfg = replace(mod.STORIES15M, n_layers=1, vocab_size=512) if quick else mod.STORIES15M
    if quick:
        ns.passes, ns.prompt, ns.tokens = min(ns.passes, 2), min(ns.prompt, 4), min(ns.tokens, 3)
    w32 = mod.random_weights(cfg, 0)
    prompt = [int(t) for t in np.random.default_rng(1).integers(1, cfg.vocab_size,
                                                                  ns.prompt)]
    log = Log(pathlib.Path(ns.out), {"config": asdict(cfg), "prompt": ns.prompt,
                                     "tokens": ns.tokens, "passes": ns.passes,
                                     "quick": quick, **provenance()})
    try:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        torch, device = None, None
    wants = {}
    for dtype in ns.dtypes.split(","):
        wants[dtype] = numpy_tokens(mod, cfg, mod.in_dtype(w32, dtype), prompt, ns.tokens)
        _guard(log, "gpudsl", dtype, lambda: run_gpudsl(log, mod, cfg, w32, dtype, prompt, ns,
                                                        wants[dtype]))
    for variant in ns.variants.split(","):
        for dtype in ns.dtypes.split(","):
            why = ("PyTorch is not installed" if torch is None else
                   "CUDA graphs need a GPU" if variant == "graph" and device != "cuda"
                   else None)
            if why:
                log.row(impl="torch", variant=variant, dtype=dtype, skipped=why)
                continue
            _guard(log, variant, dtype, lambda: run_torch(
                log, cfg, mod.widened(mod.in_dtype(w32, dtype)), dtype, variant, prompt, ns,
                wants[dtype], device))
    log.data.update(finish(log.data), complete=True)
    log.write()
    # tokens that differ from numpy's in halves are a figure (rounding), not a failure
    bad = [r for r in log.data["rows"] if "error" in r or
           r.get("dtype") == "float32" and r.get("tokens_agree") is False]
    return 1 if bad else 0


def _guard(log, what, dtype, fn):
    try:
        fn()
    except Exception as e:  # one failing variant is a row, not the end of the run
        log.row(impl=what, dtype=dtype, error=f"{type(e).__name__}: {e}"[:400])


if __name__ == "__main__":
    sys.exit(main())
