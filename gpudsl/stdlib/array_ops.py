"""``gpudsl.ops``: the graph nodes on arrays (docs/running.md).

Each op validates its inputs (raising ``gpudsl.Error`` with the reason),
picks the standard-library kernel for the shapes, compiles it once (in memory
and in the disk cache), and runs it on the GPU when there is one, else on the
CPU emulator.  numpy arrays in give numpy arrays out; PyTorch / CuPy device
arrays in give arrays of the same kind out, without host copies.
"""
from __future__ import annotations

import functools
import inspect
import math

import numpy as np

from ..backend_names import deprecated_alias as _deprecated_alias
from .halves import NUMPY as _NUMPY
from .halves import common_dtype as _common_dtype
from .halves import dtype_of as _dtype_of
from ..runtime import driver as _driver
from ..runtime import torch_tensors as _torch_tensors
from . import ops_fast as _fast
from .matmul_call import half_recipe, matmul_tf32_nt
from .node_shapes import matmul_precision_problem
from .node_table import get, plan
from .node_registry import db_stamp
from .op_arguments import (_ANY_FLOAT, RANKS, _is_array, _is_scalar, as_int,
                           axis, check_tensor, torch_call)
from .op_arguments import table_rule as _table_rule
from .op_arguments import array_like as _array_like
from .op_arguments import contig as _contig
from .op_arguments import empty as _empty
from .op_arguments import index_tensor as _index_tensor
from .op_arguments import is_host_int as _is_host_int
from .op_arguments import is_int64 as _is_int64
from .rms_norm import DEFAULT_EPS
from .shapes import NodeError, require


# ------------------------------------------------------------------ arguments
#
# Every refusal is a gpudsl.Error (NodeError) whose message starts with the op and
# names the argument; numpy's conventions where the node allows them (scalars as
# operands, negative axes, one -1 in a reshape), and no silent coercion of floats,
# bools or strings to integers.


def _op(fn=None, *, convert: bool = True):
    """Name the op in every refusal raised while it runs; ``convert``: PyTorch CPU
    tensors in are viewed as numpy arrays (no copy) and the result is a tensor again
    (``torch_in``)."""
    if fn is None:
        return functools.partial(_op, convert=convert)
    name = fn.__name__
    names = tuple(n for n, p in inspect.signature(fn).parameters.items()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            if not kwargs:  # the recipe of an earlier call of the same signature (ops_fast)
                recipe = _fast.lookup(name, backend(), args)
                if recipe is not None:
                    return recipe(*args)
            if convert and _torch_tensors.torch_module() is not None:
                return torch_call(fn, names, args, kwargs)
            return fn(*args, **kwargs)
        except NodeError as e:
            if e.raw_message.startswith(f"{name}: "):
                raise
            raise NodeError(f"{name}: {e.raw_message}", e.loc, e.hint) from None
    return run


_compiled: dict = {}


def backend() -> str:
    """Where ops run: ``"cuda"`` with a GPU and driver, else ``"emulator"``."""
    available = _driver._available  # the driver's answer, once probed
    if available is None:
        available = _driver.driver_available()
    return "cuda" if available else "emulator"


#: the old name of ``backend()`` (a target is an architecture now)
target = _deprecated_alias(backend, "gpudsl.ops.target", "gpudsl.ops.backend")


def _kernel(p):
    key = (p, backend())
    k = _compiled.get(key)
    if k is None:
        k = _compiled[key] = p.compile(key[1])
    return k


def _zeros(like, shape, dtype):
    out = _empty(like, shape, dtype)
    out[...] = 0
    return out


def _run(p, **args):
    k = _compiled.get((p, backend()))
    (_kernel(p) if k is None else k)(**args)


_OWN_RUN = _run   # a recipe (ops_fast) calls its kernel itself unless _run was replaced


# ------------------------------------------------------------------ elementwise


def _full_like(like, shape, value):
    out = _empty(like, shape, _dtype_like(like))
    out[...] = np.float32(value)
    return out


def _launch(name: str, operands: tuple, attrs: dict, like=None):
    """Run node ``name`` of the node table (``gpudsl.stdlib.node_table``) on
    ``operands`` (contiguous arrays; an index given as an integer already made a
    tensor) with ``attrs``: the table's kernel choice for these shapes, looked up
    once per (node, shapes, attributes, device, tuning database version), its
    arguments reshaped as the table says.  The result (or ``operands[0]``, written in
    place) and the fault flag (None: the kernel has none)."""
    shapes = tuple(tuple(map(int, x.shape)) for x in operands)
    launch = plan(get(name), shapes, attrs, backend())
    return _execute(launch, operands, operands[0] if like is None else like)


def _execute(launch, operands: tuple, like):
    """Run the node table's ``launch`` on ``operands``, the result allocated like
    ``like`` (its dtype): the result (or ``operands[0]``, written in place) and the
    fault flag.  ``launch.before`` runs first, on the same operands and the launch's
    scratch arrays (allocated like ``like``)."""
    out = None if launch.out is None else _empty(like, launch.out, _dtype_like(like))
    scratch = {name: _empty(like, shape, _dtype_like(like)) for name, shape in launch.scratch}
    for first in launch.before:
        _run(first.proc, **_arguments(first, operands, None, scratch, like)[0])
    args, err = _arguments(launch, operands, out, scratch, like)
    _run(launch.proc, **args)
    return (operands[0] if out is None else out), err


def _arguments(launch, operands: tuple, out, scratch: dict, like) -> tuple[dict, object]:
    """A launch's arguments (``gpudsl.stdlib.node_registry``) and its fault flag."""
    err, args = None, {}
    for param, spec in launch.args:
        kind = spec[0]
        if kind == "in" or kind == "index":
            x = operands[spec[1]]
            args[param] = x if kind == "index" or spec[2] is None else x.reshape(spec[2])
        elif kind == "out":
            args[param] = out if spec[1] is None else out.reshape(spec[1])
        elif kind == "value":
            args[param] = spec[1]
        elif kind == "array":  # a literal array, where the operands live
            args[param] = _array_like(like, spec[1])
        elif kind == "scratch":
            x = scratch[spec[1]]
            args[param] = x if spec[2] is None else x.reshape(spec[2])
        else:
            err = args[param] = _zeros(like, (1,), np.int32)
    return args, err


def _with_dtype(attrs: dict, dt: str) -> dict:
    """The node's attributes, with the precision when it is not float32 (the node
    table's kernel choice reads ``attrs["dtype"]``)."""
    return attrs if dt == "f32" else dict(attrs, dtype=dt)


def _dtype_like(x) -> np.dtype:
    return np.dtype(str(x.dtype).replace("torch.", ""))


def _binary(op: str, a, b):
    fast = _fast.lookup(op, backend(), (a, b))  # torch CPU tensors, viewed as numpy here
    if fast is not None:
        return fast(a, b)
    key, stamp = _fast.key_of(op, backend(), (a, b)), db_stamp()
    a_scalar, b_scalar = _is_scalar(a), _is_scalar(b)
    if a_scalar and b_scalar:
        raise NodeError("a and b are both scalars; one of them must be an array")
    if a_scalar:  # the array first: the node's operands commute (add, mul)
        require(get(op).commutes, f"a is a scalar; {op} takes a scalar as b only")
        a, b = b, a
    sa = check_tensor("b" if a_scalar else "a", a, ranks=RANKS, dtypes=_ANY_FLOAT)
    if a_scalar or b_scalar:
        b = _full_like(a, (1,) * len(sa), b)
    sb = check_tensor("a" if a_scalar else "b", b, ranks=RANKS, dtypes=_ANY_FLOAT)
    run = _fast.binary_recipe(op, a, b, sa, sb)  # this call's path, kept for the next
    out = run(a, b)
    if key is not None and not (a_scalar or b_scalar):
        _fast.remember(key, stamp, run)
    return out


@_op
def add(a, b):
    """``a + b`` elementwise, broadcasting as numpy does: the operand of lower rank gets
    leading axes of size 1, then each axis of one must equal the other's or be 1 (one
    operand gives the result's shape); either may be a Python or numpy scalar.  Up to
    6 axes."""
    return _binary("add", a, b)


@_op
def mul(a, b):
    """``a * b`` elementwise, broadcasting as ``add`` does; either may be a scalar."""
    return _binary("mul", a, b)


def _unary(op: str, x):
    fast = _fast.lookup(op, backend(), (x,))  # torch CPU tensors, viewed as numpy here
    if fast is not None:
        return fast(x)
    key, stamp = _fast.key_of(op, backend(), (x,)), db_stamp()
    shape = check_tensor("x", x, ranks=RANKS, dtypes=_ANY_FLOAT)
    run = _fast.unary_recipe(op, x, shape, _common_dtype(op, x=x))
    out = run(x)
    if key is not None:
        _fast.remember(key, stamp, run)
    return out


@_op
def relu(x):
    """``max(0, x)`` elementwise (up to 6 axes)."""
    return _unary("relu", x)


@_op
def silu(x):
    """``x / (1 + exp(-x))`` elementwise (up to 6 axes)."""
    return _unary("silu", x)


# ------------------------------------------------------------------ rows


def _rows(shape) -> tuple[int, int]:
    return shape[0], math.prod(shape[1:])


@_op
def slice(x, begin: int, end: int):  # noqa: A001  (the node's name)
    """Rows ``begin..end-1`` of the first axis (a copy), ``x[begin:end]``; negative
    ``begin`` / ``end`` count from the end as in numpy; the range must be non-empty
    and inside the axis."""
    shape = check_tensor("x", x)
    begin, end = as_int("begin", begin), as_int("end", end)
    begin = begin + shape[0] if begin < 0 else begin
    end = end + shape[0] if end < 0 else end
    require(0 <= begin < end <= shape[0],
            f"slice [{begin}, {end}) is not a non-empty range inside the first axis of "
            f"length {shape[0]}")
    return _launch("slice", (_contig(x),), {"begin": begin, "end": end})[0]


def _raise_on_fault(err, message: str) -> None:
    """Read the kernel's fault flag back (this waits for the kernel) and raise."""
    if int(err[0]) != 0:
        raise NodeError(message)


@_op
def replace_slice(x, r, begin, end):
    """In place: ``x[begin:end] = r`` along the first axis.  ``begin`` and ``end``
    are ints or one-element int64 tensors read by the kernel at run time; a range
    outside ``x`` or a row count that differs from ``r``'s raises
    ``gpudsl.Error`` and writes nothing.  Returns ``x``."""
    xs, rs = check_tensor("x", x), check_tensor("r", r)
    require(len(xs) == len(rs) and xs[1:] == rs[1:],
            f"r's shape {rs} does not match x's {xs} beyond the first axis")
    n, c = _rows(xs)
    m = rs[0]
    on_host = _is_host_int(begin) and _is_host_int(end)
    if on_host:  # checked here: the kernel's own check cannot fail, no need to wait
        b, e = as_int("begin", begin), as_int("end", end)
        require(0 <= b <= e <= n and e - b == m, f"the range [{b}, {e}) is outside x "
                f"(first axis {n}) or does not hold r's {m} rows; nothing was written")
    begin, end = _index_tensor(x, "begin", begin), _index_tensor(x, "end", end)
    for name, t in (("begin", begin), ("end", end)):
        require(tuple(t.shape) == (1,) and _is_int64(t),
                f"{name} must be an int64 tensor of one element, got shape "
                f"{tuple(t.shape)} and dtype {t.dtype}")
    require(getattr(x, "flags", None) is None or x.flags.c_contiguous,
            "replace_slice writes in place and needs a contiguous x")
    _, err = _launch("replace_slice", (x, _contig(r), begin, end), {})
    if not on_host:
        _raise_on_fault(err, f"the range [begin, end) read from the device is outside x "
                        f"(first axis {n}) or does not hold r's {m} rows; nothing was "
                        "written")
    return x


@_op(convert=False)  # torch's own reshape: a view, autograd kept
def reshape(x, shape):
    """A view of ``x`` with another shape (no kernel, no copy).  ``shape`` is an int
    or a sequence of ints of 1 to 3 dimensions; one of them may be ``-1`` (inferred,
    as in numpy)."""
    xs = check_tensor("x", x)
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        shape = (shape,)
    shape = tuple(as_int(f"shape[{i}]", d) for i, d in enumerate(shape))
    require(1 <= len(shape) <= 3, f"the new shape {shape} has {len(shape)} dimension(s); "
            "the standard library's tensors have 1 to 3")
    unknown = [i for i, d in enumerate(shape) if d == -1]
    require(len(unknown) <= 1, f"the new shape {shape} has more than one -1")
    require(all(d > 0 or d == -1 for d in shape),
            f"the new shape {shape} has a dimension that is neither positive nor -1")
    total = math.prod(xs)
    if unknown:
        known = math.prod(d for d in shape if d != -1)
        require(total % known == 0,
                f"cannot reshape {xs} ({total} elements) to {shape}")
        shape = tuple(total // known if d == -1 else d for d in shape)
    require(math.prod(shape) == total,
            f"cannot reshape {xs} ({total} elements) to {shape}")
    contiguous = x.flags.c_contiguous if hasattr(x, "flags") else \
        (x.is_contiguous() if hasattr(x, "is_contiguous") else True)
    require(contiguous, "reshape is a view and needs a contiguous array")
    return x.reshape(shape)


# ------------------------------------------------------------------ matmul, permute


@_op
def matmul(a, b, precision: str = "fp32", stages: int | None = None,
           async_stages: int | None = None):
    """``[m,n]@[n,k]``, ``[n]@[n,k]`` or ``[b,m,n]@[b,n,k]``.  ``precision="tf32"``:
    the TF32 tensor-core kernel (2-D, tile-divisible shapes; see ``matmul_tf32``; on an
    sm_90a GPU the TF32 wgmma kernel, 2-D, ``[n] @ [n, k]`` or batched, the reduction a
    multiple of 16, ``b`` transposed into a scratch array first: ``matmul_sm90_tf32``;
    ``b = w.T`` of a contiguous ``w``, 2-D or ``[n] @``: the kernel reads ``w``, no
    transpose); refused on float16/bfloat16 operands, as by the graph's ``MatMulNode``
    (``node_shapes.matmul_precision_problem``).
    ``stages`` (fp32): 2 (double-buffered tiles, one barrier per k step; the default)
    or 1 (the single-stage kernel) for the big-tile kernel, instead of the tuned or
    default choice; ``async_stages``: 2 to 4, the big-tile kernel's (or the TF32
    kernel's) tiles copied by asynchronous copies into a circular buffer that deep
    (``cp.async`` on sm_80+); other kernels ignore both."""
    plain = precision == "fp32" and stages is None and async_stages is None
    if plain:   # a recipe: this signature's kernel and views (torch CPU: numpy views here)
        fast = _fast.lookup("matmul", backend(), (a, b))
        if fast is not None:
            return fast(a, b)
        key, stamp = _fast.key_of("matmul", backend(), (a, b)), db_stamp()
    sa, sb = check_tensor("a", a, dtypes=_ANY_FLOAT), check_tensor("b", b, dtypes=_ANY_FLOAT)
    dt = _common_dtype("matmul", a=a, b=b)
    problem = matmul_precision_problem(precision, dt)   # the graph's MatMulNode's rule
    require(problem is None, problem)
    run = None
    if dt != "f32":  # f16/bf16: tensor cores (f32 accumulation) where the tiles divide
        from .matmul_sm80 import plan_matmul_half_for   # sm_80-class: multistage

        run = half_recipe(a, b, sa, sb, dt, lambda a2, sb_, dt_: plan_matmul_half_for(
            a2, sb_, dt_, backend()))
    elif plain:   # the tuning database's winner for this device and shape, else the default
        run = _fast.matmul_recipe(a, b, sa, sb)
    if run is not None:
        out = run(a, b)
        if plain and key is not None:
            _fast.remember(key, stamp, run)
        return out
    attrs = {}
    if precision == "tf32":
        require(async_stages in (None, 0, 2, 3, 4),
                f"async_stages must be 0 or 2 to 4, not {async_stages!r}")
        done = matmul_tf32_nt(a, b, sa, sb)   # w.T of a contiguous w on sm_90a: no copy
        if done is not None:
            return done
        attrs["precision"] = "tf32"
        if async_stages:
            attrs["async_stages"] = async_stages
    else:  # the tuning database's winner for this device and shape, else the defaults
        if stages is not None:
            require(stages in (1, 2), f"stages must be 1 or 2, not {stages!r}")
            attrs["stages"] = stages
        if async_stages is not None:
            require(async_stages in (0, 2, 3, 4) and stages in (None, 1),
                    f"async_stages must be 0 or 2 to 4 (with stages=1 or None), not "
                    f"{async_stages!r}" + (f" with stages={stages}" if stages else ""))
            attrs["async_stages"] = async_stages
    return _launch("matmul", (_contig(a), _contig(b)), attrs)[0]


@_op
def permute(x, perm=None):
    """``numpy.transpose(x, perm)`` (a copy): ``perm`` orders the axes (negative axes
    count from the end; ``None`` reverses them).  float32, float16 or bfloat16."""
    from .shapes import normalize_perm

    shape = check_tensor("x", x, dtypes=_ANY_FLOAT)
    dt = _common_dtype("permute", x=x)
    if perm is None:
        perm = tuple(range(len(shape) - 1, -1, -1))
    require(not isinstance(perm, (str, bytes)) and hasattr(perm, "__iter__"),
            f"perm must be a sequence of axes, not {type(perm).__name__} {perm!r}")
    perm = tuple(axis(f"perm[{i}]", p, len(shape)) for i, p in enumerate(perm))
    perm = normalize_perm(perm, len(shape))
    return _launch("permute", (_contig(x),), _with_dtype({"perm": perm}, dt))[0]


# ------------------------------------------------------------------ whole-model nodes


@_op
def rms_norm(x, w, eps: float = DEFAULT_EPS):
    """``w * x / sqrt(mean(x^2) + eps)`` over the last axis of ``x`` (a 1-D ``x`` is
    one row; up to 6 axes); ``w`` is 1-D, as long as that axis; ``eps`` a number
    ``>= 0``.  ``w`` may have another float dtype than ``x``, as in PyTorch's mixed
    precision (a bfloat16 ``x`` with float32 weights): both are read widened, the row
    computed in float32, and the result, of ``x``'s dtype, rounded once (as
    ``torch.nn.functional.rms_norm`` gives)."""
    xs = check_tensor("x", x, ranks=RANKS, dtypes=_ANY_FLOAT)
    ws = check_tensor("w", w, dtypes=_ANY_FLOAT)
    require(_is_scalar(eps) and math.isfinite(float(eps)) and float(eps) >= 0,
            f"eps must be a finite number >= 0, not {eps!r:.40}")
    eps = float(eps)
    require(len(ws) == 1 and ws[0] == xs[-1], f"the weights {list(ws)} must be a vector "
            f"as long as the last axis of {list(xs)} ({xs[-1]})")
    dt, wdt = _dtype_of(x), _dtype_of(w)
    if dt == wdt == "f32" and eps == DEFAULT_EPS:
        return _launch("rms_norm", (_contig(x), _contig(w)), {})[0]
    from .rms_norm import plan_rms_norm

    r, n = math.prod(xs[:-1]), xs[-1]
    x, w = _contig(x), _contig(w)
    out = _empty(x, xs, _NUMPY[dt])
    _run(plan_rms_norm(n, dt, wdt, eps), x=x.reshape(r, n), w=w, out=out.reshape(r, n))
    return out


@_op
def complex_hadamard_product(a, b):
    """The elementwise complex product of ``a`` and ``b`` whose last axis has size 2
    (real, imaginary); ``b``'s other axes equal ``a``'s or are 1 (broadcast).
    float32, float16 or bfloat16 (one dtype; halves computed in float32, each part
    rounded once)."""
    check_tensor("a", a, dtypes=_ANY_FLOAT), check_tensor("b", b, dtypes=_ANY_FLOAT)
    dt = _common_dtype("complex_hadamard_product", a=a, b=b)
    _table_rule("complex_hadamard_product", (a, b))
    return _launch("complex_hadamard_product", (_contig(a), _contig(b)),
                   _with_dtype({}, dt))[0]


@_op
def sliced_softmax(x, prefix):
    """Along the last axis: the softmax of the first ``prefix`` entries, the entries
    after them unchanged.  ``prefix`` is an int or a one-element int64 tensor read by
    the kernel at run time; ``0 <= prefix <=`` the axis length, else
    ``gpudsl.Error``."""
    xs = check_tensor("x", x, dtypes=_ANY_FLOAT)
    dt = _common_dtype("sliced_softmax", x=x)
    n = xs[-1]
    on_host = _is_host_int(prefix)
    if on_host:
        value = as_int("prefix", prefix)
        require(0 <= value <= n, f"prefix {value} is outside [0, {n}], the last axis")
    prefix = _index_tensor(x, "prefix", prefix)
    require(tuple(prefix.shape) == (1,) and _is_int64(prefix),
            f"prefix must be an int64 tensor of one element, got shape "
            f"{tuple(prefix.shape)} and dtype {prefix.dtype}")
    if dt != "f32":  # f16/bf16: read widened, computed in f32, rounded once
        from .softmax import plan_sliced_softmax

        r = math.prod(xs[:-1])
        x = _contig(x)
        out = _empty(x, xs, _NUMPY[dt])
        err = _zeros(x, (1,), np.int32)
        _run(plan_sliced_softmax(n, dt), x=x.reshape(r, n), prefix=prefix,
             out=out.reshape(r, n), err=err)
    else:
        out, err = _launch("sliced_softmax", (_contig(x), prefix), {})
    if not on_host:
        _raise_on_fault(err, f"the prefix read from the device is outside [0, {n}], the "
                        "last axis")
    return out


@_op
def attention(q, k, v, causal: bool = False, prefix=None, scale=None, kv_heads=None,
              block_table=None, seq_lens=None, window=None, softcap=None, alibi_slopes=None):
    """``softmax(scale * q k^T) v`` per head, fused in one kernel (online softmax over
    key tiles in SHARED; ``gpudsl.stdlib.attention``).  ``q`` is ``[H, M, D]``,
    ``k`` and ``v`` are ``[H, N, D]`` (the KV cache), ``D`` one of 32, 48, 64, 96, 128.
    ``prefix`` (an int or a one-element int64 tensor read at run time; default ``N``)
    uses the first ``prefix`` keys, ``1 <= prefix <= N``.  ``causal``: query row ``i``
    attends the keys ``j <= i + prefix - M`` (needs ``M <= prefix``).  ``scale``
    defaults to ``1 / sqrt(D)``.  float16/bfloat16 ``q, k, v`` (one dtype): read
    widened to float32, float32 softmax and sums, the output rounded once; on CUDA a
    prefill with ``D`` 64 or 128 runs on tensor cores instead
    (``gpudsl.stdlib.attention_mma``: the weights rounded to the half type for the
    second product, within ``attention_mma_tolerance``; on an H100/H200, sm_90a,
    ``gpudsl.stdlib.attention_sm90``: TMA and wgmma, the same bound).

    Grouped-query attention (``gpudsl.stdlib.attention_paged``, ``D`` 32, 48, 64, 96,
    128): ``k, v [Hkv, N, D]`` with ``Hkv`` dividing ``H`` (query head ``h`` reads
    KV head ``h // (H / Hkv)``; ``kv_heads=`` checks it, or splits a paged cache
    ``[pages, P, Hkv * D]``); a batch ``q [B, H, M, D]``, ``k, v [B, Hkv, N, D]`` with
    ``seq_lens`` (int32 ``[B]``, each sequence's length; query row ``i`` is position
    ``i + L_b - M``); a paged cache ``k, v [pages, P, Hkv, D]`` (``P`` 16..256, a power
    of two) read through ``block_table`` (int32 ``[B, max_pages]``) with ``seq_lens``.
    On CUDA a float16/bfloat16 decode with 4 or more query heads per KV head and ``D``
    64 or 128 runs on tensor cores (``gpudsl.stdlib.attention_gqa_mma``).

    ``window`` (an int, with ``causal``; Mistral's sliding window): the row at position
    ``p`` attends only the keys ``p - window < j <= p``; ``softcap`` (a positive
    number; Gemma 2): the scores become ``softcap * tanh(score / softcap)`` before the
    softmax; ``alibi_slopes`` (float32 ``[H]``, one a query head; FlashAttention's):
    ``slope_h * |p - j|`` subtracted from the score of key ``j`` (after the softcap).
    Every kernel above takes all three (the decode of plain heads through the grouped
    kernel)."""
    from .attention_op import run_attention

    return run_attention(q, k, v, causal, prefix, scale, kv_heads, block_table, seq_lens,
                         window, softcap, alibi_slopes)


# ------------------------------------------------------------------ rows (no graph node)


@_op
def softmax(x, temperature: float = 1.0, mask=None, causal: bool = False):
    """``softmax(x / temperature + mask)`` along the last axis (up to 6 axes).
    ``mask`` (optional) is added to the scores: its shape is the last axes of ``x``'s
    (leading axes of size 1 allowed: ``[m, n]`` for scores ``[h, m, n]``), e.g. 0 and
    ``-inf``.  ``causal``: for scores ``[..., m, n]`` (``m <= n``), query row ``q``
    keeps the keys ``j <= q + n - m`` (the last ``m`` of ``n`` positions, as
    ``attention``), the others give 0.  float16/bfloat16: read widened, computed in
    float32, rounded once."""
    from .row_ops import softmax_call

    p, args, out = softmax_call(x, temperature, mask, causal)
    _run(p, **args)
    return out


@_op
def argmax(x):
    """The index (int64) of the largest entry along the last axis, ``numpy.argmax(x,
    -1)``: the first of equal values, a NaN above every number."""
    from .row_ops import argmax_call

    p, args, out = argmax_call(x)
    _run(p, **args)
    return out


@_op
def topk(x, k: int):
    """``(values, indices)`` of the ``k`` largest entries along the last axis, largest
    first (equal values in index order, NaN above every number), as ``torch.topk``;
    indices int64.  Meant for a small ``k``: ``k`` passes over each row."""
    from .row_ops import topk_call

    p, args, out = topk_call(x, k)
    _run(p, **args)
    return out


# ------------------------------------------------------------------ other table nodes


def _generic(decl):
    """``gpudsl.ops.NAME`` for a node of the node table that has no function here: a
    pointwise node as ``add`` / ``relu`` (broadcasting, scalars, the fast path), any
    other with its operands (arrays) checked by its shape rule and its dtypes, then its
    kernel run."""
    if decl.pointwise == "binary":
        def op(a, b):
            return _binary(decl.name, a, b)
    elif decl.pointwise == "unary":
        def op(x):
            return _unary(decl.name, x)
    else:
        def op(*operands, **attrs):
            for i, x in enumerate(operands):
                if not _is_array(x):
                    name = decl.operands[i] if i < len(decl.operands) else f"operand {i + 1}"
                    raise NodeError(f"{name} must be an array, not {type(x).__name__}")
            dtype = _table_rule(decl.name, operands, attrs)
            out, err = _launch(decl.name, tuple(_contig(x) for x in operands),
                               _with_dtype(attrs, _SHORT.get(dtype, "f32")))
            if err is not None:
                _raise_on_fault(err, "the kernel reported a fault in its arguments")
            return out
    op.__name__ = op.__qualname__ = decl.name
    op.__doc__ = decl.doc or f"The node table's {decl.name!r} node."
    return _op(op)


_SHORT = {v: k for k, v in _NUMPY.items()}  # "float16" -> "f16"


def __getattr__(name: str):
    """A node of the node table (``gpudsl.stdlib.node_table``) with no function of its
    own here, such as one a user registered: ``gpudsl.ops.NAME(*arrays, **attrs)``."""
    decl = None if name.startswith("__") else get(name)
    if decl is None or decl.launch is None:
        raise AttributeError(f"module 'gpudsl.ops' has no attribute {name!r}")
    return _generic(decl)


__all__ = ["add", "mul", "relu", "silu", "slice", "replace_slice", "reshape", "matmul",
           "permute", "rms_norm", "complex_hadamard_product", "sliced_softmax", "attention",
           "softmax", "argmax", "topk", "backend", "target"]
