"""A toy node for tests/stdlib/test_node_table.py: ``square_add(a, b) = a * a + b``
elementwise, as a user would add one: this module (its algorithm, its schedule, its
tuning task) plus one declaration in the node table (in the test)."""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from gpudsl.stdlib.common import make_proc, vec_assert
from gpudsl.stdlib.node_shapes import floats
from gpudsl.stdlib.node_table import tuned_proc
from gpudsl.stdlib.node_registry import Launch, ShapeError
from gpudsl.stdlib.stream_schedule import pick_vec, schedule_stream
from gpudsl.stdlib.tuning import NodeTask, stream_space


@lru_cache(maxsize=None)
def square_add(vec: int = 1):
    """The readable algorithm over the flattened tensors."""
    name = "square_add" + (f"_v{vec}" if vec > 1 else "")
    return make_proc(name, f"def {name}(n: size, a: f32[n], b: f32[n], out: f32[n]):\n"
                     + vec_assert("n", vec) + "    for i in seq(0, n):\n"
                     "        out[i] = a[i] * a[i] + b[i]\n")


@lru_cache(maxsize=None)
def square_add_kernel(vec: int, threads: int = 256):
    ops = [("a", ""), ("b", ""), ("out", "")] if vec > 1 else []
    return schedule_stream(square_add(vec), rows=[], inner="i", operands=ops, vec=vec,
                           threads=threads)


class SquareAddTask(NodeTask):
    task = "square_add"

    def __init__(self, shape):
        self.n = math.prod(shape)
        self._key = (tuple(shape),)

    def space(self, **restrict):
        return stream_space(self.n, **restrict)

    def __call__(self, c):
        return square_add_kernel(c["vec"], c["threads"])

    def args(self, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        return {"a": rng.standard_normal(self.n).astype(np.float32),
                "b": rng.standard_normal(self.n).astype(np.float32),
                "out": np.zeros(self.n, np.float32)}

    def shapes(self) -> dict:
        return {k: ((self.n,), "float32") for k in ("a", "b", "out")}

    def reference(self, a, b, out=None):
        return a.astype(np.float64) ** 2 + b

    @property
    def bytes_moved(self) -> float:
        return 12.0 * self.n


def shape(ops, attrs):
    floats(ops, 0, 1)
    if tuple(ops[0].shape) != tuple(ops[1].shape):
        raise ShapeError(f"the operands have shapes {list(ops[0].shape)} and "
                         f"{list(ops[1].shape)}; they must be equal", 1)
    return "float32", tuple(ops[0].shape)


def launch(shapes, attrs, backend):
    n = math.prod(shapes[0])
    p = tuned_proc(lambda: SquareAddTask(shapes[0]), ("square_add", shapes[0]), backend) \
        or square_add_kernel(pick_vec(n))
    return Launch(p, (("a", ("in", 0, (n,))), ("b", ("in", 1, (n,))),
                      ("out", ("out", (n,)))), shapes[0])


def example(rng, rows, cols):
    return [rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(2)], {}
