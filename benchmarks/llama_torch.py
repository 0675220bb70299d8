"""The LLaMA example's model in PyTorch, as users would run it (issue 34): weights,
activations and KV cache in one dtype (the same as gpudsl's), a static cache of
``seq_len`` rows written with ``index_copy_``, attention by
``scaled_dot_product_attention`` over the whole cache with a mask (static shapes, so
that CUDA graphs and ``torch.compile(mode="reduce-overhead")`` can capture it), and a
``forward(tokens, positions)`` that takes a whole prompt (prefill) or one token (decode).

Three ways to run it: ``eager``; ``graph``, CUDA graphs of the eager forward captured
once per shape (prefill, decode) with static input tensors; ``compile``,
``torch.compile(mode="reduce-overhead", fullgraph=True, dynamic=False)`` (Inductor's
kernels in CUDA graphs, one per shape)."""
from __future__ import annotations

import numpy as np


def build(cfg, w: dict, dtype: str, device: str):
    """The model (an ``nn.Module``) with ``w``'s weights (float32 numpy) in ``dtype``."""
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    H, hs, S = cfg.n_heads, cfg.head_size, cfg.seq_len

    class Llama(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for k, v in w.items():
                self.register_buffer(k, torch.from_numpy(np.asarray(v, np.float32))
                                     .to(device, dt))
            shape = (cfg.n_layers, S, cfg.dim)
            self.register_buffer("kc", torch.zeros(shape, device=device, dtype=dt))
            self.register_buffer("vc", torch.zeros(shape, device=device, dtype=dt))
            self.register_buffer("keys_at", torch.arange(S, device=device))

        @staticmethod
        def rms(x, g):
            xf = x.float()
            return (g.float() * xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-5)).to(dt)

        def rope(self, v, pos):
            c = self.freq_cis[pos].float()  # [T, hs/2, 2]
            z = v.float().reshape(v.shape[0], H, hs // 2, 2)
            re = z[..., 0] * c[:, None, :, 0] - z[..., 1] * c[:, None, :, 1]
            im = z[..., 0] * c[:, None, :, 1] + z[..., 1] * c[:, None, :, 0]
            return torch.stack([re, im], -1).reshape(v.shape).to(dt)

        def forward(self, tokens, pos):
            """Logits [T, vocab] of ``tokens`` [T] at positions ``pos`` [T]."""
            T = tokens.shape[0]
            x = self.embedding[tokens]
            mask = self.keys_at[None, :] <= pos[:, None]  # [T, S]
            for layer in range(cfg.n_layers):
                xb = self.rms(x, self.rms_att[layer])
                q = self.rope(xb @ self.wq[layer], pos)
                self.kc[layer].index_copy_(0, pos, self.rope(xb @ self.wk[layer], pos))
                self.vc[layer].index_copy_(0, pos, xb @ self.wv[layer])
                heads = [t.view(-1, H, hs).transpose(0, 1) for t in
                         (q, self.kc[layer], self.vc[layer])]
                att = F.scaled_dot_product_attention(*heads, attn_mask=mask)
                x = x + att.transpose(0, 1).reshape(T, cfg.dim) @ self.wo[layer]
                xb = self.rms(x, self.rms_ffn[layer])
                x = x + (F.silu(xb @ self.w1[layer]) * (xb @ self.w3[layer])) @ self.w2[layer]
            return self.rms(x, self.rms_final) @ self.wcls

    return Llama().eval()


def runner(model, variant: str, prompt_len: int):
    """``run(tokens, pos) -> logits`` for one variant; ``graph`` captures the prefill and
    the decode shapes (static inputs copied in, the graph replayed)."""
    import torch

    if variant == "eager":
        return model
    if variant == "compile":
        # one static graph per shape (prefill, decode), as the CUDA-graph variant
        return torch.compile(model, mode="reduce-overhead", fullgraph=True, dynamic=False)
    if variant != "graph":
        raise ValueError(variant)
    graphs = {}
    for t in (prompt_len, 1):
        tok = torch.zeros(t, dtype=torch.long, device="cuda")
        pos = torch.arange(t, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(tok, pos)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = model(tok, pos)
        graphs[t] = (g, tok, pos, out)

    def run(tokens, p):
        g, tok, pos, out = graphs[tokens.shape[0]]
        tok.copy_(tokens)
        pos.copy_(p)
        g.replay()
        return out
    return run


def generate(run, prompt: list[int], n_tokens: int, device: str):
    """Prefill ``prompt`` in one forward, then ``n_tokens`` greedy steps, the tokens
    kept on the device until the end; (tokens, prefill s, decode s)."""
    import torch

    with torch.no_grad():
        return _generate(run, prompt, n_tokens, device)


def _generate(run, prompt, n_tokens, device):
    import time

    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    p = torch.tensor(prompt, device=device)
    sync()
    t0 = time.perf_counter()
    logits = run(p, torch.arange(len(p), device=device))
    tok = logits[-1:].argmax(-1)
    sync()
    t1 = time.perf_counter()
    out = [tok]
    for i in range(n_tokens - 1):
        tok = run(tok, torch.tensor([len(p) + i], device=device)).argmax(-1)
        out.append(tok)
    sync()
    t2 = time.perf_counter()
    return [int(t) for t in torch.cat(out).tolist()], t1 - t0, t2 - t1
