"""The wgmma procs of the tests: a 64 x N GEMM stepping K by 16 (``c = a @ bt.T``), with
the commit and wait inside the warpgroup's thread loop (``local``) or at block level
(``block``), its twins and helpers to run them."""
from __future__ import annotations

import numpy as np

import gpudsl
from gpudsl.ir.wgmma_meaning import frag_col, frag_row


_GEMM = """\
@proc
def wg_gemm(k: size, a: DT[64, k], bt: DT[N, k], c: f32[64, N]):
    assert k % 16 == 0
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, NH] @ REGISTER
        for t in par(0, 128) @ THREADS:
            for i in seq(0, NH):
                acc[t, i] = 0.0
        a_s: DT[2, 64, 8] @ SHARED
        b_s: DT[2, N, 8] @ SHARED
        for ks in seq(0, k // 16):
            for t in par(0, 128) @ THREADS:
                for j in seq(0, 8):
                    a_s[t % 2, t // 2, j] = a[t // 2, 16 * ks + 8 * (t % 2) + j]
                for q in seq(0, P):
                    if 128 * q + t < 2 * N:
                        for j in seq(0, 8):
                            b_s[t % 2, 64 * q + t // 2, j] = bt[64 * q + t // 2, 16 * ks + 8 * (t % 2) + j]
            sync()
            for t in par(0, 128) @ THREADS:
                wgmma(acc[t, 0:NH], a_s, b_s)
                wgmma_commit()
                wgmma_wait(0)
            sync()
        for t in par(0, 128) @ THREADS:
            for i in seq(0, NH):
                c[16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
"""


_KTILE = """\
@proc
def wg_gemm(k: size, a: DT[64, k], bt: DT[N, k], c: f32[64, N]):
    assert k % 32 == 0
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, NH] @ REGISTER
        for t in par(0, 128) @ THREADS:
            for i in seq(0, NH):
                acc[t, i] = 0.0
        a_s: DT[4, 64, 8] @ SHARED
        b_s: DT[4, N, 8] @ SHARED
        for ks in seq(0, k // 32):
            for t in par(0, 128) @ THREADS:
                for h in seq(0, 2):
                    for j in seq(0, 8):
                        a_s[2 * h + t % 2, t // 2, j] = a[t // 2, 32 * ks + 16 * h + 8 * (t % 2) + j]
                for q in seq(0, 2 * P):
                    if 128 * q + t < 4 * N:
                        for j in seq(0, 8):
                            b_s[(128 * q + t) // N, (128 * q + t) % N, j] = bt[(128 * q + t) % N, 32 * ks + 8 * ((128 * q + t) // N) + j]
            sync()
            for t in par(0, 128) @ THREADS:
                for s in seq(0, 2):
                    wgmma(acc[t, 0:NH], a_s[2 * s:2 * s + 2, 0:64, 0:8], b_s[2 * s:2 * s + 2, 0:N, 0:8])
            wgmma_commit()
            wgmma_wait(0)
            sync()
        for t in par(0, 128) @ THREADS:
            for i in seq(0, NH):
                c[16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
"""


def gemm(N: int, form: str = "local", dt: str = "f16"):
    """``c[64, N] = a[64, k] @ bt[N, k].T`` by a loop of wgmmas over k (one warpgroup):
    ``local`` commits and waits in the wgmma's thread loop, ``block`` at block level,
    ``ktile`` stages 32 columns of K and issues two chained wgmmas per stage (windows of
    a [4, 64, 8] tile: descriptors with nonzero starts, one fence for the loop)."""
    text = _KTILE if form == "ktile" else _GEMM
    for key, val in (("NH", N // 2), ("DT", dt), ("N", N), ("P", (2 * N + 127) // 128)):
        text = text.replace(key, str(val))
    if form == "block":
        text = text.replace("                wgmma_commit()\n                wgmma_wait(0)\n", "")
        text = _after_wgmma_loop(text, "            wgmma_commit()\n            wgmma_wait(0)\n")
    elif form not in ("local", "ktile"):
        raise ValueError(form)
    return gpudsl.proc_from_source(text)


def _after_wgmma_loop(text: str, stmts: str) -> str:
    """``stmts`` (block level) right after the thread loop holding the wgmma."""
    lines = text.splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if "wgmma(" in ln)
    return "".join(lines[:k + 1]) + stmts + "".join(lines[k + 1:])


def twin(p, old: str, new: str):
    """``p`` with one piece of its source replaced (asserting it was there)."""
    text = str(p)
    assert old in text, old
    return gpudsl.proc_from_source(text.replace(old, new))


def operands(N: int, k: int, seed: int = 0, dt=np.float16):
    """Small integers (sums exact in f32): a[64, k], bt[N, k], c[64, N]."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(64, k)).astype(dt)
    bt = rng.integers(-3, 4, size=(N, k)).astype(dt)
    return dict(a=a, bt=bt, c=np.zeros((64, N), np.float32))


def expected(args) -> np.ndarray:
    return args["a"].astype(np.float64) @ args["bt"].astype(np.float64).T


def fragment_table(N: int) -> np.ndarray:
    """``[lane, i] -> (row, col)`` of the accumulator fragment (the reference layout)."""
    return np.array([[(frag_row(l, i), frag_col(l, i)) for i in range(N // 2)]
                     for l in range(128)])
