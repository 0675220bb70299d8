"""The bandwidth nodes' schedule parameters as autotuning spaces (docs/autotuning.md):
``permute``, the pointwise nodes (``add``, ``mul``, ``relu``, ``silu``), ``slice`` and
``replace_slice``.  Each node has a *task* (a picklable schedule function: a
configuration → the proc), its space, the arguments it is tuned on, its numpy reference
(the node's declaration's, ``reference``: one per node) and the bytes it moves (for
GB/s); ``gpudsl tune NODE --shape ...`` uses them.  ``matmul``'s build is in
``matmul.py``."""
from __future__ import annotations

import math

import numpy as np

from .matmul import MatmulBuild
from .node_registry import get, tuned
from .permute import (TILE, moves_inner, permute_algorithm, schedule_copy,
                      schedule_transpose, schedule_transpose_cut)
from .pointwise import binary_kernel, unary_kernel
from .shapes import broadcast_pattern, merge_permutation, normalize_perm, require
from .slices import replace_slice_kernel, slice_kernel

THREADS = (64, 128, 256, 512, 1024)
F32 = "float32"


def stream_space(inner: int, threads=THREADS, vec=(1, 2, 4)) -> Space:
    """Threads per block and the vector width, which must divide the inner extent."""
    from ..autotune.space import Space

    return Space(threads=list(threads), vec=list(vec), where=lambda c: inner % c.vec == 0)


def reference(name: str, *args, **attrs):
    """Node ``name``'s reference (its declaration's, the one numpy meaning)."""
    return get(name).reference(*args, **attrs)


class NodeTask:
    """Base: ``task`` (the database's name), ``args(seed)``, ``reference``,
    ``bytes_moved``, ``space(**restrict)`` and the call (configuration → proc)."""

    task = "node"

    def reference(self, **args):
        raise NotImplementedError

    def shapes(self) -> dict:
        """``{name: (shape, dtype)}`` of the arguments it is tuned on (what
        ``tune._shapes(self.args(seed))`` gives), without allocating them: with the
        task's name and the environment, the database's key of a winner."""
        raise NotImplementedError

    @property
    def rate(self) -> dict:
        """What ``autotune.tune`` turns a time into a rate with."""
        return dict(bytes_moved=self.bytes_moved)

    def __repr__(self):
        return f"{type(self).__name__}{self._key}"


class PointwiseTask(NodeTask):
    """A binary pointwise node (``add``, ``mul``...) of ``a_shape`` and ``b_shape`` (b
    may broadcast), or a unary one (``relu``, ``silu``...) of ``a_shape``: any node of
    the table with an element expression (``Node.expr``)."""

    def __init__(self, op: str, a_shape, b_shape=None):
        self.op, self.task = op, op
        self.a_shape = tuple(a_shape)
        self.b_shape = tuple(b_shape) if b_shape is not None else None
        self._key = (op, self.a_shape, self.b_shape)
        decl = get(op)
        require(decl is not None and decl.pointwise is not None,
                f"{op!r} is not a pointwise node of the node table")
        if decl.pointwise == "binary":
            require(self.b_shape is not None, f"{op} needs two shapes")
            bc = broadcast_pattern(self.a_shape, self.b_shape)
            self.full, self.dims = bc.full, bc.dims
            self.bdims = tuple(d if f else 1 for d, f in zip(bc.dims, bc.full))
        else:
            self.full, self.dims = None, (math.prod(self.a_shape),)

    def space(self, **restrict):
        return stream_space(self.dims[-1], **restrict)

    def __call__(self, c):
        if self.full is not None:
            return binary_kernel(self.op, self.full, c["vec"], c["threads"])
        return unary_kernel(self.op, c["vec"], c["threads"])

    def args(self, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        out = {"a": rng.standard_normal(self.dims).astype(np.float32)}
        if self.full is not None:
            out["b"] = rng.standard_normal(self.bdims).astype(np.float32)
            out["out"] = np.zeros(self.dims, np.float32)
            return out
        return {"x": out["a"], "out": np.zeros(self.dims, np.float32)}

    def shapes(self) -> dict:
        if self.full is not None:
            return {"a": (self.dims, F32), "b": (self.bdims, F32), "out": (self.dims, F32)}
        return {"x": (self.dims, F32), "out": (self.dims, F32)}

    def reference(self, **a):
        if self.full is not None:
            return reference(self.op, a["a"], a["b"])
        return reference(self.op, a["x"])

    @property
    def bytes_moved(self) -> float:
        n = math.prod(self.dims)
        return 4.0 * (2 * n + (math.prod(self.bdims) if self.full is not None else 0))


class PermuteTask(NodeTask):
    """``numpy.transpose(x, perm)``: a copy (threads, vec) when the inner axis stays,
    else shared tiles (tile, pad; threads for the edge kernels of other shapes)."""

    task = "permute"

    def __init__(self, shape, perm):
        self.shape = tuple(int(s) for s in shape)
        self.perm = normalize_perm(tuple(perm), len(self.shape))
        self.mshape, self.mperm = merge_permutation(self.shape, self.perm)
        self._key = (self.shape, self.perm)
        self.copy = not moves_inner(self.mperm)

    def space(self, **restrict):
        rank = len(self.mperm)
        if self.copy:
            return stream_space(self.mshape[-1], **restrict)
        cin = self.mperm[rank - 1]
        r, c = self.mshape[-1], self.mshape[cin]
        from ..autotune.space import Space

        dom = dict(dict(tile=[16, 32], pad=[0, 1], threads=[128, 256]), **restrict)
        return Space(**dom, where=lambda k: k.threads == dom["threads"][0]
                     or not (r % k.tile == 0 and c % k.tile == 0))

    def __call__(self, k):
        rank = len(self.mperm)
        if self.copy:
            v = k["vec"]
            alg = permute_algorithm(self.mperm, ((rank - 1, v),) if v > 1 else ())
            return schedule_copy(alg, self.mperm, threads=k["threads"], vec=v,
                                 vectorized=v > 1)
        cin = self.mperm[rank - 1]
        t = k["tile"]
        if self.mshape[-1] % t == 0 and self.mshape[cin] % t == 0:
            asserts = tuple(sorted({(rank - 1, t), (cin, t)}))
            return schedule_transpose(permute_algorithm(self.mperm, asserts), self.mperm,
                                      tile=t, pad=k["pad"])
        return schedule_transpose_cut(permute_algorithm(self.mperm), self.mperm, tile=t,
                                      pad=k["pad"], threads=k["threads"])

    def args(self, seed: int) -> dict:
        x = np.random.default_rng(seed).standard_normal(self.mshape).astype(np.float32)
        return {"x": x, "out": np.zeros(tuple(self.mshape[p] for p in self.mperm),
                                        np.float32)}

    def shapes(self) -> dict:
        return {"x": (tuple(self.mshape), F32),
                "out": (tuple(self.mshape[p] for p in self.mperm), F32)}

    def reference(self, x, out):
        return reference("permute", x, perm=self.mperm)

    @property
    def bytes_moved(self) -> float:
        return 8.0 * math.prod(self.shape)


class SliceTask(NodeTask):
    """Rows ``begin..end-1`` of a tensor of ``shape`` (trailing axes merged)."""

    task = "slice"

    def __init__(self, shape, begin: int, end: int):
        self.shape = tuple(int(s) for s in shape)
        self.n, self.c = self.shape[0], math.prod(self.shape[1:])
        require(0 <= begin < end <= self.n, f"slice [{begin}, {end}) outside {self.n} rows")
        self.begin, self.m = begin, end - begin
        self._key = (self.shape, begin, end)

    def space(self, **restrict):
        return stream_space(self.c, **restrict)

    def __call__(self, c):
        return slice_kernel(c["vec"], c["threads"])

    def args(self, seed: int) -> dict:
        x = np.random.default_rng(seed).standard_normal((self.n, self.c)).astype(np.float32)
        return {"begin": self.begin, "x": x, "out": np.zeros((self.m, self.c), np.float32)}

    def shapes(self) -> dict:
        return {"x": ((self.n, self.c), F32), "out": ((self.m, self.c), F32)}

    def reference(self, begin, x, out):
        return reference("slice", x, begin=begin, end=begin + self.m)

    @property
    def bytes_moved(self) -> float:
        return 8.0 * self.m * self.c


class ReplaceSliceTask(SliceTask):
    """``x[begin:end] = r`` in place, the bounds read at run time."""

    task = "replace_slice"

    def __call__(self, c):
        return replace_slice_kernel(c["vec"], c["threads"])

    def args(self, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        return {"x": rng.standard_normal((self.n, self.c)).astype(np.float32),
                "r": rng.standard_normal((self.m, self.c)).astype(np.float32),
                "begin": np.array([self.begin], np.int64),
                "end": np.array([self.begin + self.m], np.int64),
                "err": np.zeros(1, np.int32)}

    def shapes(self) -> dict:
        return {"x": ((self.n, self.c), F32), "r": ((self.m, self.c), F32),
                "begin": ((1,), "int64"), "end": ((1,), "int64"), "err": ((1,), "int32")}

    def reference(self, x, r, begin, end, err):
        return {"x": reference("replace_slice", x, r, begin, end),
                "err": np.zeros(1, np.int32)}


class MatmulTask(MatmulBuild):
    """``gpudsl tune matmul``: the kernel ``ops.matmul`` runs for a configuration of
    :func:`matmul.matmul_space` (the build), with its space, arguments and reference."""

    def space(self, **params):
        from .matmul import DEFAULTS, matmul_space

        unknown = set(params) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown parameter(s) {', '.join(sorted(unknown))}; the "
                            f"parameters are {', '.join(k for k in DEFAULTS if k != 'vec')}")
        return matmul_space(**{k: tuple(v) for k, v in params.items()})

    def _out(self):
        return self.a_shape[:-1] + (self.b_shape[-1],)

    def args(self, seed: int) -> dict:
        from ..autotune.tune import random_args

        return random_args({"a": self.a_shape, "b": self.b_shape, "c": self._out()}, seed)

    def reference(self, a, b, c):
        return reference("matmul", a, b)

    @property
    def rate(self) -> dict:
        sa, sb = self.a_shape, self.b_shape
        m = sa[-2] if len(sa) > 1 else 1
        batch = sa[0] if len(sa) == 3 else 1
        return dict(flops=2.0 * batch * m * sa[-1] * sb[-1])


def tuned_kernel(make_task, backend: str):
    """The proc of the tuning database's winner for the task ``make_task()`` builds, on
    ``backend``'s device, or None (the defaults): no winner, a task the shapes do not
    make, an unreadable database or a winner that no longer builds.  Never tunes;
    allocates no argument (the key comes from the task's ``shapes()``)."""
    from ..autotune.db import lookup_winner
    from ..autotune.env import env_key

    try:
        task = make_task()
        winner = lookup_winner(task.task, task.shapes(), env_key(backend))
        return task(dict(winner)) if winner else None
    except Exception:  # never stops an op: the defaults
        return None


def tuned_proc(make_task, key, backend: str):
    """The proc of the tuning database's winner for ``make_task()`` on ``backend``'s
    device, or None (the defaults), read once per database version (``nodes.tuned``);
    never tunes."""
    return tuned(("proc", key, backend), lambda: tuned_kernel(make_task, backend))


__all__ = ["MatmulTask", "tuned_kernel", "tuned_proc", "stream_space", "PointwiseTask", "PermuteTask", "SliceTask", "ReplaceSliceTask",
           "TILE"]
