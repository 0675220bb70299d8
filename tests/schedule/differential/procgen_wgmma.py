"""Random kernels with a warpgroup MMA (docs/hopper.md) for the differential test of the
primitives: one warpgroup stages a 64 x 16 slice of ``x`` and an N x 16 slice of ``w`` into
SHARED tiles per step and accumulates ``x @ w.T`` with ``wgmma`` (N = 8 or 16), committing
and waiting in the wgmma's thread loop or at block level, or staging 32 columns and
issuing two chained wgmmas per step, or filled by a producer warp through a ring of two
slots with barrier rings ``full`` / ``empty`` (what ``pipeline_wgmma`` rewrites), or staging into tiles swizzled with 32 bytes (16
columns, one wgmma per step) or 64 bytes (32 columns, two chained wgmmas on windows
``[rows, 16]`` at columns 0 and 16); the epilogue stores (or adds) the fragment.  Now
and then one is broken on purpose (no wait, a wait that leaves the group in flight, no
barrier after the wait): the primitives must not turn a proved kernel into one that
touches a wgmma in flight, must not regroup its warpgroup, and must keep every meaning,
faults included.  Only generated with ``GPUDSL_DIFF_FAMILY=wgmma`` (or
``Gen(r, family="wgmma")``): the default run's programs stay as they were."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes


def _fragment(n: int) -> str:
    return (f"y[16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), "
            f"8 * (i // 4) + 2 * (t % 4) + i % 2]")


def _broken(r, lines, p=0.15):
    if r.random() >= p:
        return lines
    idx = [k for k, ln in enumerate(lines) if ln.strip().startswith(("wgmma_wait", "sync()"))]
    k = r.choice(idx)
    if lines[k].strip().startswith("wgmma_wait") and r.random() < 0.5:
        return lines[:k] + [lines[k].replace("(0)", "(1)")] + lines[k + 1:]
    return lines[:k] + lines[k + 1:]


def _ring(r, name: str, N: int) -> Program:
    """A producer warp (threads 128-159) fills a ring of two slots with plain stores, the
    warpgroup multiplies each with one wgmma and releases the slot (``empty``): what
    ``pipeline_wgmma`` keeps a group in flight in; its commit and wait in the thread loop
    or after it."""
    NH = N // 2
    head = (f"def {name}(n: size, a: f32, x: f16[64, 16 * n], w: f16[{N}, 16 * n], "
            f"y: f32[64, {N}]):\n    assert n >= 1\n")
    slot = "2 * (ks % 2)"
    row = "2 * (t - 128) + r"
    body = [f"acc: f32[128, {NH}] @ REGISTER", "a_s: f16[4, 64, 8] @ SHARED",
            f"b_s: f16[4, {N}, 8] @ SHARED", "full: barrier[2] @ SHARED",
            "empty: barrier[2] @ SHARED",
            "for t in par(0, 128) @ THREADS:", f"    for i in seq(0, {NH}):",
            f"        acc[t, i] = {r.choice(['0.0', 'a'])}",
            "for j in seq(0, 2):", "    arrive(empty[j], 0, 128)",
            "for ks in seq(0, n):", "    wait(empty[ks % 2], 128, 160)",
            "    for t in par(128, 160) @ THREADS:",
            "        for r in seq(0, 2):", "            for h in seq(0, 2):",
            "                for j in seq(0, 8):",
            f"                    a_s[{slot} + h, {row}, j] = x[{row}, 16 * ks + 8 * h + j]",
            f"                    if {row} < {N}:",
            f"                        b_s[{slot} + h, {row}, j] = w[{row}, 16 * ks + 8 * h + j]",
            "    arrive(full[ks % 2], 128, 160)", "    wait(full[ks % 2], 0, 128)",
            "    for t in par(0, 128) @ THREADS:",
            f"        wgmma(acc[t, 0:{NH}], a_s[{slot}:{slot} + 2, 0:64, 0:8], "
            f"b_s[{slot}:{slot} + 2, 0:{N}, 0:8])"]
    pad = "        " if r.random() < 0.5 else "    "
    body += [pad + "wgmma_commit()", pad + "wgmma_wait(0)", "    arrive(empty[ks % 2], 0, 128)"]
    if r.random() < 0.1:   # the accumulator read in the loop: no group may stay in flight
        body += ["    for t in par(0, 128) @ THREADS:", "        acc[t, 0] = acc[t, 0] * 2.0"]
    body += ["sync()", "for t in par(0, 128) @ THREADS:", f"    for i in seq(0, {NH}):",
             f"        {_fragment(N)} {r.choice(['=', '+='])} acc[t, i]"]
    body = _broken(r, body)
    lines = ["    for b in par(0, 1) @ BLOCKS:"] + ["        " + ln for ln in body]
    return Program("wgmma", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])


def wgmma_program(r: random.Random, name: str) -> Program:
    N = r.choice([8, 16])
    if r.random() < 0.2:
        return _ring(r, name, N)
    NH = N // 2
    form = r.choice(["local", "block", "ktile", "swz32", "swz64"])
    kh = 4 if form in ("ktile", "swz64") else 2   # halves of 8 columns per step
    swz = 16 * kh if form.startswith("swz") else 0   # rows of exactly the swizzle's bytes
    head = (f"def {name}(n: size, a: f32, x: f16[64, {8 * kh} * n], w: f16[{N}, {8 * kh} * n], "
            f"y: f32[64, {N}]):\n    assert n >= 1\n")
    init = r.choice(["0.0", "a", "f32(x[t // 2, 0])"])
    tiles = ([f"a_s: f16[64, {8 * kh}] @ SHARED(swizzle={swz})",
              f"b_s: f16[{N}, {8 * kh}] @ SHARED(swizzle={swz})"] if swz else
             [f"a_s: f16[{kh}, 64, 8] @ SHARED", f"b_s: f16[{kh}, {N}, 8] @ SHARED"])
    body = [f"acc: f32[128, {NH}] @ REGISTER"] + tiles + [
            "for t in par(0, 128) @ THREADS:",
            f"    for i in seq(0, {NH}):",
            f"        acc[t, i] = {init}",
            "for ks in seq(0, n):",
            "    for t in par(0, 128) @ THREADS:",
            f"        for h in seq(0, {kh // 2}):",
            "            for j in seq(0, 8):",
            f"                a_s[2 * h + t % 2, t // 2, j] = x[t // 2, {8 * kh} * ks + 16 * h "
            "+ 8 * (t % 2) + j]",
            f"        if t < {2 * N}:",
            f"            for h in seq(0, {kh // 2}):",
            "                for j in seq(0, 8):",
            f"                    b_s[2 * h + t % 2, t // 2, j] = w[t // 2, {8 * kh} * ks + "
            "16 * h + 8 * (t % 2) + j]",
            "    sync()",
            "    for t in par(0, 128) @ THREADS:"]
    call = f"wgmma(acc[t, 0:{NH}], a_s[2 * s:2 * s + 2, 0:64, 0:8], b_s[2 * s:2 * s + 2, 0:{N}, 0:8])"
    plain = r.random() < 0.35   # the per-thread product loops that make_wgmma turns into it
    row = "16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2)"
    col = "8 * (i // 4) + 2 * (t % 4) + i % 2"
    if swz:
        body = [ln.replace("a_s[2 * h + t % 2, t // 2, j]", "a_s[t // 2, 16 * h + 8 * (t % 2) + j]")
                .replace("b_s[2 * h + t % 2, t // 2, j]", "b_s[t // 2, 16 * h + 8 * (t % 2) + j]")
                for ln in body]
        call = (f"wgmma(acc[t, 0:{NH}], a_s[0:64, 16 * s:16 * s + 16], "
                f"b_s[0:{N}, 16 * s:16 * s + 16])")
        if plain:
            body += [f"        for s in seq(0, {kh // 2}):", f"            for i in seq(0, {NH}):",
                     "                for kk in seq(0, 16):",
                     f"                    acc[t, i] += f32(a_s[{row}, 16 * s + kk]) * "
                     f"f32(b_s[{col}, 16 * s + kk])"]
        else:
            body += [f"        for s in seq(0, {kh // 2}):", f"            {call}"]
    elif plain:
        s0 = "2 * s + " if form == "ktile" else ""
        nest = [f"for i in seq(0, {NH}):", "    for kk in seq(0, 16):",
                f"        acc[t, i] += f32(a_s[{s0}kk // 8, {row}, kk % 8]) * "
                f"f32(b_s[{s0}kk // 8, {col}, kk % 8])"]
        if form == "ktile":
            nest = ["for s in seq(0, 2):"] + ["    " + ln for ln in nest]
        body += ["        " + ln for ln in nest]
    elif form == "ktile":
        body += ["        for s in seq(0, 2):", f"            {call}"]
    else:
        body += [f"        {call.replace('2 * s:2 * s + 2', '0:2')}"]
    waits = [] if plain else ["wgmma_commit()", "wgmma_wait(0)"]
    if form == "local":
        body += ["        " + w for w in waits]
    else:
        body += ["    " + w for w in waits]
    body += ["    sync()",
             "for t in par(0, 128) @ THREADS:",
             f"    for i in seq(0, {NH}):",
             f"        {_fragment(N)} {r.choice(['=', '+='])} acc[t, i]"
             + r.choice(["", " * 2.0", " + a"])]
    body = _broken(r, body)
    lines = ["    for b in par(0, 1) @ BLOCKS:"] + ["        " + ln for ln in body]
    return Program("wgmma", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])


__all__ = ["wgmma_program"]
