"""The standard library's nodes as PyTorch operators ``gpudsl::NAME``, with fake
implementations (their shape rules) and gradients.

Each operator runs ``gpudsl.ops.NAME`` (CPU tensors on the emulator, or on the GPU
where there is one; CUDA tensors on the GPU, on torch's current stream) and returns a
new tensor.  The gradients are compositions of these operators (so they run gpudsl's
kernels, and double backward works where those have gradients) plus torch's
reductions (``sum_to_size`` for broadcasting, row sums); the row-wise ones compute in
float32 and round once to the operand's dtype.
"""
from __future__ import annotations

import torch

from ..stdlib import array_ops as _ops
from ..stdlib.rms_norm import DEFAULT_EPS
from .node_operator import node
from .register import backward

_LIB = "gpudsl"


def _detached(*ts):
    return tuple(t.detach() if isinstance(t, torch.Tensor) else t for t in ts)


def _define(name: str, schema: str, run, fake):
    """Operator ``gpudsl::name`` running ``run`` (gpudsl.ops on detached tensors)."""
    def impl(*args, **kwargs):
        out = run(*_detached(*args), **kwargs)
        return out.clone() if any(out is a for a in args) else out  # never an input
    custom = torch.library.custom_op(f"{_LIB}::{name}", impl, mutates_args=(),
                                     schema=schema)
    custom.register_fake(fake)
    return custom


# ------------------------------------------------------------------ pointwise


def _broadcast_fake(a, b):
    return a.new_empty(torch.broadcast_shapes(a.shape, b.shape))


add = _define("add", "(Tensor a, Tensor b) -> Tensor", _ops.add, _broadcast_fake)
mul = _define("mul", "(Tensor a, Tensor b) -> Tensor", _ops.mul, _broadcast_fake)
relu = _define("relu", "(Tensor x) -> Tensor", _ops.relu, lambda x: torch.empty_like(x))
silu = _define("silu", "(Tensor x) -> Tensor", _ops.silu, lambda x: torch.empty_like(x))


@backward(add)
def _add_backward(ctx, g):
    return {"a": g.sum_to_size(ctx.a.shape), "b": g.sum_to_size(ctx.b.shape)}


@backward(mul)
def _mul_backward(ctx, g):
    return {"a": mul(g, ctx.b).sum_to_size(ctx.a.shape),
            "b": mul(g, ctx.a).sum_to_size(ctx.b.shape)}


@backward(relu)
def _relu_backward(ctx, g):
    return {"x": mul(g, (ctx.x > 0).to(g.dtype))}


@backward(silu)
def _silu_backward(ctx, g):
    x = ctx.x.float()
    s = torch.sigmoid(x)
    return {"x": mul(g, (s * (1 + x * (1 - s))).to(g.dtype))}


# ------------------------------------------------------------------ matmul, permute


def _matmul_fake(a, b):
    return a.new_empty(tuple(a.shape[:-1]) + (b.shape[-1],))


matmul = _define("matmul", "(Tensor a, Tensor b) -> Tensor", _ops.matmul, _matmul_fake)


def _permute_fake(x, perm):
    return x.new_empty(tuple(x.shape[p] for p in perm))


permute = _define("permute", "(Tensor x, int[] perm) -> Tensor",
                  lambda x, perm: _ops.permute(x, tuple(perm)), _permute_fake)


@backward(permute)
def _permute_backward(ctx, g):
    inverse = [0] * len(ctx.perm)
    for i, p in enumerate(ctx.perm):
        inverse[p] = i
    return {"x": permute(g, inverse), "perm": None}


def _transposed(t):
    """The last two axes swapped (a copy, by gpudsl's permute)."""
    return permute(t, [0, 2, 1] if t.dim() == 3 else [1, 0])


@backward(matmul)
def _matmul_backward(ctx, g):
    a, b = ctx.a, ctx.b
    ga = matmul(g, _transposed(b))
    if a.dim() == 1:  # [n] @ [n, k]: the outer product a^T g
        gb = matmul(a.reshape(-1, 1), g.reshape(1, -1))
    else:
        gb = matmul(_transposed(a), g)
    return {"a": ga, "b": gb}


# ------------------------------------------------------------------ rows


rms_norm = _define("rms_norm", "(Tensor x, Tensor w) -> Tensor", _ops.rms_norm,
                   lambda x, w: torch.empty_like(x))


@backward(rms_norm)
def _rms_norm_backward(ctx, g):
    x, w, g32 = ctx.x.float(), ctx.w.float(), g.float()
    r = torch.rsqrt((x * x).mean(-1, keepdim=True) + DEFAULT_EPS)
    gw = g32 * w
    gx = r * gw - x * r ** 3 * (gw * x).mean(-1, keepdim=True)
    gwt = (g32 * x * r).reshape(-1, x.shape[-1]).sum(0)
    return {"x": gx.to(ctx.x.dtype), "w": gwt.to(ctx.w.dtype)}


def _softmax_run(x):
    return _ops.sliced_softmax(x, int(x.shape[-1]))


softmax = _define("softmax", "(Tensor x) -> Tensor", _softmax_run,
                  lambda x: torch.empty_like(x))
sliced_softmax = _define("sliced_softmax", "(Tensor x, int prefix) -> Tensor",
                         _ops.sliced_softmax, lambda x, prefix: torch.empty_like(x))


def _softmax_grad(y, g):
    y32, g32 = y.float(), g.float()
    return (y32 * (g32 - (g32 * y32).sum(-1, keepdim=True))).to(g.dtype)


@backward(softmax)
def _softmax_backward(ctx, g):
    return {"x": _softmax_grad(ctx.result, g)}


@backward(sliced_softmax)
def _sliced_softmax_backward(ctx, g):
    k = ctx.prefix
    gx = g.clone()
    gx[..., :k] = _softmax_grad(ctx.result[..., :k], g[..., :k])
    return {"x": gx, "prefix": None}


# ------------------------------------------------------------------ complex, attention


complex_hadamard_product = node("complex_hadamard_product",
                                f"{_LIB}::complex_hadamard_product", operands=("a", "b"))


@backward(complex_hadamard_product)
def _complex_backward(ctx, g):
    def conj(t):  # (re, im) -> (re, -im): the product's gradient takes the conjugates
        return mul(t, torch.tensor([1.0, -1.0], dtype=t.dtype, device=t.device).expand_as(t).contiguous())

    return {"a": complex_hadamard_product(g, conj(ctx.b)),
            "b": complex_hadamard_product(g, conj(ctx.a)).sum_to_size(ctx.b.shape)}


_ATTENTION_SCHEMA = ("(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
                     "int? window=None, float? softcap=None, Tensor? alibi_slopes=None) "
                     "-> Tensor")


def _attention_run(q, k, v, causal=False, scale=None, window=None, softcap=None,
                   alibi_slopes=None):
    return _ops.attention(q, k, v, causal=causal, scale=scale, window=window,
                          softcap=softcap, alibi_slopes=alibi_slopes)


def _attention_fake(q, k, v, causal=False, scale=None, window=None, softcap=None,
                    alibi_slopes=None):
    return torch.empty_like(q)


#: ``gpudsl::attention(q, k, v, causal, scale, window, softcap, alibi_slopes)``: as
#: ``gpudsl.ops.attention`` over whole sequences: ``q [H, M, D]`` or ``[B, H, M, D]``,
#: ``k, v`` with ``Hkv`` heads dividing ``H`` (grouped-query attention by shape)
attention = _define("attention", _ATTENTION_SCHEMA, _attention_run, _attention_fake)


def _scores(ctx, q, k):
    """The scores as the forward makes them, ``[.., H, M, N]`` in float32: scaled,
    soft-capped (with ``tanh`` of them, for the gradient), biased, masked."""
    m, n = q.shape[-2], k.shape[-2]
    scale = ctx.scale if ctx.scale is not None else q.shape[-1] ** -0.5
    s = matmul(q.reshape(-1, m, q.shape[-1]), _transposed(k.reshape(-1, n, k.shape[-1])))
    s = s.reshape(q.shape[:-1] + (n,)) * scale
    th = None
    if ctx.softcap is not None:
        th = torch.tanh(s / ctx.softcap)
        s = ctx.softcap * th
    i = torch.arange(m, device=q.device).reshape(m, 1) + (n - m)  # the rows' positions
    j = torch.arange(n, device=q.device).reshape(1, n)
    if ctx.alibi_slopes is not None:
        s = s - ctx.alibi_slopes.float().reshape(-1, 1, 1) * (i - j).abs()
    keep = torch.ones(m, n, dtype=torch.bool, device=q.device)
    if ctx.causal:  # row i attends the keys j <= i + n - m
        keep &= j <= i
    if ctx.window:
        keep &= j > i - ctx.window
    return s.masked_fill(~keep, float("-inf")), scale, th


@backward(attention)
def _attention_backward(ctx, g):
    q, k, v = ctx.q.float(), ctx.k.float(), ctx.v.float()
    group = q.shape[-3] // k.shape[-3]  # query heads per KV head
    ke, ve = (k, v) if group == 1 else (k.repeat_interleave(group, -3),
                                        v.repeat_interleave(group, -3))
    s, scale, th = _scores(ctx, q, ke)
    m, n, d = q.shape[-2], k.shape[-2], q.shape[-1]
    p = softmax(s.reshape(-1, m, n)).reshape(s.shape)
    g32 = g.float()

    def mm(a, b):  # a @ b over the flattened heads
        return matmul(a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])).reshape(
            a.shape[:-1] + b.shape[-1:])

    gv = mm(_transposed(p.reshape(-1, m, n)).reshape(p.shape[:-2] + (n, m)), g32)
    gp = mm(g32, _transposed(ve.reshape(-1, n, d)).reshape(ve.shape[:-2] + (d, n)))
    gs = p * (gp - (gp * p).sum(-1, keepdim=True)) * scale
    if th is not None:
        gs = gs * (1 - th * th)
    gq = mm(gs, ke)
    gk = mm(_transposed(gs.reshape(-1, m, n)).reshape(gs.shape[:-2] + (n, m)), q)

    def fold(t):  # the group's query heads' gradients summed onto their KV head
        return t if group == 1 else t.unflatten(-3, (-1, group)).sum(-3)
    return {"q": gq.to(ctx.q.dtype), "k": fold(gk).to(ctx.k.dtype),
            "v": fold(gv).to(ctx.v.dtype)}


#: the operators above by name (each one is also ``torch.ops.gpudsl.NAME``)
OPERATORS = {"add": add, "mul": mul, "relu": relu, "silu": silu, "matmul": matmul,
             "permute": permute, "rms_norm": rms_norm, "softmax": softmax,
             "sliced_softmax": sliced_softmax,
             "complex_hadamard_product": complex_hadamard_product, "attention": attention}

__all__ = list(OPERATORS) + ["OPERATORS"]
