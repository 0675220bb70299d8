"""The built-in nodes of the node table (``gpudsl.stdlib.node_registry``), each declared once:
its shape rule (``node_shapes``) and dtypes, its meaning (the kernel choice: the tuning
database's winner, else the default of its family module, with its arguments'
reshapes; a pointwise node's element expression), graph and script name, numpy
reference, tuning task, bench cases and snapshot kernels.  ``gpudsl.ops``, the graph,
``gpudsl tune`` and ``gpudsl bench`` read these declarations through ``get`` /
``by_graph`` / ``all_nodes`` / ``plan``; ``pointwise_node`` declares a pointwise node
in one call (docs/running.md, "Adding a node")."""
from __future__ import annotations

import math

import numpy as np

from . import node_shapes as rule
from .node_registry import (FLOATS, Launch, Node, ShapeError, all_nodes, array_params, by_graph,
                    db_stamp, get, recorded, register, replay_lookups, tuned,
                    unregister)

# ------------------------------------------------------------------ kernel choices


def tuned_proc(make_task, key, backend: str):
    """The tuning database's winner for ``make_task()`` on ``backend``'s device, or None
    (``stdlib.tuning.tuned_proc``)."""
    from .tuning import tuned_proc as winner

    return winner(make_task, key, backend)


def _rows(shape) -> tuple[int, int]:
    return shape[0], math.prod(shape[1:])


def _dt(attrs) -> str:
    """The precision of the node's float operands, in the stdlib's names (``"f32"``,
    ``"f16"``, ``"bf16"``): ``attrs["dtype"]`` when a caller gives one.  Tuned winners
    are float32 kernels: halves take their family's default."""
    return attrs.get("dtype", "f32")


def _binary(op: str):
    def launch(shapes, attrs, backend):
        from .pointwise import plan_binary
        from .tuning import PointwiseTask

        sa, sb = shapes[0], shapes[1]
        dt = _dt(attrs)
        p, dims, bdims = plan_binary(op, sa, sb, dt)
        if dt == "f32":
            p = tuned_proc(lambda: PointwiseTask(op, sa, sb), (op, sa, sb), backend) or p
        return Launch(p, (("a", ("in", 0, dims)), ("b", ("in", 1, bdims)),
                          ("out", ("out", dims))), sa)
    return launch


def _unary(op: str):
    def launch(shapes, attrs, backend):
        from .pointwise import plan_unary
        from .tuning import PointwiseTask

        shape = shapes[0]
        n = math.prod(shape)
        dt = _dt(attrs)
        p = (tuned_proc(lambda: PointwiseTask(op, shape), (op, shape), backend)
             if dt == "f32" else None) or plan_unary(op, n, dt)
        return Launch(p, (("x", ("in", 0, (n,))), ("out", ("out", (n,)))), shape)
    return launch


def matmul_options(sa, sb, attrs: dict, backend: str) -> dict:
    """The fp32 kernel's options: the database's winner (read once per database
    version), then ``stages`` / ``async_stages`` when given (``gpudsl.ops.matmul``
    checked their values).  A graph's fused matmul group takes them from here too."""
    from .matmul import tuned_options

    opts = dict(tuned(("matmul", sa, sb, backend), lambda: tuned_options(sa, sb, backend)))
    stages, asy = attrs.get("stages"), attrs.get("async_stages")
    if stages is not None:
        opts["stages"] = stages
    if asy is not None:
        opts.update(async_stages=asy, stages=1 if asy else opts.get("stages", 0))
    return opts


def _launch_matmul(shapes, attrs, backend):
    sa, sb = shapes[0], shapes[1]
    dt = _dt(attrs)
    if dt != "f32":  # [m, n] or [n] @ [n, k]: tensor cores where the tiles divide
        from .matmul_sm80 import plan_matmul_half_for   # sm_80-class: the multistage kernel

        a2 = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
        p, binds = plan_matmul_half_for(a2, tuple(sb), dt, backend)
        return Launch(p, (("a", ("in", 0, a2)), ("b", ("in", 1, None)),
                          ("c", ("out", (a2[0], sb[1]))))
                      + tuple((k, ("value", v)) for k, v in binds.items()),
                      tuple(sa[:-1]) + (sb[-1],))
    if attrs.get("precision", "fp32") == "tf32":
        from .matmul_sm90_tf32 import launch_on_device   # sm_90a: the TF32 wgmma kernel
        from .matmul_tf32 import matmul_tf32_kernel

        on_device = launch_on_device(tuple(sa), tuple(sb), backend, _launch_permute)
        if on_device is not None:
            return on_device

        asy = attrs.get("async_stages")
        p, _ = matmul_tf32_kernel(sa, sb, **({"async_stages": asy} if asy else {}))
    else:
        from .matmul import options_kernel

        p, _ = options_kernel(sa, sb, **matmul_options(sa, sb, attrs, backend))
    a, b, c = array_params(p)
    return Launch(p, ((a, ("in", 0, None)), (b, ("in", 1, None)), (c, ("out", None))),
                  tuple(sa[:-1]) + (sb[-1],))


def _launch_permute(shapes, attrs, backend):
    from .permute import merged_shapes, permute_kernel
    from .shapes import normalize_perm
    from .tuning import PermuteTask

    shape = shapes[0]
    perm = normalize_perm(tuple(attrs["perm"]), len(shape))
    dt = _dt(attrs)
    p, _, out_shape = permute_kernel(shape, perm, dt)
    if dt == "f32":  # tuned winners are float32 kernels
        p = tuned_proc(lambda: PermuteTask(shape, perm), ("permute", shape, perm),
                       backend) or p
    a, b = merged_shapes(shape, perm)  # the kernel's array shapes
    x, out = array_params(p)
    return Launch(p, ((x, ("in", 0, a)), (out, ("out", b))), tuple(out_shape))


def _launch_slice(shapes, attrs, backend):
    from .slices import plan_slice
    from .tuning import SliceTask

    shape = shapes[0]
    begin, end = attrs["begin"], attrs["end"]
    n, c = _rows(shape)
    m = end - begin
    p = tuned_proc(lambda: SliceTask(shape, begin, end), ("slice", shape, begin, end),
                   backend) or plan_slice(c)
    return Launch(p, (("begin", ("value", begin)), ("x", ("in", 0, (n, c))),
                      ("out", ("out", (m, c)))), (m,) + tuple(shape[1:]))


def _launch_replace_slice(shapes, attrs, backend):
    from .slices import plan_replace_slice
    from .tuning import ReplaceSliceTask

    n, c = _rows(shapes[0])
    m = shapes[1][0]
    dt = _dt(attrs)
    p = (tuned_proc(lambda: ReplaceSliceTask((n, c), 0, m), ("replace_slice", n, c, m),
                    backend) if 0 < m <= n and dt == "f32" else None) or \
        plan_replace_slice(c, dt)
    return Launch(p, (("x", ("in", 0, (n, c))), ("r", ("in", 1, (m, c))),
                      ("begin", ("index", 2, "begin")), ("end", ("index", 3, "end")),
                      ("err", ("err",))), None)


def _launch_rms_norm(shapes, attrs, backend):
    from .rms_norm import plan_rms_norm

    xs = shapes[0]
    r, n = math.prod(xs[:-1]), xs[-1]
    return Launch(plan_rms_norm(n, _dt(attrs)), (("x", ("in", 0, (r, n))), ("w", ("in", 1, None)),
                                     ("out", ("out", (r, n)))), xs)


def _launch_complex(shapes, attrs, backend):
    from .complex import plan_complex_mul

    p, ca, cb = plan_complex_mul(shapes[0], shapes[1], _dt(attrs))
    return Launch(p, (("a", ("in", 0, ca)), ("b", ("in", 1, cb)), ("out", ("out", ca))),
                  shapes[0])


def _launch_sliced_softmax(shapes, attrs, backend):
    from .softmax import plan_sliced_softmax

    xs = shapes[0]
    r, n = math.prod(xs[:-1]), xs[-1]
    return Launch(plan_sliced_softmax(n, _dt(attrs)), (
        ("x", ("in", 0, (r, n))), ("prefix", ("index", 1, "prefix")),
        ("out", ("out", (r, n))), ("err", ("err",))), xs)


def _launch_attention(shapes, attrs, backend):
    from .attention import SPLIT_MAX_ROWS, takes_options
    from .attention_sm90 import plan_prefill

    (h, m, d), n = shapes[0], shapes[1][1]
    scale = attrs.get("scale")
    scale = np.float32(1 / math.sqrt(d) if scale is None else scale)
    window, softcap = attrs.get("window") or 0, attrs.get("softcap")
    alibi = attrs.get("alibi") is not None
    if h != shapes[1][0] or ((window or softcap is not None or alibi) and
                             (m <= SPLIT_MAX_ROWS or not takes_options(d))):
        return _launch_gqa(shapes, attrs, scale, target=backend)
    p = plan_prefill(m, d, bool(attrs["causal"]), h, n, dt=_dt(attrs), target=backend,
                     window=window, softcap=softcap is not None, alibi=alibi)
    return Launch(p, (("q", ("in", 0, None)), ("k", ("in", 1, None)), ("v", ("in", 2, None)),
                      ("prefix", ("index", 3, "prefix")), ("scale", ("value", scale)),
                      *_cap(attrs), *_slopes(attrs, (h,)), ("out", ("out", None)),
                      ("err", ("err",))), shapes[0])


def _cap(attrs) -> tuple:
    """The run-time ``cap`` argument of a soft-capped attention kernel (none without)."""
    cap = attrs.get("softcap")
    return () if cap is None else (("cap", ("value", np.float32(cap))),)


def _slopes(attrs, shape) -> tuple:
    """The ``slopes`` argument of an ALiBi attention kernel, the attribute's list as a
    float32 array of ``shape`` (none without)."""
    alibi = attrs.get("alibi")
    return () if alibi is None else (("slopes", ("array", np.asarray(alibi, np.float32)
                                                 .reshape(shape))),)


def _launch_paged_attention(shapes, attrs, target):
    d = shapes[0][2]
    return _launch_gqa(shapes, attrs, np.float32(1 / math.sqrt(d)), paged=True, target=target)


def _launch_gqa(shapes, attrs, scale, paged=False, target=None):
    """Grouped query heads (``q [H, M, D]``, ``k, v [Hkv, N, D]``: one sequence whose
    length is the prefix) or a paged cache (``q [B * H, M, D]``, ``k, v [pages, P, Hkv
    * D]``, operands 4 and 5: the block table and the lengths):
    :mod:`.attention_paged`'s kernel (on CUDA a half decode of 4 or more heads per
    group: :mod:`.attention_gqa_mma`'s), int64 table and lengths; ``window`` and
    ``softcap`` from the attributes."""
    from .attention_gqa_mma import plan_grouped

    q, k = shapes[0], shapes[1]
    m, d = q[1], q[2]
    bt = shapes[3][0] if paged else 1
    hk = k[2] // d if paged else k[0]
    g = q[0] // bt // hk
    p = plan_grouped(d, bool(attrs.get("causal")), g, m, k[1] if paged else 0, _dt(attrs),
                     "i64", attrs.get("window") or 0, attrs.get("softcap") is not None, target,
                     attrs.get("alibi") is not None)
    kv = (k[0], k[1], hk, d) if paged else (1,) + tuple(k)
    args = [("q", ("in", 0, (bt, hk, g, m, d))), ("k", ("in", 1, kv)), ("v", ("in", 2, kv)),
            ("lens", ("in", 4, None) if paged else ("index", 3, "prefix")),
            ("scale", ("value", scale)), *_cap(attrs), *_slopes(attrs, (hk, g)),
            ("out", ("out", (bt, hk, g, m, d))),
            ("err", ("err",))]
    if paged:
        args.append(("table", ("in", 3, None)))
    return Launch(p, tuple(args), tuple(q))


# ------------------------------------------------------------------ references


def _f64(x):
    return np.asarray(x, np.float64)


def _silu(x):
    x = _f64(x)
    return x / (1.0 + np.exp(-x))


def _replace(x, r, begin, end):
    out = np.array(x, copy=True)
    b = int(np.asarray(begin).reshape(-1)[0])
    out[b:b + r.shape[0]] = r
    return out


def _rms(x, w, eps=None):
    from .rms_norm import DEFAULT_EPS

    x = _f64(x)
    eps = DEFAULT_EPS if eps is None else eps
    return _f64(w) * x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def _cmul(a, b):
    ar, ai, br, bi = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    return np.stack([ar * br - ai * bi, ar * bi + ai * br], -1)


def _softmax(x, prefix):
    k = int(np.asarray(prefix).reshape(-1)[0])
    out = _f64(x).copy()
    e = np.exp(out[..., :k] - out[..., :k].max(-1, keepdims=True)) if k else out[..., :0]
    out[..., :k] = e / e.sum(-1, keepdims=True) if k else e
    return out


def _attention(q, k, v, prefix=None, causal=False, scale=None, window=None, softcap=None,
               alibi=None):
    from .attention import attention_reference

    return attention_reference(q, k, v, causal, prefix, scale, window, softcap, alibi)


def _paged_attention(q, k, v, block_table, seq_lens, causal=False, window=None, softcap=None,
                     alibi=None):
    from .attention_paged import gqa_reference

    table = np.asarray(block_table)
    bt, d = table.shape[0], q.shape[2]
    kv = (k.shape[0], k.shape[1], k.shape[2] // d, d)
    q4 = np.reshape(q, (bt, -1) + tuple(q.shape[1:]))
    out = gqa_reference(q4, np.reshape(k, kv), np.reshape(v, kv), np.asarray(seq_lens),
                        causal, table, None, window, softcap, alibi)
    return out.reshape(q.shape)


# ------------------------------------------------------------------ tuning tasks


def _pointwise_task(op):
    def make(shapes, options):
        from .tuning import PointwiseTask

        return PointwiseTask(op, *shapes)
    return make


def _permute_task(shapes, options):
    from .tuning import PermuteTask

    s = shapes[0]
    perm = options.get("perm")
    return PermuteTask(s, tuple(range(len(s) - 1, -1, -1)) if perm is None else perm)


def _slice_task(replace: bool):
    def make(shapes, options):
        from .tuning import ReplaceSliceTask, SliceTask

        s = shapes[0]
        begin, end = options.get("begin", 0), options.get("end")
        end = end if end is not None else max(begin + 1, s[0] // 2)
        return (ReplaceSliceTask if replace else SliceTask)(s, begin, end)
    return make


def _matmul_task(shapes, options):
    from .half_tuning import HALF_DTYPES, HalfMatmulTask
    from .tuning import MatmulTask

    dtype = options.get("dtype") or "float32"
    if dtype in HALF_DTYPES:   # the half kernel ops.matmul runs on the backend's device
        return HalfMatmulTask(*shapes, HALF_DTYPES[dtype], options.get("backend") or "cuda")
    return MatmulTask(*shapes)


# ------------------------------------------------------------------ the table

REF, INT, LIST = "ref", "int", "list"


def _example(arity: int):
    """``gpudsl bench``'s operands of a pointwise node: ``arity`` float32 arrays."""
    def example(rng, rows, cols):
        return [rng.standard_normal((rows, cols)).astype(np.float32)
                for _ in range(arity)], {}
    return example


def pointwise_node(name: str, graph: str, expr: str, reference, *, commutes: bool = False,
                   bench: tuple = (), snapshots: tuple = (), doc: str = "") -> Node:
    """The one declaration of a pointwise node: ``expr`` is its element in the kernel
    language, of ``{x}`` (unary) or ``{a}`` and ``{b}`` (binary: ``b`` broadcast onto
    ``a``), computed in f32 (halves read widened, the result rounded once);
    ``reference`` numpy's meaning.  The rest follows from the family
    (``stdlib.pointwise``): its shape rule, float32/float16/bfloat16 kernels, the
    tuning task (threads and vector width), a bench example, its script arguments,
    and fusion into the graph's pointwise chains.  ``commutes``: the operands may be
    swapped (``gpudsl.ops`` puts a scalar or a broadcast operand second); ``bench``:
    ``gpudsl bench``'s own cases of it (none: timed on two (binary) or one float32
    array against ``reference``); ``snapshots``: see ``Node``."""
    unary = "{x}" in expr
    return Node(name, rule.unary if unary else rule.pointwise,
                (_unary if unary else _binary)(name), reference, graph,
                ((REF, "x"),) if unary else ((REF, "a"), (REF, "b")),
                ("x",) if unary else ("a", "b"), expr=expr, commutes=commutes,
                dtypes=FLOATS, tuning=_pointwise_task(name), tune_shapes=1 if unary else 2,
                example=_example(1 if unary else 2), bench=bench,
                snapshots=snapshots,
                doc=doc or f"``{expr.format(a='a', b='b', x='x')}`` elementwise (in f32).")


def _kernel(module: str, fn: str, *args, part=None):
    """A snapshot's kernel: ``stdlib.<module>.<fn>(*args)`` (``part``: that item of
    what it returns), built when the test asks."""
    def build():
        import importlib

        out = getattr(importlib.import_module(f"{__package__}.{module}"), fn)(*args)
        return out if part is None else out[part]
    return build


def _half_matmul(*shapes):
    from .matmul_f16 import half_matmul_refusal

    return half_matmul_refusal(*shapes)


for _op, _graph, _expr, _ref, _bench, _snap in (
        ("add", "SumNode", "{a} + {b}", lambda a, b: _f64(a) + b, ("add", "add_bcast"),
         (("add_bcast_rows", (True, False)),)),
        ("mul", "HadamardProductNode", "{a} * {b}", lambda a, b: _f64(a) * b, ("mul",),
         (("mul", (True,)),))):
    register(pointwise_node(_op, _graph, _expr, _ref, commutes=True, bench=_bench,
                            snapshots=tuple((n, _kernel("pointwise", "binary_kernel", _op,
                                                        full, 4)) for n, full in _snap)))
register(Node("matmul", rule.matmul, _launch_matmul, lambda a, b: _f64(a) @ b, "MatMulNode",
              ((REF, "a"), (REF, "b")), ("a", "b"), tuning=_matmul_task, tune_shapes=2,
              keywords=(("precision", ("fp32", "tf32")),),
              dtypes=FLOATS, half_rule=_half_matmul,
              bench=("matmul", "matmul_1stage", "matmul_async", "matmul_bk16",
                     "matmul_bk16_b1", "matmul_w64", "matmul_4000", "bmatmul",
                     "vecmat", "matmul_tf32", "matmul_tf32_async", "matmul_f16",
                     "matmul_bf16", "matmul_f16_sm80", "matmul_bf16_sm80",
                     "matmul_f16_sm90", "matmul_bf16_sm90", "matmul_tf32_sm90",
                     "matmul_f16_sm90_persistent", "matmul_f16_sm90_rows",
                     "matmul_tf32_sm90_rows", "matmul_f16_sm90_tall",
                     "bmatmul_f16_sm90", "bmatmul_tf32_sm90"),
              snapshots=(("matmul", _kernel("matmul", "big_kernel", False)),
                         ("matmul_batched", _kernel("matmul", "big_kernel", True)),
                         ("matmul_any_shape", _kernel("matmul", "cut_kernel", False, 4)),
                         ("vecmat", _kernel("matmul", "vecmat_kernel")))))
# NaN propagates (as in numpy and PyTorch): max(x, 0.0) would give 0 for NaN
for _op, _graph, _expr, _ref in (
        ("relu", "ReLUNode", "select({x} <= 0.0, 0.0, {x})",
         lambda x: np.maximum(_f64(x), 0)),
        ("silu", "SiLUNode", "{x} / (1.0 + exp(-{x}))", _silu)):
    register(pointwise_node(_op, _graph, _expr, _ref, bench=(_op,), snapshots=(
        (_op, _kernel("pointwise", "unary_kernel", _op, 4)),)))
register(Node("slice", rule.slice_rows, _launch_slice, lambda x, begin, end: x[begin:end],
              "SliceNode", ((REF, "x"), (INT, "begin"), (INT, "end")), ("x",),
              aliases=True, graph_view=True, tuning=_slice_task(False), dtypes=FLOATS,
              bench=("slice",), snapshots=(("slice", _kernel("slices", "slice_kernel", 4)),)))
register(Node("reshape", rule.reshape, None, lambda x, shape: np.reshape(x, shape),
              "ReshapeNode", ((REF, "x"), (LIST, "shape")), ("x",), aliases=True,
              graph_view=True, dtypes=FLOATS))
register(Node("permute", rule.permute, _launch_permute,
              lambda x, perm: np.transpose(x, perm), "PermuteNode",
              ((REF, "x"), (LIST, "perm")), ("x",), tuning=_permute_task, dtypes=FLOATS,
              bench=("permute2d", "permute3d_021", "permute3d_210"),
              snapshots=(("permute_2d", _kernel("permute", "permute_kernel", (64, 96),
                                                (1, 0), part=0)),
                         ("permute_3d_021", _kernel("permute", "permute_kernel",
                                                    (4, 64, 96), (0, 2, 1), part=0)))))
register(Node("replace_slice", rule.replace_slice, _launch_replace_slice, _replace,
              "ReplaceSliceNode", ((REF, "x"), (REF, "r"), (REF, "begin"), (REF, "end")),
              ("x", "r", "begin", "end"), aliases=True, tuning=_slice_task(True),
              dtypes=FLOATS, bench=("replace_slice",),
              snapshots=(("replace_slice", _kernel("slices", "replace_slice_kernel", 4)),)))
register(Node("rms_norm", rule.rms_norm, _launch_rms_norm, _rms, "RMSNormNode",
              ((REF, "x"), (REF, "w")), ("x", "w"), dtypes=FLOATS, bench=("rms_norm",),
              snapshots=(("rms_norm", _kernel("rms_norm", "rms_norm_kernel", 256)),),
              doc="``weights * a / sqrt(mean(a^2) + eps)`` over the last axis (``eps``: "
                  "``stdlib.rms_norm.DEFAULT_EPS``, 1e-5)."))
register(Node("complex_hadamard_product", rule.complex_product, _launch_complex, _cmul,
              "ComplexHadamardProductNode", ((REF, "a"), (REF, "b")), ("a", "b"),
              dtypes=FLOATS, bench=("complex_hadamard",),
              snapshots=(("complex_hadamard_rope", _kernel("complex", "complex_mul_kernel",
                                                           (False, True))),),
              doc="The complex product on a trailing axis of size 2, ``b`` broadcast like "
                  "Hadamard."))
register(Node("sliced_softmax", rule.sliced_softmax, _launch_sliced_softmax, _softmax,
              "SlicedSoftmaxNode", ((REF, "x"), ("ref|int", "prefix")), ("x", "prefix"),
              dtypes=FLOATS, bench=("sliced_softmax",),
              snapshots=(("sliced_softmax", _kernel("softmax", "sliced_softmax_kernel",
                                                    256)),),
              doc="Softmax of the first ``prefix`` entries of the last axis, the rest kept; "
                  "``prefix`` is an int64 node of one element (an input: it changes between "
                  "evaluations) or an int (checked against the axis now)."))
register(Node("attention", rule.attention, _launch_attention, _attention, "AttentionNode",
              ((REF, "q"), (REF, "k"), (REF, "v"), ("ref|int", "prefix"), ("bool", "causal"),
               ("int?", "window"), ("float?", "softcap"), ("floats?", "alibi")),
              ("q", "k", "v", "prefix"), dtypes=FLOATS,
              bench=("attention", "attention_suite", "attention_options"),
              snapshots=(("attention_causal", _kernel("attention", "attention_kernel", 128,
                                                      True, 4)),)))
register(Node("paged_attention", rule.paged_attention, _launch_paged_attention,
              _paged_attention, "PagedAttentionNode",
              ((REF, "q"), (REF, "k"), (REF, "v"), (REF, "block_table"), (REF, "seq_lens"),
               ("bool", "causal"), ("int?", "window"), ("float?", "softcap"),
               ("floats?", "alibi")),
              ("q", "k", "v", "block_table", "seq_lens"),
              bench=("attention_gqa_decode",),
              snapshots=(("paged_attention", _kernel("attention_paged", "paged_kernel", 128,
                                                     True, 16)),
                         ("paged_attention_mma", _kernel("attention_gqa_mma",
                                                         "gqa_mma_kernel", 128, True, 16)))))

# ------------------------------------------------------------------ plans

_PLANS: dict = {}


def plan(node: Node, shapes: tuple, attrs: dict, backend: str) -> Launch:
    """``node.launch(shapes, attrs, backend)``, looked up once per (node, shapes,
    attributes, backend) and tuning database version: the shape work and the kernel
    choice of a repeated call cost a dictionary lookup and one ``stat``.  A hit tells
    the tuning lookups the plan made to whoever records them now (a graph compile's
    cache entry must list them, or a later change of the tuned winner would not
    miss that entry)."""
    stamp = db_stamp()
    try:
        key = (node.name, shapes, tuple(attrs.items()), backend)
        hit = _PLANS.get(key)
    except TypeError:  # an attribute that is not hashable: no cache
        return node.launch(shapes, attrs, backend)
    if hit is not None and hit[0] == stamp and hit[1] is node:
        replay_lookups(hit[3])
        return hit[2]
    asked, launch = recorded(lambda: node.launch(shapes, attrs, backend))
    if len(_PLANS) > 4096:
        _PLANS.clear()
    _PLANS[key] = (stamp, node, launch, tuple(asked))
    return launch


__all__ = ["Node", "Launch", "ShapeError", "register", "unregister", "get", "by_graph",
           "all_nodes", "plan", "matmul_options", "pointwise_node", "tuned_proc"]
