"""Shape rules of the graph nodes (docs/graphs.md): validation and the
canonical forms the kernels are generated for.

Kernels are generated per *canonical* shape pattern, not per shape: adjacent
axes that broadcast the same way are merged, so a [2, 3, 4] + [2, 3, 1] add and
a [6, 4] + [6, 1] add run the same kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import Error


class NodeError(Error):
    """A graph node was given arrays it does not accept."""


def require(cond: bool, message: str, hint: str | None = None):
    if not cond:
        raise NodeError(message, None, hint)


_F32 = np.dtype(np.float32)


def check_tensor(name: str, x, ranks=(1, 2, 3), dtypes=("float32",)):
    shape = tuple(map(int, x.shape))
    require(len(shape) in ranks,
            f"{name} has {len(shape)} dimension(s); this node takes "
            f"{' or '.join(map(str, ranks))}")
    require(0 not in shape and min(shape) > 0,
            f"{name} has an empty dimension: shape {shape}")
    dt = getattr(x, "dtype", _F32)
    if dt is not _F32:  # numpy's float32 is one object (the fast path); others by name
        text = dt.__str__().replace("torch.", "")
        dt = text if text == "bfloat16" else np.dtype(text)
    require(str(dt) in dtypes, f"{name} is {dt}; this node takes {' or '.join(dtypes)}",
            "convert with .astype(np.float32)")
    return shape


@dataclass(frozen=True)
class Broadcast:
    """``a`` (shape ``dims``) combined with ``b`` whose axis ``i`` is ``dims[i]``
    when ``full[i]`` and 1 otherwise, after merging adjacent axes that agree."""

    dims: tuple[int, ...]
    full: tuple[bool, ...]

    @property
    def key(self) -> str:
        """A name for the pattern: ``f`` a full axis, ``b`` a broadcast one."""
        return "".join("f" if f else "b" for f in self.full)


def broadcast_pattern(a_shape: tuple, b_shape: tuple) -> Broadcast:
    """Validate ``b`` against ``a`` (same rank, each axis equal or 1) and merge
    adjacent axes.  Axes of ``a`` of size 1 count as full (nothing to repeat)."""
    require(len(a_shape) == len(b_shape),
            f"the operands have ranks {len(a_shape)} and {len(b_shape)}; broadcasting "
            "here needs equal ranks", "reshape b to a's rank with axes of size 1")
    full = []
    for i, (da, db) in enumerate(zip(a_shape, b_shape)):
        require(db == da or db == 1,
                f"axis {i}: b has {db} where a has {da}; each axis of b must equal a's "
                "or be 1")
        full.append(db == da)
    dims: list[int] = []
    flags: list[bool] = []
    for d, f in zip(a_shape, full):
        if d == 1:
            f = flags[-1] if flags else True  # a size-1 axis merges with anything
        if flags and flags[-1] == f:
            dims[-1] *= d
        else:
            dims.append(d)
            flags.append(f)
    return Broadcast(tuple(dims), tuple(flags))


def normalize_perm(perm, rank: int) -> tuple[int, ...]:
    perm = tuple(int(p) for p in perm)
    require(sorted(perm) == list(range(rank)),
            f"permutation {perm} is not a permutation of the {rank} axes")
    return perm


def merge_permutation(shape: tuple, perm: tuple) -> tuple[tuple, tuple]:
    """Merge input axes that stay adjacent and in order under ``perm`` and drop
    size-1 axes.  Returns (merged input shape, merged perm); e.g. shape (2,3,4)
    with perm (0,1,2) becomes ((24,), (0,))."""
    keep = [i for i in range(len(shape)) if shape[i] != 1]
    if not keep:
        return (1,), (0,)
    order = [p for p in perm if shape[p] != 1]  # output order of kept input axes
    groups: list[list[int]] = []
    for ax in order:
        if groups and groups[-1][-1] + 1 == ax and _next_kept(keep, groups[-1][-1]) == ax:
            groups[-1].append(ax)
        else:
            groups.append([ax])
    by_input = sorted(groups, key=lambda g: g[0])
    new_shape = tuple(int(np.prod([shape[a] for a in g])) for g in by_input)
    index = {id(g): i for i, g in enumerate(by_input)}
    new_perm = tuple(index[id(g)] for g in groups)
    return new_shape, new_perm


def _next_kept(keep: list[int], ax: int):
    later = [k for k in keep if k > ax]
    return later[0] if later else None
