"""The attention fusion: one decoding step's ``matmul -> sliced_softmax -> matmul`` over
a KV cache, as the LLaMA example writes it, runs as ONE split-key attention kernel
(:mod:`gpudsl.stdlib.attention_split`, its sliced-softmax meaning) instead of up to
seven launches (two permutes of the caches, the scores, their scale, the softmax, the
mask, the weighted values).

The pattern, every name a node (``H`` heads, ``S`` cache rows, ``D`` head dimension):

- ``scores = MatMulNode(K, Q)`` with ``K [H, S, D]`` and ``Q [H, D, 1]``;
- ``x = ReshapeNode(scores)`` to ``[H, S]`` (or ``[H, 1, S]``), optionally
  ``x = HadamardProductNode(x, c)`` (either order) with ``c`` a ``ConstantTensor`` of
  one element (the scale, a value fixed at compile time);
- ``a = SlicedSoftmaxNode(x, prefix)`` (a node or an integer), optionally
  ``a = HadamardProductNode(a, mask)`` (either order) with ``mask`` of ``S`` elements
  (``[S]``, ``[1, S]``), broadcast over the heads;
- ``out = MatMulNode(Vt, ReshapeNode(a))`` with ``Vt [H, D, S]`` and the reshape
  ``[H, S, 1]``; ``out`` is ``[H, D, 1]``.

``K`` and ``Vt`` are read where their bytes are: ``K = PermuteNode(Kc, [1, 0, 2])`` and
``Vt = PermuteNode(Vc, [1, 2, 0])`` with ``Kc, Vc [S, H, D]`` (a cache written one
position per row: the ``"nhd"`` layout), or ``K`` itself ``[H, S, D]`` with
``Vt = PermuteNode(V, [0, 2, 1])`` and ``V [H, S, D]`` (``"hnd"``); the two must agree.
A permute whose only use is the pattern joins the group (it launches nothing).

Every intermediate (``scores``, the scaled ``x``, ``a``, the masked ``a``) must have
exactly one use, not be the graph's result, and no ``ReplaceSliceNode`` may write the
memory of an operand the group reads between the node that reads it and the group's
last node (the group runs at the last node's step).

The meaning is kept exactly: the kernel computes what the nodes compute (the sliced
softmax's entries past the prefix are the scaled scores, multiplied by the mask and
the values like the others: the kernel adds them, and reads no key whose mask there
is zero), up to the order of the floating-point sums.  Without a mask node the kernel
gets a mask of ones.
"""
from __future__ import annotations

import math

from .graph_nodes import Node, is_view


def _root(n: Node) -> Node:
    """The node whose memory ``n`` is a view of."""
    while is_view(n.op):
        n = n.inputs[0]
    return n


def _one_use(uses, pos, n: Node, consumer: Node) -> bool:
    u = uses[pos[id(n)]]
    return len(u) == 1 and u[0][0] == pos[id(consumer)]


def _hadamard_with(n: Node, pred):
    """``(other operand, the operand pred accepts)`` of a HadamardProductNode, or None."""
    if n.op != "HadamardProductNode":
        return None
    a, b = n.inputs
    if pred(b):
        return a, b
    if pred(a):
        return b, a
    return None


def _key_source(kp: Node, h: int, s: int, d: int):
    """``(layout, source)`` of the keys ``kp [H, S, D]``."""
    if kp.op == "PermuteNode" and tuple(kp.attrs["perm"]) == (1, 0, 2) and \
            kp.inputs[0].shape == (s, h, d):
        return "nhd", kp.inputs[0]
    return "hnd", kp


def _value_source(vp: Node, h: int, s: int, d: int):
    """``(layout, source)`` of the transposed values ``vp [H, D, S]``, or None."""
    if vp.op != "PermuteNode":
        return None
    perm, src = tuple(vp.attrs["perm"]), vp.inputs[0]
    if perm == (1, 2, 0) and src.shape == (s, h, d):
        return "nhd", src
    if perm == (0, 2, 1) and src.shape == (h, s, d):
        return "hnd", src
    return None


def _fp32_matmul(n: Node) -> bool:
    """A MatMulNode of the default precision (a TF32 one keeps its own kernel: the
    fused attention sums in float32)."""
    return n.op == "MatMulNode" and n.attrs.get("precision", "fp32") == "fp32"


def match(nodes: list[Node], pos: dict, uses: dict, i: int):
    """The attention group ending at node ``i`` (the values' MatMulNode), as
    ``(members, externals, roles)``, or None when the pattern does not hold."""
    from ..stdlib.attention_split import SPLIT_HEAD_DIMS

    out = nodes[i]
    if not _fp32_matmul(out) or len(out.shape) != 3 or out.shape[2] != 1:
        return None
    vp, r2 = out.inputs
    h, d, s = vp.shape if len(vp.shape) == 3 else (0, 0, 0)
    if r2.op != "ReshapeNode" or r2.shape != (h, s, 1) or d not in SPLIT_HEAD_DIMS:
        return None
    a = r2.inputs[0]
    chain = [r2]
    mask = None
    got = _hadamard_with(a, lambda m: math.prod(m.shape) == s and m.shape[-1] == s
                         and m.dtype == a.dtype and m.op != "SlicedSoftmaxNode")
    if got is not None and got[0].op == "SlicedSoftmaxNode":
        chain.append(a)
        masked = a
        a, mask = got
    if a.op != "SlicedSoftmaxNode" or a.shape not in ((h, s), (h, 1, s)):
        return None
    sm = a
    chain.append(sm)
    x = sm.inputs[0]
    scale = None
    got = _hadamard_with(x, lambda c: c.op == "ConstantTensor" and
                         math.prod(c.shape) == 1 and c.dtype == x.dtype)
    if got is not None and got[0].op == "ReshapeNode":
        chain.append(x)
        scaled = x
        x, scale = got
    if x.op != "ReshapeNode" or x.shape != sm.shape:
        return None
    chain.append(x)
    scores = x.inputs[0]
    if not _fp32_matmul(scores) or scores.shape != (h, s, 1):
        return None
    chain.append(scores)
    kp, qn = scores.inputs
    if kp.shape != (h, s, d) or qn.shape != (h, d, 1):
        return None
    key_layout, k = _key_source(kp, h, s, d)
    vs = _value_source(vp, h, s, d)
    if vs is None or vs[0] != key_layout:
        return None
    v = vs[1]
    # one use each along the chain (the consumer is the next node towards the output)
    consumers = [out] + chain[:-1]
    if not all(_one_use(uses, pos, n, c) for n, c in zip(chain, consumers)):
        return None
    members = {pos[id(n)] for n in chain} | {i}
    for perm_node in (kp, vp):
        if perm_node.op == "PermuteNode" and len(uses[pos[id(perm_node)]]) == 1:
            members.add(pos[id(perm_node)])
    prefix = sm.inputs[1] if len(sm.inputs) == 2 else None
    # each operand with the node that reads it where the nodes run one by one
    roles = [("q", qn, scores), ("k", k, kp if k is not kp else scores), ("v", v, vp)]
    if prefix is not None:
        roles.append(("prefix", prefix, sm))
    if mask is not None:
        roles.append(("mask", mask, masked))
    if scale is not None:
        roles.append(("scale", scale, scaled))
    externals = tuple(dict.fromkeys(pos[id(n)] for _, n, _ in roles))
    if any(j in members for j in externals):
        return None
    if any(_written_between(nodes, n, pos[id(reader)], i) for _, n, reader in roles):
        return None
    info = tuple((r, externals.index(pos[id(n)])) for r, n, _ in roles) + \
        (("layout", key_layout), ("prefix_value", sm.attrs.get("prefix")))
    return tuple(sorted(members)), externals, info


def _written_between(nodes, operand: Node, reader: int, last: int) -> bool:
    """Whether a ReplaceSliceNode writes ``operand``'s memory after ``reader`` (the
    node reading it node by node) and before ``last`` (where the group reads it)."""
    root = _root(operand)
    return any(n.op == "ReplaceSliceNode" and reader < j < last and _root(n) is root
               for j, n in enumerate(nodes))


def attention_groups(nodes: list[Node], result: Node, uses: dict) -> list[tuple]:
    """The attention groups of a graph (see the module's text), as ``(members,
    externals, roles)`` (``gpudsl.graph.fusion`` makes them its ``Group`` s)."""
    pos = {id(n): i for i, n in enumerate(nodes)}
    out = []
    taken: set[int] = set()
    for i in range(len(nodes)):
        got = match(nodes, pos, uses, i)
        if got is None or taken & set(got[0]):
            continue
        taken.update(got[0])
        out.append(got)
    return out


def role(group, name: str):
    """The value of ``name`` in an attention group's roles (an external's position for
    the operands, else the recorded value), None when absent."""
    return dict(group.roles).get(name)


__all__ = ["match", "attention_groups", "role"]


def fused_kernel(group, nodes):
    """The group's kernel (``plan_split``'s for the shape, with the sliced-softmax
    meaning), proved now, as ``(proc, shapes, values)`` of a
    ``FusedKernel``: the operands by node, the scale (the constant's value, read by the
    launch list), a prefix given as an integer and a missing mask as the list's own
    arrays, and a fault flag."""
    import numpy as np

    from ..compiler.compiled_kernel import prove
    from ..errors import CheckError
    from ..stdlib.attention_split import plan_split
    from .launches import _NP

    ext = [nodes[j] for j in group.externals]
    q = ext[role(group, "q")]
    h, d, _ = q.shape
    layout = role(group, "layout")
    s = ext[role(group, "k")].shape[0 if layout == "nhd" else 1]
    dt = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[q.dtype]
    p = plan_split(d, False, h, 1, s, layout, sliced=True, dt=dt)
    report = prove(p.ir, {})
    if not report.ok:
        raise CheckError(report, hint=f"{p.name} is not proved safe; the group runs "
                         "node by node")
    kv = (s, h, d) if layout == "nhd" else (h, s, d)
    shapes = {"q": (group.externals[role(group, "q")], (h, 1, d)),
              "k": (group.externals[role(group, "k")], kv),
              "v": (group.externals[role(group, "v")], kv),
              "out": (group.last, (h, 1, d))}
    values: dict = {"err": ("err",)}
    for name, shape in (("prefix", (1,)), ("mask", (s,))):
        if role(group, name) is not None:
            shapes[name] = (group.externals[role(group, name)], shape)
        elif name == "prefix":  # an integer attribute: an array of the launch list
            values[name] = ("temp", np.array([role(group, "prefix_value")], np.int64))
        else:
            values[name] = ("temp", np.ones(s, _NP[q.dtype]))
    sc = role(group, "scale")
    values["scale"] = ("scale", None if sc is None else ext[sc].attrs["name"])
    return p, shapes, values
