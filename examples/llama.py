"""A LLaMA-2-shaped transformer (llama2.c's stories15M sizes) as a gpudsl graph,
generating tokens with its KV cache in ``BufferTensor``s written by
``ReplaceSliceNode``, checked against a numpy implementation of the same model.

    python examples/llama.py                     # 6 layers, 16 tokens, tokens/s
    python examples/llama.py --layers 2 --tokens 4 --vocab 512
    python examples/llama.py --dtype float16     # f16 weights, activations and cache
    python examples/llama.py --kv-heads 2 --page-size 16   # GQA, a paged KV cache
    python examples/llama.py --no-cuda-graph     # GPU: every kernel launched per token

Random weights made here from a seed (no download).  Runs on the GPU when there is
one, else on the CPU emulator.  On a GPU the decode step (the model's evaluation) is
captured as one CUDA graph at the first token and replayed for every later one (the
inputs copied in, the logits copied out); ``--no-cuda-graph`` launches its kernels one
by one instead.  With PyTorch installed, the same model in PyTorch
eager (torch.matmul etc., float32) is timed too, one pass; ``benchmarks/llama_bench.py``
is the benchmark (the same dtype, eager, CUDA graphs and torch.compile, median of passes).

The graph evaluates one token per call (as HamKaas's llama2.py): inputs are the
token's embedding row ``x`` [dim], the position's rotary row ``freq_cis``
[head_size/2, 2], ``pos`` / ``pos_end`` (int64 [1]: the cache row written, and
``pos + 1``, the softmax prefix) and ``mask`` [seq_len] (1 up to ``pos``, else 0).
Per layer: rms_norm, q/k/v vector-matrix products, RoPE as a complex product on
``[heads, hs/2, 2]``, the k and v rows written into the layer's ``[seq_len, dim]``
cache buffers, scores ``[heads, seq, hs] @ [heads, hs, 1]``, scaled,
``sliced_softmax(pos_end)``, masked, the weighted values ``[heads, hs, seq] @
[heads, seq, 1]``, the output projection and residual; then the SiLU-gated FFN and
residual.  Finally rms_norm and the classifier to vocabulary logits.

``--dtype float16`` / ``bfloat16``: the weights rounded to that type and the whole
graph in it (inputs, activations, the KV cache); each kernel reads halves, computes in
float32 and rounds its result once.  The numpy reference runs in float32 on the same
rounded weights, so the two differ by the graph's roundings of its activations.

``--kv-heads Hkv`` / ``--page-size P`` (issue 37): grouped-query attention (``Hkv``
key/value heads, each shared by ``n_heads / Hkv`` query heads, as LLaMA-2-70B's 8 for
64) over a paged KV cache.  Each layer's cache is a pool of ``pages`` pages of ``P``
rows of ``Hkv * head_size`` entries (one ``BufferTensor``, rows ``page * P + r``), the
sequence's pages named by a block table (a shuffled one here, as a serving system's
allocator would give); the step writes the new k and v rows at
``table[pos // P] * P + pos % P`` (``ReplaceSliceNode``) and attends them with
``AttentionNode(q, cache, cache, block_table=, seq_lens=)``, one fused split-KV kernel
that reads the cache through the table (``gpudsl.stdlib.attention_paged``).  The inputs
``pos`` / ``pos_end`` are then that slot and the slot plus one, ``seq_len`` the length
(``pos + 1``) and ``block_table`` the table; ``mask`` is not used.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, replace

import numpy as np

from gpudsl import graph


@dataclass(frozen=True)
class Config:
    dim: int = 288
    hidden_dim: int = 768
    n_layers: int = 6
    n_heads: int = 6
    vocab_size: int = 32000
    seq_len: int = 256
    n_kv_heads: int = 0  # 0: one KV head per query head; else grouped-query attention
    page_size: int = 0  # 0: a contiguous cache and the matmul-softmax-matmul attention

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_size

    @property
    def pages(self) -> int:
        """Pages in each layer's pool: the sequence's, plus one never used."""
        return -(-self.seq_len // self.page_size) + 1

    @property
    def head_size(self) -> int:
        return self.dim // self.n_heads


STORIES15M = Config()


def random_weights(cfg: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights shaped as llama2.c's, already transposed for ``x @ W`` (``[in, out]``),
    scaled so that activations stay of order one; the rotary table as in llama2.c."""
    rng = np.random.default_rng(seed)
    L, d, h = cfg.n_layers, cfg.dim, cfg.hidden_dim

    def mat(*shape):
        return (rng.standard_normal(shape) / math.sqrt(shape[-2])).astype(np.float32)

    hs = cfg.head_size
    theta = 10000.0 ** (-np.arange(0, hs, 2, dtype=np.float64) / hs)
    angles = np.arange(cfg.seq_len)[:, None] * theta[None, :]
    return {
        "embedding": rng.standard_normal((cfg.vocab_size, d)).astype(np.float32),
        "rms_att": (1 + 0.1 * rng.standard_normal((L, d))).astype(np.float32),
        "wq": mat(L, d, d), "wk": mat(L, d, cfg.kv_dim), "wv": mat(L, d, cfg.kv_dim),
        "wo": mat(L, d, d),
        "rms_ffn": (1 + 0.1 * rng.standard_normal((L, d))).astype(np.float32),
        "w1": mat(L, d, h), "w3": mat(L, d, h), "w2": mat(L, h, d),
        "rms_final": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
        "wcls": mat(d, cfg.vocab_size),
        "freq_cis": np.stack([np.cos(angles), np.sin(angles)], -1).astype(np.float32),
    }


# ------------------------------------------------------------------ the gpudsl graph


def in_dtype(w: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """The weights rounded to ``dtype`` (``"float16"``, ``"bfloat16"``: ml_dtypes)."""
    if dtype == "bfloat16":
        import ml_dtypes  # noqa: F401  (numpy's "bfloat16")
    return {k: v.astype(dtype) for k, v in w.items()}


def widened(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same weights as float32 (exact: halves widen exactly): the numpy
    reference's."""
    return {k: v.astype(np.float32) for k, v in w.items()}


def build_graph(cfg: Config, w: dict[str, np.ndarray]) -> graph.Node:
    """The one-token graph (see the module's docstring); its logits [vocab].  The
    graph's float dtype is the weights' (float32, float16 or bfloat16)."""
    if cfg.page_size:
        return build_paged_graph(cfg, w)
    d, H, hs, S = cfg.dim, cfg.n_heads, cfg.head_size, cfg.seq_len
    dt = w["wq"].dtype.name
    C = graph.ConstantTensor
    x = graph.InputTensor("x", dt, [d])
    freq = graph.InputTensor("freq_cis", dt, [hs // 2, 2]).reshape([1, hs // 2, 2])
    pos = graph.InputTensor("pos", "int64", [1])
    pos_end = graph.InputTensor("pos_end", "int64", [1])
    mask = graph.InputTensor("mask", dt, [S]).reshape([1, S])
    scale = C(np.full((1, 1), 1.0 / math.sqrt(hs), np.float32).astype(dt))
    for layer in range(cfg.n_layers):
        xb = x.rms_norm(C(w["rms_att"][layer]))
        q = xb @ C(w["wq"][layer])
        k = xb @ C(w["wk"][layer])
        v = xb @ C(w["wv"][layer])
        q = q.reshape([H, hs // 2, 2]).complex_hadamard_product(freq).reshape([H, hs, 1])
        k = k.reshape([H, hs // 2, 2]).complex_hadamard_product(freq).reshape([1, d])
        key_cache = graph.BufferTensor(dt, [S, d]).replace(k, pos, pos_end)
        value_cache = graph.BufferTensor(dt, [S, d]).replace(v.reshape([1, d]), pos, pos_end)
        keys = key_cache.reshape([S, H, hs]).permute([1, 0, 2])      # [H, S, hs]
        scores = (keys @ q).reshape([H, S]) * scale                   # [H, S]
        att = scores.sliced_softmax(pos_end) * mask
        values = value_cache.reshape([S, H, hs]).permute([1, 2, 0])  # [H, hs, S]
        out = (values @ att.reshape([H, S, 1])).reshape([d])
        x = x + out @ C(w["wo"][layer])
        xb = x.rms_norm(C(w["rms_ffn"][layer]))
        hb = (xb @ C(w["w1"][layer])).silu() * (xb @ C(w["w3"][layer]))
        x = x + hb @ C(w["w2"][layer])
    return x.rms_norm(C(w["rms_final"])) @ C(w["wcls"])


def block_table(cfg: Config, seed: int = 0) -> np.ndarray:
    """The sequence's pages: a shuffled choice of the pool's (one page stays unused)."""
    pages = np.random.default_rng(seed).permutation(cfg.pages)[:cfg.pages - 1]
    return pages.reshape(1, -1).astype(np.int64)


def build_paged_graph(cfg: Config, w: dict[str, np.ndarray]) -> graph.Node:
    """The one-token graph with grouped-query attention over a paged KV cache (see the
    module's docstring)."""
    d, H, hs, P = cfg.dim, cfg.n_heads, cfg.head_size, cfg.page_size
    kvd, rows = cfg.kv_dim, cfg.pages * cfg.page_size
    dt = w["wq"].dtype.name
    C = graph.ConstantTensor
    x = graph.InputTensor("x", dt, [d])
    freq = graph.InputTensor("freq_cis", dt, [hs // 2, 2]).reshape([1, hs // 2, 2])
    slot = graph.InputTensor("pos", "int64", [1])           # the cache row written
    slot_end = graph.InputTensor("pos_end", "int64", [1])
    length = graph.InputTensor("seq_len", "int64", [1])     # pos + 1
    table = graph.InputTensor("block_table", "int64", [1, cfg.pages - 1])
    for layer in range(cfg.n_layers):
        xb = x.rms_norm(C(w["rms_att"][layer]))
        q = xb @ C(w["wq"][layer])
        k = xb @ C(w["wk"][layer])
        v = xb @ C(w["wv"][layer])
        q = q.reshape([H, hs // 2, 2]).complex_hadamard_product(freq).reshape([H, 1, hs])
        k = k.reshape([cfg.kv_heads, hs // 2, 2]).complex_hadamard_product(freq)
        key_cache = graph.BufferTensor(dt, [rows, kvd]).replace(k.reshape([1, kvd]),
                                                               slot, slot_end)
        value_cache = graph.BufferTensor(dt, [rows, kvd]).replace(v.reshape([1, kvd]),
                                                                 slot, slot_end)
        out = graph.AttentionNode(q, key_cache.reshape([cfg.pages, P, kvd]),
                                  value_cache.reshape([cfg.pages, P, kvd]),
                                  block_table=table, seq_lens=length)   # [H, 1, hs]
        x = x + out.reshape([d]) @ C(w["wo"][layer])
        xb = x.rms_norm(C(w["rms_ffn"][layer]))
        hb = (xb @ C(w["w1"][layer])).silu() * (xb @ C(w["w3"][layer]))
        x = x + hb @ C(w["w2"][layer])
    return x.rms_norm(C(w["rms_final"])) @ C(w["wcls"])


def step_inputs(cfg: Config, w, token: int, pos: int) -> dict[str, np.ndarray]:
    if cfg.page_size:
        table = block_table(cfg)
        slot = int(table[0, pos // cfg.page_size]) * cfg.page_size + pos % cfg.page_size
        return {"x": w["embedding"][token], "freq_cis": w["freq_cis"][pos],
                "pos": np.array([slot], np.int64), "pos_end": np.array([slot + 1], np.int64),
                "seq_len": np.array([pos + 1], np.int64), "block_table": table}
    mask = (np.arange(cfg.seq_len) <= pos).astype(w["wq"].dtype)
    return {"x": w["embedding"][token], "freq_cis": w["freq_cis"][pos],
            "pos": np.array([pos], np.int64), "pos_end": np.array([pos + 1], np.int64),
            "mask": mask}


# ------------------------------------------------------------------ numpy reference


class NumpyLlama:
    """The same model in numpy (llama2.c's ``transformer()``), with its own KV cache."""

    def __init__(self, cfg: Config, w):
        self.cfg, self.w = cfg, w
        self.key_cache = np.zeros((cfg.n_layers, cfg.seq_len, cfg.kv_dim), np.float32)
        self.value_cache = np.zeros_like(self.key_cache)

    @staticmethod
    def rms_norm(x, weight):
        return weight * x / np.sqrt(np.mean(x * x) + 1e-5)

    def rope(self, v, pos):
        c = self.w["freq_cis"][pos]  # [hs/2, 2]
        z = v.reshape(-1, self.cfg.head_size // 2, 2)
        re = z[..., 0] * c[:, 0] - z[..., 1] * c[:, 1]
        im = z[..., 0] * c[:, 1] + z[..., 1] * c[:, 0]
        return np.stack([re, im], -1).reshape(-1)

    def __call__(self, token: int, pos: int) -> np.ndarray:
        cfg, w = self.cfg, self.w
        H, hs = cfg.n_heads, cfg.head_size
        x = w["embedding"][token].astype(np.float32)
        for layer in range(cfg.n_layers):
            xb = self.rms_norm(x, w["rms_att"][layer])
            q = self.rope(xb @ w["wq"][layer], pos)
            self.key_cache[layer, pos] = self.rope(xb @ w["wk"][layer], pos)
            self.value_cache[layer, pos] = xb @ w["wv"][layer]
            group = H // cfg.kv_heads  # query heads per KV head (LLaMA's repeat_kv)
            keys = np.repeat(self.key_cache[layer, :pos + 1].reshape(pos + 1, -1, hs),
                             group, 1)
            values = np.repeat(self.value_cache[layer, :pos + 1].reshape(pos + 1, -1, hs),
                               group, 1)
            scores = np.einsum("thd,hd->ht", keys, q.reshape(H, hs)) / math.sqrt(hs)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            att = scores / scores.sum(-1, keepdims=True)
            out = np.einsum("ht,thd->hd", att, values).reshape(-1)
            x = x + out @ w["wo"][layer]
            xb = self.rms_norm(x, w["rms_ffn"][layer])
            h1 = xb @ w["w1"][layer]
            x = x + (h1 / (1 + np.exp(-h1)) * (xb @ w["w3"][layer])) @ w["w2"][layer]
        return self.rms_norm(x, w["rms_final"]) @ w["wcls"]


# ------------------------------------------------------------------ generation


def generate(step, first_token: int, n_tokens: int):
    """Greedy decoding: ``step(token, pos) -> logits``; returns (tokens, logits list)."""
    tokens, logits = [first_token], []
    for pos in range(n_tokens):
        out = step(tokens[-1], pos)
        logits.append(np.asarray(out))
        tokens.append(int(np.argmax(out)))
    return tokens, logits


def gpudsl_stepper(cfg: Config, w, model):
    return lambda token, pos: model.evaluate(step_inputs(cfg, w, token, pos))


def torch_stepper(cfg: Config, w):  # pragma: no cover  (optional, timed only)
    """The same model in PyTorch eager, on the GPU when there is one."""
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    t = {k: torch.from_numpy(v).to(dev) for k, v in w.items()}
    H, hs, S = cfg.n_heads, cfg.head_size, cfg.seq_len
    G = H // cfg.kv_heads
    kc = torch.zeros((cfg.n_layers, S, cfg.kv_dim), device=dev)
    vc = torch.zeros_like(kc)

    def rms(x, g):
        return g * x * torch.rsqrt(torch.mean(x * x) + 1e-5)

    def rope(v, c):
        z = torch.view_as_complex(v.reshape(-1, hs // 2, 2).contiguous())
        return torch.view_as_real(z * torch.view_as_complex(c.contiguous())).reshape(-1)

    @torch.no_grad()
    def step(token, pos):
        x = t["embedding"][token]
        c = t["freq_cis"][pos]
        for layer in range(cfg.n_layers):
            xb = rms(x, t["rms_att"][layer])
            q = rope(torch.matmul(xb, t["wq"][layer]), c)
            kc[layer, pos] = rope(torch.matmul(xb, t["wk"][layer]), c)
            vc[layer, pos] = torch.matmul(xb, t["wv"][layer])
            keys = kc[layer, :pos + 1].reshape(pos + 1, -1, hs).repeat_interleave(G, 1)
            keys = keys.permute(1, 0, 2)
            att = torch.softmax(torch.matmul(keys, q.reshape(H, hs, 1)).reshape(H, -1)
                                / math.sqrt(hs), -1)
            vals = vc[layer, :pos + 1].reshape(pos + 1, -1, hs).repeat_interleave(G, 1)
            vals = vals.permute(1, 2, 0)
            x = x + torch.matmul(torch.matmul(vals, att.reshape(H, -1, 1)).reshape(-1),
                                 t["wo"][layer])
            xb = rms(x, t["rms_ffn"][layer])
            x = x + torch.matmul(torch.nn.functional.silu(torch.matmul(xb, t["w1"][layer]))
                                 * torch.matmul(xb, t["w3"][layer]), t["w2"][layer])
        out = torch.matmul(rms(x, t["rms_final"]), t["wcls"])
        return out.cpu().numpy()
    return step


def _timed(step, cfg, n_tokens):
    t0 = time.perf_counter()
    tokens, logits = generate(step, 1, n_tokens)
    return tokens, logits, n_tokens / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=STORIES15M.n_layers)
    ap.add_argument("--dim", type=int, default=STORIES15M.dim)
    ap.add_argument("--hidden", type=int, default=STORIES15M.hidden_dim)
    ap.add_argument("--heads", type=int, default=STORIES15M.n_heads)
    ap.add_argument("--vocab", type=int, default=STORIES15M.vocab_size)
    ap.add_argument("--seq", type=int, default=STORIES15M.seq_len)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"),
                    help="the weights' and the graph's float type")
    ap.add_argument("--kv-heads", type=int, default=0,
                    help="grouped-query attention: key/value heads (dividing --heads); "
                         "a paged cache (--page-size, default 16)")
    ap.add_argument("--page-size", type=int, default=0,
                    help="a paged KV cache of pages of this many rows (16..256)")
    ap.add_argument("--no-cuda-graph", action="store_true",
                    help="on a GPU, launch every kernel at every token instead of "
                         "replaying the step captured as one CUDA graph")
    args = ap.parse_args(argv)
    page = args.page_size or (16 if args.kv_heads else 0)
    cfg = replace(STORIES15M, n_layers=args.layers, dim=args.dim, hidden_dim=args.hidden,
                  n_heads=args.heads, vocab_size=args.vocab, seq_len=args.seq,
                  n_kv_heads=args.kv_heads, page_size=page)
    w = in_dtype(random_weights(cfg, args.seed), args.dtype)
    t0 = time.perf_counter()
    model = graph.compile(build_graph(cfg, w), cuda_graph=not args.no_cuda_graph)
    how = "" if model.device != "cuda" else \
        "; one CUDA graph replayed per token" if model.cuda_graph else \
        "; launched kernel by kernel"
    print(f"{cfg}\n{args.dtype}: compiled on {model.device} in {time.perf_counter() - t0:.1f}"
          f" s; {model.memory}; {len(model.kernels)} launches per token{how}")
    _timed(gpudsl_stepper(cfg, w, model), cfg, 1)  # warm-up: kernels built and loaded
    model.reset_buffers()
    tokens, logits, tps = _timed(gpudsl_stepper(cfg, w, model), cfg, args.tokens)
    ref_tokens, ref_logits, ref_tps = _timed(NumpyLlama(cfg, widened(w)), cfg, args.tokens)
    err = max(float(np.abs(a.astype(np.float32) - b).max())
              for a, b in zip(logits, ref_logits))
    scale = max(float(np.abs(b).max()) for b in ref_logits)
    print(f"gpudsl ({model.device}): {tps:.2f} tokens/s; numpy: {ref_tps:.2f} tokens/s")
    print(f"max |gpudsl - numpy| = {err:.2e} (logits up to {scale:.1f}); "
          f"tokens agree: {tokens == ref_tokens}")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed: no eager comparison")
    else:
        step = torch_stepper(cfg, widened(w))
        _timed(step, cfg, 1)
        _, _, torch_tps = _timed(torch_stepper(cfg, widened(w)), cfg, args.tokens)
        print(f"PyTorch eager (float32 weights, one pass; benchmarks/llama_bench.py compares "
              f"in the same dtype): {torch_tps:.2f} tokens/s")
    tol = {"float32": 1e-3, "float16": 2e-2, "bfloat16": 1e-1}[args.dtype]
    return 0 if tokens == ref_tokens and err <= tol * max(scale, 1.0) else 1


if __name__ == "__main__":
    raise SystemExit(main())
