"""How ``gpudsl.ops.attention`` runs a call (:func:`run_attention`): grouped-query
heads, a batch of sequences or a paged cache through :mod:`.attention_call`'s checks and
the grouped kernel; plain heads through the node table's kernel (float32) or the
prefill :mod:`.attention_sm90` plans (halves, ALiBi slopes).  :mod:`.array_ops` keeps
the op's signature and documentation; the kernels run through it (its ``backend`` and
``_run``, looked up at each call, as :mod:`.ops_fast`'s recipes do)."""
from __future__ import annotations

import math
import sys

import numpy as np

from .attention_call import alibi_arg, gqa_call, options, wants_gqa
from .halves import NUMPY, common_dtype
from .op_arguments import (_ANY_FLOAT, _is_array, _is_scalar, as_int, contig, empty,
                           index_tensor, is_host_int, is_int64, table_rule)
from .shapes import require


def _ops():
    """``gpudsl.stdlib.array_ops`` (the module ``gpudsl.ops`` is), at each call."""
    return sys.modules["gpudsl.stdlib.array_ops"]


def run_attention(q, k, v, causal, prefix, scale, kv_heads, block_table, seq_lens, window,
                  softcap, alibi_slopes):
    """``gpudsl.ops.attention(...)``'s result (its documentation says what each argument
    is); every refusal a ``gpudsl.Error``."""
    ops = _ops()
    window, softcap = options(causal, window, softcap)
    if wants_gqa(q, k, kv_heads, block_table, seq_lens, window, softcap, alibi_slopes):
        p, args, out, err, host_checked = gqa_call(q, k, v, causal, prefix, scale, kv_heads,
                                                   block_table, seq_lens, window, softcap,
                                                   ops.backend(), alibi_slopes)
        ops._run(p, **args)
        if not host_checked:
            ops._raise_on_fault(err, "a sequence length read from the device is outside "
                                "its bounds, or the block table names a page outside the "
                                "cache")
        return out
    qs, ks, vs = (ops.check_tensor(name, a, ranks=(3,), dtypes=_ANY_FLOAT) for name, a in
                  (("q", q), ("k", k), ("v", v)))
    dt = common_dtype("attention", q=q, k=k, v=v)
    require(isinstance(causal, (bool, np.bool_)), f"causal must be a bool, not {causal!r}")
    h, m, d = qs
    n = ks[1]
    # the prefix is checked below, as an int or a tensor: the rule sees the full one
    table_rule("attention", (q, k, v), {"causal": bool(causal), "prefix": n,
                                        "window": window, "softcap": softcap})
    low = m if causal else 1
    if prefix is None:
        prefix = n
    on_host = is_host_int(prefix)
    if on_host:
        value = as_int("prefix", prefix)
        require(1 <= value <= n, f"prefix {value} is outside [1, {n}], the keys")
        require(value >= low, f"prefix {value} is below the {m} query rows; with "
                "causal=True the first row would attend no key")
    prefix = index_tensor(q, "prefix", prefix)
    require(tuple(prefix.shape) == (1,) and is_int64(prefix),
            f"prefix must be an int64 tensor of one element, got shape "
            f"{tuple(prefix.shape)} and dtype {prefix.dtype}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    require(_is_scalar(scale) and not _is_array(scale),
            f"scale must be a number, not {type(scale).__name__} {scale!r:.40}")
    slopes = alibi_arg(q, h, alibi_slopes)
    if dt != "f32" or slopes is not None:  # halves: read widened, f32 softmax, rounded once
        from .attention_sm90 import plan_prefill

        q, k, v = contig(q), contig(k), contig(v)
        out = empty(q, qs, NUMPY[dt])
        err = ops._zeros(q, (1,), np.int32)
        p = plan_prefill(m, d, bool(causal), h, n, dt=dt, target=ops.backend(),
                         window=window, softcap=softcap is not None,
                         alibi=slopes is not None)
        extra = {} if softcap is None else {"cap": np.float32(softcap)}
        if slopes is not None:
            extra["slopes"] = slopes
        ops._run(p, q=q, k=k, v=v,
                 prefix=prefix, scale=np.float32(scale), out=out, err=err, **extra)
    else:
        out, err = ops._launch("attention", (contig(q), contig(k), contig(v), prefix),
                               {"causal": bool(causal), "scale": np.float32(scale),
                                "window": window, "softcap": softcap})
    if not on_host:
        ops._raise_on_fault(err, f"the prefix read from the device is outside [{low}, {n}]"
                            + (" (causal: at least the query rows)" if causal else ""))
    return out


__all__ = ["run_attention"]
