"""``argmax(x)`` and ``topk(x, k)`` over the last axis (``gpudsl.ops``): one block per
row; each thread scans its strided entries, then the block's best (value, index) pair
comes from :func:`gpudsl.stdlib.reductions.block_argmax` (``shfl_xor`` steps on the
pairs, one SHARED exchange), called as one line.

The order is numpy's ``argmax``: the larger value first, the smaller index among equal
values, NaN above every number (the first NaN wins).  ``topk`` takes ``k`` rounds; round
``kk`` picks the best entry ranked after round ``kk - 1``'s pick in that order (no entry
is marked: the order is total), so the values come sorted, largest first, and equal
values in index order (what ``torch.topk`` gives on CPU).  A round costs a pass over the
row: ``k`` passes in all, meant for a small ``k``.  Rows are the leading axes merged."""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc
from .common import make_proc
from .halves import load, store
from .reduce import THREADS_PER_ROW

# (a, ia) ranks before (b, ib): a larger value, a smaller index among equals, NaN first
_BEFORE = "{a} > {b} or ({a} == {b} and {ia} < {ib}) or ({a} != {a} and ({b} == {b} or {ia} < {ib}))"


def before(a: str, ia: str, b: str, ib: str) -> str:
    return _BEFORE.format(a=a, ia=ia, b=b, ib=ib)


def _threads(n: int) -> int:
    t = 32
    while t < THREADS_PER_ROW and t < n:
        t *= 2
    return t


def _suffix(dt: str) -> str:
    return "" if dt == "f32" else f"_{dt}"


@lru_cache(maxsize=None)
def argmax_kernel(threads: int, dt: str = "f32") -> Proc:
    """The index of each row's largest entry (``out[i]``, int64)."""
    T = threads
    J = f"({T} * jo + t)"
    v = load(f"x[i, {J}]", dt)
    text = (
        f"def argmax_rows_t{T}{_suffix(dt)}(r: size, n: size, x: {dt}[r, n], out: i64[r]):\n"
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        bv: f32[{T}] @ REGISTER\n"
        f"        bi: i64[{T}] @ REGISTER\n"
        f"        rv: f32[{T}] @ REGISTER\n"
        f"        ri: i64[{T}] @ REGISTER\n"
        f"        for t in par(0, {T}) @ THREADS:\n"
        f"            bv[t] = {load('x[i, 0]', dt)}\n"
        "            bi[t] = 0\n"
        f"            for jo in seq(0, (n + {T - 1}) // {T}):\n"
        f"                if {J} < n:\n"
        f"                    v: f32 = {v}\n"
        f"                    if {before('v', J, 'bv[t]', 'bi[t]')}:\n"
        "                        bv[t] = v\n"
        f"                        bi[t] = {J}\n"
        f"        block_argmax({T}, bv, bi, rv, ri)\n"
        f"        for t in par(0, {T}) @ THREADS:\n"
        "            if t == 0:\n"
        "                out[i] = ri[t]\n")
    return make_proc("select", text)


@lru_cache(maxsize=None)
def topk_kernel(threads: int, dt: str = "f32") -> Proc:
    """Each row's ``k`` largest entries, largest first (``vals[i, :]``) and their
    indices (``idx[i, :]``, int64)."""
    T = threads
    J = f"({T} * jo + t)"
    v = load(f"x[i, {J}]", dt)
    text = (
        f"def topk_rows_t{T}{_suffix(dt)}(r: size, n: size, k: size, x: {dt}[r, n], "
        f"vals: {dt}[r, k], idx: i64[r, k]):\n"
        "    assert k <= n\n"
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        bv: f32[{T}] @ REGISTER\n"
        f"        bi: i64[{T}] @ REGISTER\n"
        f"        pv: f32[{T}] @ REGISTER\n"
        f"        pi: i64[{T}] @ REGISTER\n"
        "        for kk in seq(0, k):\n"
        f"            for t in par(0, {T}) @ THREADS:\n"
        "                bv[t] = -inf\n"
        "                bi[t] = n\n"
        f"                for jo in seq(0, (n + {T - 1}) // {T}):\n"
        f"                    if {J} < n:\n"
        f"                        v: f32 = {v}\n"
        f"                        if kk == 0 or {before('pv[t]', 'pi[t]', 'v', J)}:\n"
        f"                            if {before('v', J, 'bv[t]', 'bi[t]')}:\n"
        "                                bv[t] = v\n"
        f"                                bi[t] = {J}\n"
        f"            block_argmax({T}, bv, bi, pv, pi)\n"
        f"            for t in par(0, {T}) @ THREADS:\n"
        "                if t == 0:\n"
        f"                    vals[i, kk] = {store('pv[t]', dt)}\n"
        "                    idx[i, kk] = pi[t]\n"
        "            sync()\n")  # the next round's exchange overwrites this one's
    return make_proc("select", text)


def plan_argmax(n: int, dt: str = "f32") -> Proc:
    return argmax_kernel(_threads(n), dt)


def plan_topk(n: int, dt: str = "f32") -> Proc:
    return topk_kernel(_threads(n), dt)


__all__ = ["argmax_kernel", "topk_kernel", "plan_argmax", "plan_topk", "before"]
