"""Memory planning: one arena for a graph's inputs and intermediate tensors.

- Each node runs at one *step* (its place in the topological order).  A tensor that
  needs memory of its own (a *root*: an input or a node a kernel writes) lives from its
  step (inputs: from step 0, all being copied in before the first kernel) to the last
  step of any node reading it or a view of it; the result lives to the end.
- Views (``ReshapeNode``, ``SliceNode`` of leading rows, ``ReplaceSliceNode`` in place)
  take no memory: they share their first operand's, at a byte offset.
- Constants and buffers are not in the arena (they live as long as the model).
- Offsets (``place``): greedy orders (by size, start, end, size x life, life), each
  root put in the smallest (best fit) or lowest (first fit) gap between the roots
  already placed that are alive at the same time; the best of these wins.  When it is
  above the lower bound: on graphs of up to ``EXACT_MAX`` roots an exact branch and
  bound over orders (budgeted), on larger ones a seeded local search over orders.
  Every size is rounded up to the 256-byte alignment.  The lower bound is the largest
  total (aligned) size of the roots alive at one step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .graph_nodes import Node, is_view

ALIGN = 256
_ITEMSIZE = {"float32": 4, "int64": 8, "float16": 2, "bfloat16": 2}


def nbytes(node: Node) -> int:
    return math.prod(node.shape) * _ITEMSIZE[node.dtype]


def aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class Memory:
    """``model.memory``: the arena's size next to the lower bound (bytes)."""

    arena_bytes: int
    lower_bound_bytes: int
    tensors: int  # roots placed in the arena

    @property
    def ratio(self) -> float:
        return self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def __str__(self):
        return (f"arena {self.arena_bytes} bytes for {self.tensors} tensors, lower bound "
                f"{self.lower_bound_bytes} bytes (ratio {self.ratio:.3f})")


@dataclass
class Plan:
    """Where each node's value lives: ``storage[i] = (kind, key, byte offset)`` for node
    ``i`` with kind ``"arena"`` (key: the root's index), ``"constant"`` (key: its name)
    or ``"buffer"`` (key: the buffer's index in ``buffers``)."""

    storage: list[tuple[str, object, int]]
    #: root node index -> (offset in the arena, aligned size, first step, last step)
    roots: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    arena_bytes: int = 0
    lower_bound_bytes: int = 0

    @property
    def memory(self) -> Memory:
        return Memory(self.arena_bytes, self.lower_bound_bytes, len(self.roots))


def lifetimes(nodes: list[Node], result: Node):
    """``(storage, intervals)``: for each node its storage (see ``Plan``, offsets
    not yet assigned for arena roots) and for each arena root ``[first, last]`` step."""
    pos = {id(n): i for i, n in enumerate(nodes)}
    storage: list[tuple[str, object, int]] = []
    buffers = 0
    for i, n in enumerate(nodes):
        if is_view(n.op):
            kind, key, off = storage[pos[id(n.inputs[0])]]
            if n.op == "SliceNode":
                row = nbytes(n.inputs[0]) // n.inputs[0].shape[0]
                off += n.attrs["begin"] * row
            storage.append((kind, key, off))
        elif n.op == "ConstantTensor":
            storage.append(("constant", n.attrs["name"], 0))
        elif n.op == "BufferTensor":
            storage.append(("buffer", buffers, 0))
            buffers += 1
        else:
            storage.append(("arena", i, 0))
    last = {}
    for i, n in enumerate(nodes):
        last.setdefault(i, i)
        for m in n.inputs:
            last[pos[id(m)]] = i
    last[pos[id(result)]] = len(nodes)
    intervals: dict[int, list[int]] = {}
    for i in range(len(nodes)):
        kind, key, _ = storage[i]
        if kind != "arena":
            continue
        # inputs are all in place before the first kernel (an executor copies them in
        # at once, e.g. before replaying a CUDA graph): alive from step 0
        first = 0 if nodes[key].op == "InputTensor" else key
        iv = intervals.setdefault(key, [first, key])
        iv[1] = max(iv[1], last[i])
    return storage, {k: (v[0], v[1]) for k, v in intervals.items()}


def lower_bound(sizes: dict[int, int], intervals: dict[int, tuple[int, int]]) -> int:
    """The largest total size of the tensors alive at one step."""
    events: dict[int, int] = {}
    for k, (a, b) in intervals.items():
        events[a] = events.get(a, 0) + sizes[k]
        events[b + 1] = events.get(b + 1, 0) - sizes[k]
    best = cur = 0
    for t in sorted(events):
        cur += events[t]
        best = max(best, cur)
    return best


def _busy(offsets, sizes, intervals, placed, a, b):
    return sorted((offsets[j], offsets[j] + sizes[j]) for j in placed
                  if intervals[j][0] <= b and a <= intervals[j][1])


def best_fit(sizes: dict[int, int], intervals: dict[int, tuple[int, int]],
             order: list[int], lowest: bool = False) -> dict[int, int]:
    """Offsets: each root in ``order`` goes into the smallest gap (between the roots
    already placed that overlap it in time) that holds it, else above them all; with
    ``lowest``, into the lowest gap that holds it (first fit)."""
    placed: list[int] = []
    offsets: dict[int, int] = {}
    for k in order:
        a, b = intervals[k]
        best = None  # (gap size, offset)
        top = 0
        for lo, hi in _busy(offsets, sizes, intervals, placed, a, b):
            if lo - top >= sizes[k] and (best is None or lo - top < best[0]):
                best = (lo - top, top)
                if lowest:
                    break
            top = max(top, hi)
        offsets[k] = best[1] if best is not None else top
        placed.append(k)
    return offsets


def _top(offsets, sizes) -> int:
    return max((offsets[k] + sizes[k] for k in offsets), default=0)


#: roots up to which the exact search runs (it stops after EXACT_STEPS placements)
EXACT_MAX = 12
EXACT_STEPS = 200_000
#: orders the local search tries on larger graphs
SEARCH_STEPS = 400


def exact(sizes, intervals, bound: int, best: int, steps: int = EXACT_STEPS):
    """The smallest arena over all orders placed lowest-first (some order placed that
    way attains the optimum: sort an optimal packing by offset and let each root fall
    as low as it can; no root ends higher), by branch and bound; ``None`` when nothing
    beats ``best`` or the step budget runs out first.  Returns ``(top, offsets,
    complete)``."""
    keys = sorted(sizes, key=lambda k: (-sizes[k], intervals[k]))
    found = [best, None]
    budget = [steps]

    def go(offsets, rest, top):
        if budget[0] <= 0 or found[0] <= bound:
            return
        if not rest:
            found[0], found[1] = top, dict(offsets)
            return
        for k in rest:
            budget[0] -= 1
            a, b = intervals[k]
            off = 0
            for lo, hi in _busy(offsets, sizes, intervals, offsets, a, b):
                if lo - off >= sizes[k]:
                    break
                off = max(off, hi)
            t = max(top, off + sizes[k])
            if t >= found[0]:
                continue
            offsets[k] = off
            go(offsets, [j for j in rest if j != k], t)
            del offsets[k]
            if budget[0] <= 0:
                return

    go({}, keys, 0)
    if found[1] is None:
        return None
    return found[0], found[1], budget[0] > 0


def _search(sizes, intervals, order, top, bound, rng, steps):
    """Local search over orders (move one root earlier, or swap two), lowest-first and
    best-fit placement; keeps the best arena."""
    best = (top, best_fit(sizes, intervals, order))
    cur = list(order)
    n = len(cur)
    for step in range(steps):
        if best[0] <= bound or n < 2:
            break
        cand = list(cur)
        i, j = sorted(int(x) for x in rng.choice(n, 2, replace=False))
        if step % 2:
            cand[i], cand[j] = cand[j], cand[i]
        else:
            cand.insert(i, cand.pop(j))
        for lowest in (False, True):
            offs = best_fit(sizes, intervals, cand, lowest)
            t = _top(offs, sizes)
            if t <= best[0]:
                if t < best[0] or lowest is False:
                    best = (t, offs)
                cur = cand
                break
    return best


def place(sizes: dict[int, int], intervals: dict[int, tuple[int, int]],
          bound: int) -> tuple[int, dict[int, int]]:
    """``(arena size, offsets)``: greedy orders (by size, by start, by size x life, by
    life) placed best-fit and lowest-first; then, unless the bound is met, the exact
    search on small graphs, a seeded local search over orders on larger ones."""
    life = {k: intervals[k][1] - intervals[k][0] + 1 for k in intervals}
    orders = [sorted(intervals, key=lambda k: (-sizes[k], intervals[k][0], -life[k])),
              sorted(intervals, key=lambda k: (intervals[k][0], -sizes[k])),
              sorted(intervals, key=lambda k: (-sizes[k] * life[k], intervals[k][0])),
              sorted(intervals, key=lambda k: (-life[k], -sizes[k], intervals[k][0])),
              sorted(intervals, key=lambda k: (intervals[k][1], -sizes[k])),
              sorted(intervals, key=lambda k: (-intervals[k][1], -sizes[k]))]
    best = None
    for order in orders:
        for lowest in (False, True):
            offs = best_fit(sizes, intervals, order, lowest)
            t = _top(offs, sizes)
            if best is None or t < best[0]:
                best = (t, offs, order)
    top, offsets, order = best
    if top <= bound:
        return top, offsets
    if len(sizes) <= EXACT_MAX:
        got = exact(sizes, intervals, bound, top)
        if got is not None:
            return got[0], got[1]
        return top, offsets
    rng = np.random.default_rng(len(sizes))
    top, offsets = _search(sizes, intervals, order, top, bound, rng, SEARCH_STEPS)
    return top, offsets


def plan(nodes: list[Node], result: Node) -> Plan:
    """Plan the arena of a graph (nodes in topological order)."""
    storage, intervals = lifetimes(nodes, result)
    sizes = {k: aligned(nbytes(nodes[k])) for k in intervals}
    bound = lower_bound(sizes, intervals)
    top, offsets = place(sizes, intervals, bound)
    storage = [(kind, key, off + offsets[key]) if kind == "arena" else (kind, key, off)
               for kind, key, off in storage]
    roots = {k: (offsets[k], sizes[k], *intervals[k]) for k in intervals}
    return Plan(storage, roots, top, bound)


def overlaps(p: Plan) -> list[tuple[int, int]]:
    """Pairs of arena roots alive at one step whose byte ranges intersect (an empty list
    for a correct plan); also checks alignment and that each root fits the arena."""
    bad = []
    items = sorted(p.roots.items())
    for k, (off, size, a, b) in items:
        if off % ALIGN or off < 0 or off + size > p.arena_bytes:
            bad.append((k, k))
    for i, (k, (off, size, a, b)) in enumerate(items):
        for j, (off2, size2, a2, b2) in items[i + 1:]:
            if a <= b2 and a2 <= b and off < off2 + size2 and off2 < off + size:
                bad.append((k, j))
    return bad


def random_dag(rng: np.random.Generator, n: int = 30):
    """A random graph of pointwise and matmul nodes over a few inputs (for testing the
    planner): returns (nodes in topological order, result)."""
    from .graph_nodes import InputTensor, Node as N

    nodes: list[Node] = []
    for j in range(int(rng.integers(1, 4))):
        rows, cols = int(rng.integers(1, 64)), int(rng.integers(1, 64))
        nodes.append(InputTensor(f"x{j}", "float32", [rows, cols]))
    while len(nodes) < n:
        a = nodes[int(rng.integers(max(0, len(nodes) - 8), len(nodes)))]
        choice = int(rng.integers(0, 5))
        if choice == 0:
            nodes.append(N("ReLUNode", (a,)))
        elif choice == 1:
            nodes.append(N("SumNode", (a, a)))
        elif choice == 2:
            k = int(rng.integers(1, 96))
            w = N("ConstantTensor", (), dict(name=f"w{len(nodes)}", dtype="float32",
                                             shape=(a.shape[-1], k)))
            nodes.append(w)
            nodes.append(N("MatMulNode", (a, w)))
        elif choice == 3 and a.shape[0] > 1:
            nodes.append(N("SliceNode", (a,), dict(begin=0, end=int(a.shape[0]) // 2)))
        else:
            nodes.append(N("ReshapeNode", (a,), dict(shape=(math.prod(a.shape),))))
    # nodes the last one does not read stay in the plan, alive at their own step only
    return nodes, nodes[-1]
