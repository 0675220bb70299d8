"""The arguments of ``gpudsl.ops.attention`` with grouped-query heads, a batch of
sequences of their own lengths, or a paged KV cache (issue 37): checked here (a
``gpudsl.Error`` naming the argument at fault), run by :mod:`.attention_paged`'s
kernel.  :func:`gqa_call` gives ``(proc, keyword arguments, result, fault flag,
host_checked)``; ``gpudsl.ops`` runs the proc and, unless the lengths and the table
were checked on the host, reads the fault flag back.

The forms (``H`` query heads, ``Hkv`` key/value heads, ``H % Hkv == 0``):

- ``q [H, M, D]``, ``k, v [Hkv, N, D]``, ``prefix`` (int or int64 tensor, default
  ``N``): one sequence, as the plain ``attention`` but grouped;
- ``q [B, H, M, D]``, ``k, v [B, Hkv, N, D]``, ``seq_lens`` (``[B]``, default all
  ``N``): a batch of contiguous caches;
- ``q [B, H, M, D]``, ``k, v [pages, P, Hkv, D]`` (or ``[pages, P, Hkv * D]`` with
  ``kv_heads``), ``block_table`` (``[B, max_pages]``), ``seq_lens`` (``[B]``): a paged
  cache, ``P`` one of 16, 32, 64, 128, 256.

``block_table`` and ``seq_lens`` are int32 (as vLLM's) or int64 (a graph's), one type."""
from __future__ import annotations

import math

import numpy as np

from .attention_gqa_mma import plan_grouped
from .attention_paged import HEAD_DIMS, PAGE_SIZES
from .halves import NUMPY, common_dtype
from .op_arguments import (_ANY_FLOAT, _is_array, _is_device, _is_scalar, as_int,
                           check_tensor, contig, empty, index_tensor, is_host_int)
from .shapes import require


def wants_gqa(q, k, kv_heads, block_table, seq_lens, window=0, softcap=None,
              alibi=None) -> bool:
    """Whether the call needs the grouped/paged kernel (else the plain ``attention``):
    grouped heads, a batch or a paged cache; or ``window`` / ``softcap`` / ``alibi``
    where the plain kernels take none of them (a decode, ``M <= SPLIT_MAX_ROWS``, or a
    head dimension the tiled kernel does not take)."""
    from .attention import SPLIT_MAX_ROWS, takes_options

    if block_table is not None or seq_lens is not None or kv_heads is not None:
        return True
    qs, ks = getattr(q, "shape", ()), getattr(k, "shape", ())
    if len(qs) != 3 or len(ks) != 3 or qs[0] != ks[0]:
        return True
    return bool(window or softcap or alibi is not None) and \
        (qs[1] <= SPLIT_MAX_ROWS or not takes_options(qs[2]))


def alibi_arg(q, heads: int, slopes):
    """The ALiBi slopes checked: float32 ``[heads]`` (one a query head, as
    FlashAttention's ``alibi_slopes``), contiguous, where ``q`` lives (a list or tuple
    of numbers is made one); None stays None."""
    if slopes is None:
        return None
    if isinstance(slopes, (list, tuple)):
        require(all(_is_scalar(x) and not isinstance(x, bool) for x in slopes),
                f"alibi_slopes must be numbers, not {slopes!r:.60}")
        host = np.asarray(slopes, np.float32)
        if hasattr(q, "new_empty"):  # torch
            import torch

            slopes = torch.as_tensor(host, device=q.device)
        else:
            require(not _is_device(q), "alibi_slopes as a list needs numpy q; give a "
                    "float32 device array")
            slopes = host
    shape = check_tensor("alibi_slopes", slopes, ranks=(1,), dtypes=("float32",))
    require(tuple(shape) == (heads,), f"alibi_slopes has shape {tuple(shape)}, expected "
            f"({heads},): one slope a query head")
    require(_is_device(slopes) == _is_device(q), "alibi_slopes must live where q does "
            f"(q {'on a device' if _is_device(q) else 'on the host'})")
    return contig(slopes)


def options(causal, window, softcap) -> tuple[int, float | None]:
    """``window`` (None or 0: none; an int >= 1, with ``causal``) and ``softcap`` (None:
    none; a positive finite number) checked: ``(window or 0, softcap)``."""
    if window is not None:
        window = as_int("window", window)
        require(window >= 0, f"window={window} is negative (0 or None: no window)")
        require(window == 0 or bool(causal), "window= needs causal=True: row i attends the "
                "keys (p - window, p] of its position p")
    if softcap is not None:
        require(_is_scalar(softcap) and not _is_array(softcap) and
                math.isfinite(float(softcap)) and float(softcap) > 0,
                f"softcap must be a positive number, not {softcap!r:.40}")
        softcap = float(softcap)
    return window or 0, softcap


def _int_array(name, x, shape):
    s = check_tensor(name, x, ranks=(len(shape),), dtypes=("int32", "int64"))
    require(tuple(s) == tuple(shape), f"{name} has shape {tuple(s)}, expected {tuple(shape)}")
    return contig(x)


def _idx(x) -> str:
    return "i64" if str(x.dtype).replace("torch.", "") == "int64" else "i32"


def _lens_from_prefix(q, prefix, n):
    """The one sequence's length as an int64 ``[1]`` tensor where ``q`` lives, and its
    value when given on the host."""
    if prefix is None or is_host_int(prefix):
        value = n if prefix is None else as_int("prefix", prefix)
        return index_tensor(q, "prefix", value), value
    require(_is_array(prefix) and tuple(prefix.shape) == (1,) and _idx(prefix) == "i64",
            f"prefix must be an int or a one-element int64 tensor, got {prefix!r:.60}")
    return prefix, None


def _heads(H, hkv, kv_heads):
    if kv_heads is not None:
        kv_heads = as_int("kv_heads", kv_heads)
        require(kv_heads == hkv, f"kv_heads={kv_heads} but the keys have {hkv} heads")
    require(hkv >= 1 and H % hkv == 0, f"the {H} query heads are not a multiple of the "
            f"{hkv} key/value heads (grouped-query attention needs Hkv | H)")
    return H // hkv


def _check_host(lens, table, low, cap, pages, page):
    """The lengths (and the pages they use) checked before the kernel runs."""
    for b, L in enumerate(np.asarray(lens).reshape(-1).tolist()):
        require(low <= L <= cap, f"sequence {b}'s length {L} is outside [{low}, {cap}]"
                + (" (causal: at least the query rows)" if low > 1 else ""))
        if table is not None:
            used = np.asarray(table)[b, :-(-L // page)]
            bad = used[(used < 0) | (used >= pages)]
            require(bad.size == 0, f"block_table[{b}] names page {int(bad[0]) if bad.size else 0}"
                    f" outside the {pages} pages of the cache")


class _Form:
    """What the checks of one form found: the arrays as the kernel takes them, the
    sizes, the capacity and the page size (0: contiguous)."""

    def __init__(self, q, k, v, B, H, M, hkv, cap, lens, table=None, page=0, pages=0,
                 host_len=None):
        self.q, self.k, self.v, self.B, self.H, self.M, self.hkv = q, k, v, B, H, M, hkv
        self.cap, self.lens, self.table, self.page, self.pages = cap, lens, table, page, pages
        self.host_len = host_len


def _paged(q, k, v, qs, ks, d, prefix, kv_heads, block_table, seq_lens) -> _Form:
    require(prefix is None, "prefix and block_table exclude each other: give seq_lens")
    require(seq_lens is not None, "a paged cache (block_table) needs seq_lens")
    require(len(qs) == 4, f"with block_table q must be [B, H, M, D], not {tuple(qs)}")
    if len(ks) == 3:  # [pages, P, Hkv * D]: the heads are kv_heads
        require(kv_heads is not None and ks[2] % as_int("kv_heads", kv_heads) == 0,
                f"a paged cache {tuple(ks)} of rank 3 ([pages, P, Hkv * D]) needs "
                "kv_heads= dividing its last axis")
        hk = as_int("kv_heads", kv_heads)
        ks = (ks[0], ks[1], hk, ks[2] // hk)
        k, v = k.reshape(ks), v.reshape(ks)
    pages, page, hkv, dk = ks
    require(page in PAGE_SIZES, f"the page size {page} (axis 1 of the cache) is not one "
            f"of {PAGE_SIZES}")
    require(dk == d, f"the cache's head dimension {dk} differs from q's {d}")
    B, H, M = qs[:3]
    ts = check_tensor("block_table", block_table, ranks=(2,), dtypes=("int32", "int64"))
    table = _int_array("block_table", block_table, (B, ts[1]))
    lens = _int_array("seq_lens", seq_lens, (B,))
    require(_idx(table) == _idx(lens), f"block_table ({table.dtype}) and seq_lens "
            f"({lens.dtype}) must have one integer type")
    return _Form(q, k, v, B, H, M, hkv, int(ts[1]) * page, lens, table, page, pages)


def _contiguous(q, k, v, qs, ks, d, prefix, kv_heads, seq_lens) -> _Form:
    require(kv_heads is None or len(ks) == len(qs), "kv_heads with k of another rank")
    if len(qs) == 3:  # one sequence: its length is the prefix
        require(seq_lens is None, "seq_lens needs q [B, H, M, D] and k, v [B, Hkv, N, D]")
        require(len(ks) == 3, f"q [H, M, D] needs k, v [Hkv, N, D], not {tuple(ks)}")
        (H, M), (hkv, n, dk) = qs[:2], ks
        q, k, v = (a.reshape((1,) + tuple(a.shape)) for a in (q, k, v))
        lens, host_len = _lens_from_prefix(q, prefix, n)
        B = 1
    else:
        require(prefix is None, "prefix with a batch: give seq_lens")
        require(len(ks) == 4 and ks[0] == qs[0], f"q {tuple(qs)} needs k, v [B, Hkv, N, D] "
                f"with the same B, not {tuple(ks)}")
        (B, H, M), (_, hkv, n, dk) = qs[:3], ks
        host_len = None
        if seq_lens is None:
            lens = empty(q, (B,), np.int32)
            lens[...] = n
        else:
            lens = _int_array("seq_lens", seq_lens, (B,))
    require(dk == d, f"the keys' head dimension {dk} differs from q's {d}")
    return _Form(q, k, v, B, H, M, hkv, n, lens, host_len=host_len)


def gqa_call(q, k, v, causal, prefix, scale, kv_heads, block_table, seq_lens, window=0,
             softcap=None, target=None, alibi=None):
    """``(proc, keyword arguments, result, fault flag, host_checked)``; ``window`` and
    ``softcap`` as :func:`options` gives them, ``alibi`` the slopes (``[H]``); ``target``:
    the backend (``"cuda"``: a half decode of 4 or more heads per KV head runs on
    tensor cores)."""
    qs, ks, vs = (check_tensor(name, a, ranks=(3, 4), dtypes=_ANY_FLOAT) for name, a in
                  (("q", q), ("k", k), ("v", v)))
    dt = common_dtype("attention", q=q, k=k, v=v)
    require(isinstance(causal, (bool, np.bool_)), f"causal must be a bool, not {causal!r}")
    require(tuple(ks) == tuple(vs), f"the keys {tuple(ks)} and values {tuple(vs)} differ")
    d = qs[-1]
    require(d in HEAD_DIMS, f"head dimension {d} is not supported with grouped heads, "
            f"seq_lens or block_table; the kernel takes {', '.join(map(str, HEAD_DIMS))}")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    require(_is_scalar(scale) and not _is_array(scale),
            f"scale must be a number, not {type(scale).__name__} {scale!r:.40}")
    q, k, v = contig(q), contig(k), contig(v)
    f = (_paged(q, k, v, qs, ks, d, prefix, kv_heads, block_table, seq_lens)
         if block_table is not None else
         _contiguous(q, k, v, qs, ks, d, prefix, kv_heads, seq_lens))
    G = _heads(f.H, f.hkv, kv_heads)
    low = f.M if causal else 1
    host = not _is_device(f.lens) and (f.table is None or not _is_device(f.table))
    if f.host_len is None and host:
        _check_host(f.lens, f.table, low, f.cap, f.pages, f.page)
    elif f.host_len is not None:
        require(low <= f.host_len <= f.cap, f"prefix {f.host_len} is outside [{low}, "
                f"{f.cap}]" + (" (causal: at least the query rows)" if causal else ""))
    alibi = alibi_arg(q, f.H, alibi)
    p = plan_grouped(d, bool(causal), G, f.M, f.page, dt, _idx(f.lens), window,
                     softcap is not None, target, alibi is not None)
    out = empty(q, (f.B, f.hkv, G, f.M, d), NUMPY[dt])
    err = empty(q, (1,), np.int32)
    err[...] = 0
    args = dict(q=f.q.reshape(f.B, f.hkv, G, f.M, d), k=f.k, v=f.v, lens=f.lens,
                scale=np.float32(scale), out=out, err=err)
    if softcap is not None:
        args["cap"] = np.float32(softcap)
    if alibi is not None:
        args["slopes"] = alibi.reshape(f.hkv, G)
    if f.table is not None:
        args["table"] = f.table
    return p, args, out.reshape(tuple(qs)), err, host or f.host_len is not None


__all__ = ["gqa_call", "wants_gqa", "options", "alibi_arg"]
