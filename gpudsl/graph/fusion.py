"""Fusion groups: which nodes of a graph run as one kernel (docs/graph_script.md).

A *group* is a chain ``head -> n1 -> ... -> last`` where the head is a ``MatMulNode``
(the rest become its epilogue) or a pointwise node (one the node table declares with an
element expression: ``SumNode``,
``HadamardProductNode``, ``ReLUNode``, ``SiLUNode``), and every later node is pointwise.
A node joins the chain of the node before it only when

- that node's value has exactly one use in the whole graph (one operand slot of this
  node: no other consumer, no view of it, and it is not the graph's result), so no one
  else needs the intermediate tensor, which is never written to memory;
- both have the same shape (the value is not broadcast: a broadcast operand would be
  recomputed for every element it is repeated over);
- no ``ReplaceSliceNode`` runs between them (it writes memory in place; the group runs at
  its last node's step, and a write in between could change what the group reads).

The group's *external operands* are the nodes outside it that it reads (deduplicated,
in order of first use); each step records which operand slot holds the chain's value.
The memory planner sees the group as one node at the step of its last node that reads
every external operand (``planner_view``): their memory stays alive until the fused
kernel has run, and the intermediates take no memory at all.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..stdlib.node_table import by_graph
from .graph_nodes import Node


def pointwise_op(op: str) -> str | None:
    """The ``gpudsl.ops`` name of graph node ``op`` when the node table declares it
    pointwise (an element expression: ``SumNode`` -> ``"add"``), else None."""
    decl = by_graph(op)
    return decl.name if decl is not None and decl.pointwise else None


@dataclass(frozen=True)
class ChainOp:
    """One node of a group after the head: ``op`` (``add``/``mul``/``relu``/``silu``);
    ``args`` its operands: ``None`` for the chain's value, else the index of the external
    operand (into ``Group.externals``)."""

    op: str
    args: tuple
    #: the node's element expression when the group was formed (``Node.expr``): part of
    #: the key of the fused kernel's caches, so a node declared again with another
    #: meaning gets its own kernel
    expr: str | None = None


@dataclass(frozen=True)
class Group:
    """Nodes ``members`` (indices into the graph's nodes, in order) that run as one
    kernel writing the last one's value; ``externals`` the indices of the nodes it reads;
    ``head`` is ``"matmul"``, ``"pointwise"`` or ``"attention"``; ``steps`` the
    pointwise nodes (all of them for a pointwise head, the epilogue after a matmul);
    ``roles`` (attention) which external is which operand and the layout
    (:mod:`gpudsl.graph.attention_fusion`)."""

    members: tuple[int, ...]
    externals: tuple[int, ...]
    head: str
    steps: tuple[ChainOp, ...]
    roles: tuple = ()

    @property
    def last(self) -> int:
        return self.members[-1]


def _uses(nodes: list[Node], result: Node) -> dict[int, list[tuple[int, int]]]:
    """node id -> [(consumer index, operand slot)]; the result counts as a use."""
    pos = {id(n): i for i, n in enumerate(nodes)}
    uses: dict[int, list] = {i: [] for i in range(len(nodes))}
    for i, n in enumerate(nodes):
        for slot, m in enumerate(n.inputs):
            uses[pos[id(m)]].append((i, slot))
    uses[pos[id(result)]].append((len(nodes), 0))
    return uses


def groups(nodes: list[Node], result: Node) -> list[Group]:
    """The fusion groups of a graph (nodes in topological order): the attention
    patterns first (:mod:`gpudsl.graph.attention_fusion`), then chains of two or more
    nodes (a lone node runs its standard-library kernel, one step of the launch
    list)."""
    from .attention_fusion import attention_groups

    pos = {id(n): i for i, n in enumerate(nodes)}
    uses = _uses(nodes, result)
    writes_in_place = [i for i, n in enumerate(nodes) if n.op == "ReplaceSliceNode"]
    out: list[Group] = [Group(m, e, "attention", (), r)
                        for m, e, r in attention_groups(nodes, result, uses)]
    taken: set[int] = {k for g in out for k in g.members}
    for i, n in enumerate(nodes):
        if i in taken or (n.op != "MatMulNode" and pointwise_op(n.op) is None):
            continue
        if n.attrs.get("precision", "fp32") != "fp32":   # TF32: its own kernel, unfused
            continue
        chain = [i]
        cur = i
        while len(uses[cur]) == 1:
            c, _slot = uses[cur][0]
            if c >= len(nodes) or pointwise_op(nodes[c].op) is None or c in taken:
                break
            if nodes[c].shape != nodes[cur].shape or nodes[c].dtype != "float32":
                break
            if any(cur < w < c for w in writes_in_place):
                break
            chain.append(c)
            cur = c
        if len(chain) < 2:
            continue
        taken.update(chain)
        out.append(_group(nodes, pos, chain))
    return out


def _group(nodes, pos, chain) -> Group:
    externals: list[int] = []

    def ext(m: Node) -> int:
        j = pos[id(m)]
        if j not in externals:
            externals.append(j)
        return externals.index(j)

    head = nodes[chain[0]]
    steps = []
    if head.op == "MatMulNode":  # a and b are externals 0 and 1, even when one node
        externals.extend(pos[id(m)] for m in head.inputs)
        rest = chain[1:]
        kind = "matmul"
    else:
        rest = chain
        kind = "pointwise"
    members = set(chain)
    for k in rest:
        n = nodes[k]
        args = tuple(None if pos[id(m)] in members and k != chain[0] else ext(m)
                     for m in n.inputs)
        op = pointwise_op(n.op)
        steps.append(ChainOp(op, args, by_graph(n.op).expr))
    return Group(tuple(chain), tuple(externals), kind, tuple(steps))


# ------------------------------------------------------------------ memory planning


class _PlanNode:
    """What the planner reads of a node (op, inputs, attrs, shape, dtype)."""

    def __init__(self, op, inputs, attrs, shape, dtype):
        self.op, self.inputs, self.attrs, self.shape, self.dtype = \
            op, tuple(inputs), attrs, shape, dtype


def planner_view(nodes: list[Node], result: Node, gs: list[Group]):
    """``(nodes, result)`` for ``gpudsl.graph.memory_plan.plan`` with the groups folded:
    the same positions, each group's last node reading every external operand, and
    the intermediates views of the first external operand (no memory of their own,
    alive no longer than the group)."""
    pos = {id(n): i for i, n in enumerate(nodes)}
    last_of = {g.last: g for g in gs}
    inner = {k: g for g in gs for k in g.members[:-1]}
    out: list[_PlanNode] = []
    for i, n in enumerate(nodes):
        if i in last_of:
            ins = [out[j] for j in last_of[i].externals]
            out.append(_PlanNode("FusedKernel", ins, n.attrs, n.shape, n.dtype))
        elif i in inner:  # (an attention group's permute may come before externals[0])
            j = inner[i].externals[0]
            first = out[j] if j < i else out[pos[id(n.inputs[0])]]
            out.append(_PlanNode("ReshapeNode", [first], {}, n.shape, n.dtype))
        else:
            out.append(_PlanNode(n.op, [out[pos[id(m)]] for m in n.inputs], n.attrs,
                                 n.shape, n.dtype))
    return out, out[pos[id(result)]]


__all__ = ["pointwise_op", "ChainOp", "Group", "groups", "planner_view"]
