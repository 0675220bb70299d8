"""The readable algorithms of the graph nodes, as procs.

Each function returns the proc for one canonical shape pattern (see
``shapes.py``); procs are generated from source text, so ``print(p)`` shows
exactly what a person would have written.  Sizes stay symbolic: one proc
serves every shape of its pattern.  Schedules (``schedules.py``) derive the
fast kernels from these with ``gpudsl.schedule`` primitives only.
"""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc, proc_from_source

_HEADER = "from __future__ import annotations\n"


def _make(name: str, text: str) -> Proc:
    import gpudsl

    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    return proc_from_source(text, ns, file=f"<gpudsl.stdlib.{name}>")


def _dims(rank: int) -> list[str]:
    return [f"d{i}" for i in range(rank)]


def _loops(rank: int, body: str) -> str:
    lines = []
    for i in range(rank):
        lines.append("    " * (i + 1) + f"for i{i} in seq(0, d{i}):")
    lines.append("    " * (rank + 1) + body)
    return "\n".join(lines)


BINARY_OPS = {"add": "+", "mul": "*"}
UNARY_OPS = {
    "relu": "max({x}, 0.0)",
    "silu": "{x} / (1.0 + exp(-{x}))",
}


def _vec_assert(name: str, vec: int) -> str:
    return f"    assert {name} % {vec} == 0\n" if vec > 1 else ""


@lru_cache(maxsize=None)
def binary(op: str, full: tuple[bool, ...], vec: int = 1) -> Proc:
    """``out = a op b`` where axis k of b is full (``full[k]``) or broadcast.
    ``vec > 1`` states that the innermost extent is a multiple of ``vec``."""
    rank = len(full)
    d = _dims(rank)
    bshape = [d[k] if full[k] else "1" for k in range(rank)]
    aidx = ", ".join(f"i{k}" for k in range(rank))
    bidx = ", ".join(f"i{k}" if full[k] else "0" for k in range(rank))
    key = "".join("f" if f else "b" for f in full)
    name = f"{op}_{key}" + (f"_v{vec}" if vec > 1 else "")
    sizes = ", ".join(f"{x}: size" for x in d)
    text = (
        f"def {name}({sizes}, a: f32[{', '.join(d)}], b: f32[{', '.join(bshape)}], "
        f"out: f32[{', '.join(d)}]):\n" + _vec_assert(d[-1], vec)
        + _loops(rank, f"out[{aidx}] = a[{aidx}] {BINARY_OPS[op]} b[{bidx}]") + "\n")
    return _make(name, text)


@lru_cache(maxsize=None)
def unary(op: str, vec: int = 1) -> Proc:
    """``out = f(x)`` elementwise over the flattened tensor."""
    expr = UNARY_OPS[op].format(x="x[i]")
    name = op + (f"_v{vec}" if vec > 1 else "")
    text = (f"def {name}(n: size, x: f32[n], out: f32[n]):\n" + _vec_assert("n", vec) +
            f"    for i in seq(0, n):\n"
            f"        out[i] = {expr}\n")
    return _make(name, text)


@lru_cache(maxsize=None)
def matmul(batched: bool) -> Proc:
    """``c[m, k] = a[m, n] @ b[n, k]``, optionally over a leading batch axis.
    A vector-matrix product is the m = 1 case."""
    if batched:
        text = (
            "def bmatmul(nb: size, m: size, n: size, k: size, a: f32[nb, m, n], "
            "b: f32[nb, n, k], c: f32[nb, m, k]):\n"
            "    for z in seq(0, nb):\n"
            "        for i in seq(0, m):\n"
            "            for j in seq(0, k):\n"
            "                c[z, i, j] = 0.0\n"
            "                for p in seq(0, n):\n"
            "                    c[z, i, j] += a[z, i, p] * b[z, p, j]\n")
        return _make("bmatmul", text)
    text = (
        "def matmul(m: size, n: size, k: size, a: f32[m, n], b: f32[n, k], c: f32[m, k]):\n"
        "    for i in seq(0, m):\n"
        "        for j in seq(0, k):\n"
        "            c[i, j] = 0.0\n"
        "            for p in seq(0, n):\n"
        "                c[i, j] += a[i, p] * b[p, j]\n")
    return _make("matmul", text)


@lru_cache(maxsize=None)
def permute(perm: tuple[int, ...]) -> Proc:
    """``out = transpose(x, perm)`` for a merged permutation."""
    rank = len(perm)
    d = _dims(rank)
    out_shape = [d[p] for p in perm]
    name = "permute_" + "".join(map(str, perm))
    sizes = ", ".join(f"{x}: size" for x in d)
    # Loop over the output in order; read the input where that element comes from.
    lines = [f"def {name}({sizes}, x: f32[{', '.join(d)}], out: f32[{', '.join(out_shape)}]):"]
    for k in range(rank):
        lines.append("    " * (k + 1) + f"for o{k} in seq(0, {out_shape[k]}):")
    src_idx = [""] * rank
    for k, p in enumerate(perm):
        src_idx[p] = f"o{k}"
    oidx = ", ".join(f"o{k}" for k in range(rank))
    lines.append("    " * (rank + 1) + f"out[{oidx}] = x[{', '.join(src_idx)}]")
    return _make(name, "\n".join(lines) + "\n")


@lru_cache(maxsize=None)
def slice_rows(vec: int = 1) -> Proc:
    """Rows ``begin..begin+m-1`` of a [n, c] tensor (trailing axes merged into c)."""
    name = "slice_rows" + (f"_v{vec}" if vec > 1 else "")
    text = (
        f"def {name}(n: size, c: size, m: size, begin: index, x: f32[n, c], "
        "out: f32[m, c]):\n"
        "    assert begin >= 0\n"
        "    assert begin + m <= n\n" + _vec_assert("c", vec) +
        "    for i in seq(0, m):\n"
        "        for j in seq(0, c):\n"
        "            out[i, j] = x[begin + i, j]\n")
    return _make(name, text)


@lru_cache(maxsize=None)
def replace_slice_rows(vec: int = 1) -> Proc:
    """``x[begin:end] = r`` along the first axis, with ``begin`` and ``end`` read
    from one-element int64 tensors at run time.  Out-of-range or mismatched
    bounds write nothing; one thread records the fault in ``err`` for the host."""
    name = "replace_slice_rows" + (f"_v{vec}" if vec > 1 else "")
    text = (
        f"def {name}(n: size, c: size, m: size, x: f32[n, c], r: f32[m, c], "
        "begin: i64[1], end: i64[1], err: i32[1]):\n" + _vec_assert("c", vec) +
        "    for i in seq(0, m):\n"
        "        for j in seq(0, c):\n"
        "            if begin[0] >= 0 and end[0] <= n and end[0] - begin[0] == m:\n"
        "                x[begin[0] + i, j] = r[i, j]\n"
        "            elif i == 0 and j == 0:\n"
        "                err[0] = 1\n")
    return _make(name, text)
