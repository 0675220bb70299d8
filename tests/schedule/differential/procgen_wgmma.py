"""Random kernels with a warpgroup MMA (docs/hopper.md) for the differential test of the
primitives: one warpgroup stages a 64 x 16 slice of ``x`` and an N x 16 slice of ``w`` into
SHARED tiles per step and accumulates ``x @ w.T`` with ``wgmma`` (N = 8 or 16), committing
and waiting in the wgmma's thread loop or at block level, or staging 32 columns and
issuing two chained wgmmas per step, or filled by a producer warp through a ring of two
slots with barrier rings ``full`` / ``empty`` (what ``pipeline_wgmma`` rewrites), or staging into tiles swizzled with 32 bytes (16
columns, one wgmma per step) or 64 bytes (32 columns, two chained wgmmas on windows
``[rows, 16]`` at columns 0 and 16), or with B stored K x N (``b_major="mn"``: a plain
tile of rows of 8, or one swizzled with 32 bytes), or of f32 operands (a tf32 wgmma, k8, or its nest of ``tf32(..) * tf32(..)`` products),
or two m64 tiles per warpgroup (``acc[t, mi, ..]``, a wgmma per tile);
the epilogue stores (or adds) the fragment.  Now
and then one is broken on purpose (no wait, a wait that leaves the group in flight, no
barrier after the wait): the primitives must not turn a proved kernel into one that
touches a wgmma in flight, must not regroup its warpgroup, and must keep every meaning,
faults included.  Only generated with ``GPUDSL_DIFF_FAMILY=wgmma`` (or
``Gen(r, family="wgmma")``): the default run's programs stay as they were."""
from __future__ import annotations

import random
import zlib

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


def _mn_major(body: list, n: int, swz: bool) -> list:
    """The "local" form with B stored K x N (``b_major="mn"``): a plain tile of rows of 8
    (``[N // 8, 16, 8]``) or a 32-byte swizzled one of rows of 16 (``[16, 16]``)."""
    tile = ("b_s: f16[16, 16] @ SHARED(swizzle=32)" if swz else
            f"b_s: f16[{n // 8}, 16, 8] @ SHARED")
    win = "b_s[0:16, 0:16]" if swz else f"b_s[0:{n // 8}, 0:16, 0:8]"
    col = "8 * (i // 4) + 2 * (t % 4) + i % 2"
    read = f"b_s[kk, {col}]" if swz else f"b_s[({col}) // 8, kk, ({col}) % 8]"
    store = ("b_s[t, 8 * c + j] = w[8 * c + j, 16 * ks + t]" if swz else
             "b_s[c, t, j] = w[8 * c + j, 16 * ks + t]")
    out = []
    k = 0
    while k < len(body):
        ln = body[k]
        if ln.startswith("b_s:"):
            out.append(tile)
        elif ln.strip().startswith(f"if t < {2 * n}:"):
            pad = ln[:len(ln) - len(ln.lstrip())]
            out += [f"{pad}if t < 16:", f"{pad}    for c in seq(0, {n // 8}):",
                    f"{pad}        for j in seq(0, 8):", f"{pad}            {store}"]
            k += 3   # the K-major stores (3 lines)
        elif "wgmma(acc" in ln:
            out.append(ln[:ln.index("b_s[")] + f'{win}, b_major="mn")')
        elif "f32(b_s[" in ln:
            out.append(ln[:ln.index("f32(b_s[")] + f"f32({read})")
        else:
            out.append(ln)
        k += 1
    return out


_TF32 = (("for j in seq(0, 8):", "for j in seq(0, 4):"),
         ("16 * ks + 16 * h + 8 * (t % 2) + j", "8 * ks + 8 * h + 4 * (t % 2) + j"),
         ("0:64, 0:8]", "0:64, 0:4]"))


_TF32_NEST = (("for kk in seq(0, 16):", "for kk in seq(0, 8):"), ("kk // 8", "kk // 4"),
              ("kk % 8", "kk % 4"), ("f32(a_s[", "tf32(a_s["), ("f32(b_s[", "tf32(b_s["))


def _tf32(body: list, head: str, n: int):
    """The "block" form in f32: a tf32 wgmma (k8, windows [2, rows, 4]), or its product
    loops ``acc += tf32(a_s[..]) * tf32(b_s[..])`` (what make_wgmma turns into it)."""
    pairs = _TF32 + _TF32_NEST + (("f16[2, 64, 8]", "f32[2, 64, 4]"), (f"f16[2, {n}, 8]", f"f32[2, {n}, 4]"),
                     (f"0:{n}, 0:8]", f"0:{n}, 0:4]"))
    out = []
    for ln in body:
        for old, new in pairs:
            ln = ln.replace(old, new)
        out.append(ln)
    head = head.replace("f16[64, 16 * n]", "f32[64, 8 * n]").replace(
        f"f16[{n}, 16 * n]", f"f32[{n}, 8 * n]")
    return out, head


def _ring(r, name: str, N: int) -> Program:
    """A producer warp (threads 128-159) fills a ring of two slots with plain stores, the
    warpgroup multiplies each with one wgmma and releases the slot (``empty``): what
    ``pipeline_wgmma`` keeps a group in flight in; its commit and wait in the thread loop
    or after it; half of them in a pair of BLOCKS loops (what ``persist_blocks`` walks)."""
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
    # a pair of BLOCKS loops (persist_blocks walks the outer one) for half the names: not
    # a draw, so the family's seeds generate the programs they generated before
    if zlib.crc32(name.encode()) % 2:
        lines = lines[:1] + ["        for b2 in par(0, 1) @ BLOCKS:"] + \
            ["    " + ln for ln in lines[1:]]
    return Program("wgmma", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])


def _two_tiles(r, name: str, N: int) -> Program:
    """Two m64 tiles per warpgroup (the 256 x 128 GEMM's consumers): 128 rows of ``x``,
    an accumulator ``acc[t, mi, i]`` per tile, ``for mi in seq(0, 2): wgmma(acc[t, mi,
    ..], a_s[.., 64 * mi:64 * mi + 64, ..], ..)`` per k16 step, or its product loops
    (``mi`` outside the fragment: what make_wgmma turns into that; now and then inside
    it, which make_wgmma refuses)."""
    NH = N // 2
    row = "16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2)"
    col = "8 * (i // 4) + 2 * (t % 4) + i % 2"
    head = (f"def {name}(n: size, a: f32, x: f16[128, 16 * n], w: f16[{N}, 16 * n], "
            f"y: f32[128, {N}]):\n    assert n >= 1\n")
    body = [f"acc: f32[128, 2, {NH}] @ REGISTER", "a_s: f16[2, 128, 8] @ SHARED",
            f"b_s: f16[2, {N}, 8] @ SHARED",
            "for t in par(0, 128) @ THREADS:", "    for mi in seq(0, 2):",
            f"        for i in seq(0, {NH}):",
            f"            acc[t, mi, i] = {r.choice(['0.0', 'a', 'f32(x[t, 0])'])}",
            "for ks in seq(0, n):", "    for t in par(0, 128) @ THREADS:",
            "        for h in seq(0, 2):", "            for j in seq(0, 8):",
            "                a_s[h, t, j] = x[t, 16 * ks + 8 * h + j]",
            f"        if t < {2 * N}:", "            for j in seq(0, 8):",
            "                b_s[t % 2, t // 2, j] = w[t // 2, 16 * ks + 8 * (t % 2) + j]",
            "    sync()", "    for t in par(0, 128) @ THREADS:"]
    plain = r.random() < 0.5
    if plain:
        loops = [f"for i in seq(0, {NH}):", "for mi in seq(0, 2):"]
        if r.random() < 0.8:
            loops.reverse()          # mi outside the fragment
        body += ["        " + loops[0], "            " + loops[1],
                 "                for kk in seq(0, 16):",
                 f"                    acc[t, mi, i] += f32(a_s[kk // 8, 64 * mi + {row}, "
                 f"kk % 8]) * f32(b_s[kk // 8, {col}, kk % 8])"]
    else:
        body += ["        for mi in seq(0, 2):",
                 f"            wgmma(acc[t, mi, 0:{NH}], a_s[0:2, 64 * mi:64 * mi + 64, 0:8], "
                 f"b_s[0:2, 0:{N}, 0:8])"]
        pad = "        " if r.random() < 0.5 else "    "
        body += [pad + "wgmma_commit()", pad + "wgmma_wait(0)"]
    body += ["    sync()", "for t in par(0, 128) @ THREADS:", "    for mi in seq(0, 2):",
             f"        for i in seq(0, {NH}):",
             f"            y[64 * mi + {row}, {col}] {r.choice(['=', '+='])} acc[t, mi, i]"]
    body = _broken(r, body)
    lines = ["    for b in par(0, 1) @ BLOCKS:"] + ["        " + ln for ln in body]
    return Program("wgmma", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])


def wgmma_program(r: random.Random, name: str) -> Program:
    N = r.choice([8, 16])
    # two tiles per warpgroup for a sixth of the names: not a draw, so the family's seeds
    # generate the programs they generated before for the others
    if zlib.crc32(name.encode()) % 6 == 1:
        return _two_tiles(r, name, N)
    if r.random() < 0.2:
        return _ring(r, name, N)
    form = r.choice(["local", "block", "ktile", "swz32", "swz64", "mn", "mn32", "tf32"])
    if form == "mn32":
        N = 16       # whole rows of 16 halves (32 bytes)
    NH = N // 2
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
    plain = r.random() < 0.35   # the product loops make_wgmma turns into it
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
    if form.startswith("mn"):
        body = _mn_major(body, N, form == "mn32")
    if form == "tf32":
        body, head = _tf32(body, head, N)
    body = _broken(r, body)
    lines = ["    for b in par(0, 1) @ BLOCKS:"] + ["        " + ln for ln in body]
    return Program("wgmma", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])


__all__ = ["wgmma_program"]
