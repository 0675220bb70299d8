"""``gpudsl bench``'s attention cases and their references (issue 34).

Each case is ``ops.attention`` on ``q [B*H, M, D]``, ``k, v [B*H, N, D]`` against
PyTorch's ``scaled_dot_product_attention`` on the same data viewed 4-D, ``[B, H, M, D]``
(the shape its fused kernels take), run once under each backend
``torch.nn.attention.sdpa_kernel`` can force: FLASH_ATTENTION, CUDNN_ATTENTION,
EFFICIENT_ATTENTION, MATH.  A backend that refuses the case (flash and cuDNN take no
float32) is recorded with its reason; every one that runs is timed and checked, and the
fastest correct one is the row's reference.  On the emulator the reference is numpy's
float64 ``attention_reference`` (backend ``numpy``).

FLOPs are counted as the FlashAttention papers count them: ``4 B H M N D``, halved
when causal (and M == N).  Decode rows (one query row) also carry the bytes they must
move (q, k, v and the output once) and their rate against a device copy of as many
bytes (``copy_fraction``): decode attention is bandwidth-bound.

``attention``: a decode shape and a causal prefill shape, float32, and a causal prefill
in float16 (16 heads, 4096 rows and keys, D 128: on an H100/H200 the sm_90a kernel).
Half prefill rows name the proc that ran (``kernel``).
``attention_suite``: the FlashAttention papers' sweep: 16k tokens in all (``B = 16384 /
seqlen``), hidden size 2048 (``H = 2048 / D``), head dim 64 and 128, seqlen 512 to 8192,
causal and not, float16 and bfloat16, in ascending seqlen (a run stopped by its time
limit keeps the smaller ones).
``attention_gqa_decode``: one decode step of grouped-query attention (LLaMA-3 8B's
heads: 32 query heads on 8 KV heads, D 128) over 4096 and 16384 cached keys, float16
and bfloat16 (on CUDA the tensor-core GQA decode), against SDPA with ``enable_gqa``;
a fraction of the copy rate too.
``attention_options``: a causal prefill with a sliding window and ALiBi (32 heads,
seqlen 2048, D 128, window 512, float16 and bfloat16), against SDPA given the same
meaning as an explicit float mask (its only form of either option; a backend that
refuses the mask is recorded with its reason). FLOPs counted as the causal case's.
"""
from __future__ import annotations

SDPA_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
SUITE_TOKENS, SUITE_HIDDEN = 16384, 2048
SUITE_SEQLENS = (512, 1024, 2048, 4096, 8192)
EMU_SUITE = (64, 64, (16, 32), (32, 64))  # tokens, hidden, seqlens, head dims
MATH_LIMIT_BYTES = 16 * 2**30  # MATH materializes B H M N scores: skipped above this


def flops(b: int, h: int, m: int, n: int, d: int, causal: bool) -> float:
    """FlashAttention's count: two products of 2 B H M N D each; causal squares halve."""
    return 4.0 * b * h * m * n * d * (0.5 if causal and m == n else 1.0)


def io_bytes(b: int, h: int, m: int, n: int, d: int, itemsize: int) -> int:
    """What attention must move at least: q and the output (M rows), k and v (N rows)."""
    return itemsize * b * h * d * (2 * m + 2 * n)


def attention_cases(env, small: bool, nodes: set) -> list:
    out = []
    if "attention" in nodes:
        shapes = ([(1, 2, 1, 64, 64, False), (1, 2, 32, 32, 64, True)] if small else
                  [(1, 32, 1, 4096, 128, False), (1, 32, 1024, 1024, 128, True)])
        out += [_case(env, "attention", s, "float32") for s in shapes]
        # a half prefill: on an H100/H200 the sm_90a kernel (TMA and wgmma), FA3's shape
        half = (1, 2, 70, 70, 64, True) if small else (1, 16, 4096, 4096, 128, True)
        out.append(_case(env, "attention", half, "float16"))
    if "attention_suite" in nodes:
        tokens, hidden, seqlens, dims = EMU_SUITE if small else (
            SUITE_TOKENS, SUITE_HIDDEN, SUITE_SEQLENS, (64, 128))
        for s in seqlens:
            for d in dims:
                for causal in (False, True):
                    for dt in ("float16", "bfloat16"):
                        shape = (tokens // s, hidden // d, s, s, d, causal)
                        out.append(_case(env, "attention_suite", shape, dt))
    if "attention_options" in nodes:
        shape = (2, 32, 64, 8) if small else (32, 2048, 128, 512)
        out += [_options_case(env, shape, dt) for dt in ("float16", "bfloat16")]
    if "attention_gqa_decode" in nodes:
        shapes = [(8, 2, 64, 64)] if small else [(32, 8, 4096, 128), (32, 8, 16384, 128)]
        out += [_gqa_case(env, s, dt) for s in shapes for dt in ("float16", "bfloat16")]
    return out


def _gqa_case(env, shape: tuple, dtype: str):
    """``ops.attention`` on ``q [H, 1, D]`` and ``k, v [Hkv, N, D]``."""
    from .case_timing import Case, Ref
    from ..stdlib import array_ops as ops
    from ..stdlib.attention import attention_reference

    h, hkv, n, d = shape
    q = env.cast(env.randn(h, 1, d), dtype)
    k, v = (env.cast(env.randn(hkv, n, d), dtype) for _ in range(2))
    nbytes = 2 * d * (2 * h + 2 * hkv * n)
    if env.backend != "cuda":
        want = lambda: attention_reference(q, k, v)  # noqa: E731
        refs = [Ref("numpy float64 reference", "numpy", want)]
    else:
        q4, k4, v4 = (a.view(1, *a.shape) for a in (q, k, v))
        sdpa = env.torch.nn.functional.scaled_dot_product_attention

        def want():
            wide = [a.float() for a in (q4, k4, v4)]
            return sdpa(*wide, enable_gqa=True).reshape(q.shape)
        refs = [Ref("torch SDPA", name, _gqa_sdpa(env.torch, name, q4, k4, v4),
                    view=lambda r, shape=q.shape: r.reshape(shape))
                for name in SDPA_BACKENDS]
    return Case("attention_gqa_decode", f"{h}/{hkv}x1x{n}x{d} {dtype}", "flops",
                flops(1, h, 1, n, d, False), lambda: ops.attention(q, k, v), want, None,
                elements=nbytes // 8, tol=1e-2, refs=refs,
                extra={"dtype": dtype, "causal": False, "heads": h, "kv_heads": hkv,
                       "bytes": nbytes,
                       "flops_convention": "FlashAttention: 4 B H M N D"})


def _options_case(env, shape: tuple, dtype: str):
    """``ops.attention(causal=True, window=, alibi_slopes=)`` on ``q, k, v [H, S, D]``."""
    from .case_timing import Case, Ref
    from ..stdlib import array_ops as ops
    from ..stdlib.attention import attention_reference

    h, s, d, window = shape
    q, k, v = (env.cast(env.randn(h, s, d), dtype) for _ in range(3))
    slopes = [2.0 ** (-8.0 * (i + 1) / h) for i in range(h)]  # ALiBi's geometric slopes
    if env.backend != "cuda":
        alibi = slopes

        def want():
            return attention_reference(q, k, v, True, None, None, window, None, slopes)
        refs = [Ref("numpy float64 reference", "numpy", want)]
    else:
        torch = env.torch
        alibi = torch.tensor(slopes, dtype=torch.float32, device=q.device)
        pos = torch.arange(s, device=q.device)
        dist = (pos[:, None] - pos[None, :]).float()
        keep = (dist >= 0) & (dist < window)
        mask = (-alibi[:, None, None] * dist.abs()).masked_fill(~keep, float("-inf"))[None]
        q4, k4, v4 = (a.view(1, h, s, d) for a in (q, k, v))

        def want():
            return _masked_sdpa(torch, None, q4.float(), k4.float(), v4.float(),
                                mask)().reshape(q.shape)
        refs = [Ref("torch SDPA", name, _masked_sdpa(torch, name, q4, k4, v4,
                                                     mask.to(q.dtype)),
                    view=lambda r, shape=q.shape: r.reshape(shape))
                for name in SDPA_BACKENDS]
    return Case("attention_options", f"{h}x{s}x{s}x{d} causal window {window} alibi {dtype}",
                "flops", flops(1, h, s, s, d, True),
                lambda: ops.attention(q, k, v, causal=True, window=window, alibi_slopes=alibi),
                want, None, tol=1e-2, refs=refs,
                extra={"dtype": dtype, "causal": True, "heads": h, "window": window,
                       "alibi": True,
                       "flops_convention": "FlashAttention: 4 B H M N D, halved when causal"})


def _masked_sdpa(torch, backend, q4, k4, v4, mask):
    """SDPA with the float ``mask`` (``backend`` None: torch's choice)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def call():
        if backend is None:
            return sdpa(q4, k4, v4, attn_mask=mask)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([getattr(SDPBackend, backend)]):
            return sdpa(q4, k4, v4, attn_mask=mask)
    return call


def _gqa_sdpa(torch, backend: str, q4, k4, v4):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    which = getattr(SDPBackend, backend)

    def call():
        with sdpa_kernel([which]):
            return sdpa(q4, k4, v4, enable_gqa=True)
    return call


def _case(env, node: str, shape: tuple, dtype: str):
    from .case_timing import Case
    from ..stdlib import array_ops as ops

    b, h, m, n, d, causal = shape
    q, k, v = (env.cast(env.randn(b * h, rows, d), dtype) for rows in (m, n, n))
    itemsize = 4 if dtype == "float32" else 2
    size = (f"{b}x{h}x{m}x{n}x{d}" if b > 1 else f"{h}x{m}x{n}x{d}") + \
        (" causal" if causal else "") + ("" if dtype == "float32" else f" {dtype}")
    decode = m == 1
    return Case(node, size, "flops", flops(b, h, m, n, d, causal),
                lambda: ops.attention(q, k, v, causal), _want(env, (q, k, v), b, h, causal),
                None, elements=io_bytes(b, h, m, n, d, itemsize) // 8 if decode else 0,
                tol=1e-4 if dtype == "float32" else 1e-2,
                refs=_references(env, (q, k, v), (b, h, m, n, d), causal),
                extra={"dtype": dtype, "causal": causal, "batch": b, "heads": h,
                       "kernel": planned_kernel(env.backend, shape, dtype),
                       "flops_convention": "FlashAttention: 4 B H M N D, halved when causal",
                       **({"bytes": io_bytes(b, h, m, n, d, itemsize)} if decode else {})})


def planned_kernel(backend: str, shape: tuple, dtype: str) -> str | None:
    """The proc ``ops.attention`` runs for a half prefill ``shape`` on ``backend``
    (``"cuda"``: the device's architecture; sm_90a: ``attention_sm90``), None for the
    other cases (their kernel is the node's plan, as for every node)."""
    b, h, m, n, d, causal = shape
    if dtype == "float32" or m == 1:
        return None
    from ..stdlib.attention_sm90 import plan_prefill

    dt = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    return plan_prefill(m, d, causal, b * h, n, dt=dt, target=backend).name


def _want(env, qkv, b: int, h: int, causal: bool):
    """The expected result: numpy's float64 reference on the emulator; on the GPU SDPA
    in float64 for float32 inputs (the math backend), in float32 for halves on 4-D
    views (so a memory-efficient kernel may run: the math path would hold every score,
    17 GB at seqlen 8192)."""
    q, k, v = qkv
    if env.backend != "cuda":
        from ..stdlib.attention import attention_reference

        return lambda: attention_reference(q, k, v, causal)
    sdpa = env.torch.nn.functional.scaled_dot_product_attention
    torch = env.torch
    if q.dtype == torch.float32:
        return lambda: sdpa(q.double(), k.double(), v.double(), is_causal=causal)

    def want():
        wide = [a.float().view(b, h, a.shape[1], a.shape[2]) for a in qkv]
        return sdpa(*wide, is_causal=causal).reshape(q.shape)
    return want


def _references(env, qkv, shape, causal) -> list:
    """(name, backend, callable or the reason it is skipped) for each reference."""
    from .case_timing import Ref

    if env.backend != "cuda":
        from ..stdlib.attention import attention_reference

        q, k, v = qkv
        return [Ref("numpy float64 reference", "numpy",
                    lambda: attention_reference(q, k, v, causal))]
    b, h, m, n, d = shape
    q4, k4, v4 = (a.view(b, h, a.shape[1], d) for a in qkv)
    refs = []
    for name in SDPA_BACKENDS:
        if name == "MATH" and 4 * b * h * m * n > MATH_LIMIT_BYTES:
            refs.append(Ref("torch SDPA", name, f"skipped: the MATH backend would "
                            f"materialize {4 * b * h * m * n / 2**30:.0f} GiB of scores"))
            continue
        refs.append(Ref("torch SDPA", name, sdpa_call(env.torch, name, q4, k4, v4, causal),
                        view=lambda r, shape=qkv[0].shape: r.reshape(shape)))
    return refs


def sdpa_call(torch, backend: str, q4, k4, v4, causal: bool):
    """``scaled_dot_product_attention`` on 4-D tensors with only ``backend`` allowed."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    which = getattr(SDPBackend, backend)

    def call():
        with sdpa_kernel([which]):
            return sdpa(q4, k4, v4, is_causal=causal)
    return call
