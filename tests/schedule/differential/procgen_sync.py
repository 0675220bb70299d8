"""Random kernels with the synchronization of docs/language.md (synchronization) for the differential test of
the primitives: a block of 64 threads, producers (threads 0-31) and consumers
(32-63) over a double buffer ``buf[i % 2]`` behind ranged barriers or split barriers
(``arrive``/``wait``) or barrier rings (``full[i % 2]``; the consumers hand a slot back
through one thread counting for all, ``arrive(empty, 32, 33, count=32)``, now and then),
all threads exchanging through a split barrier with work
between arrive and wait, or two halves each behind its own ranged barrier.  Some are
broken on purpose (a barrier missing, the wrong range, one buffer instead of two):
the primitives must not turn a proved kernel into a racy one either way."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes

HEAD = "def {name}(n: size, a: f32, x: f32[n, 64], y: f32[n, 64]):\n    assert n >= 1\n"


def _producer(r, tv, buf):
    src = r.choice([f"x[b, {tv}]", f"x[b, ({tv} + i) % 64] + a", f"x[b, 63 - {tv}] * 2.0"])
    return [f"for {tv} in par(0, 32) @ THREADS:", f"    buf[{buf}, {tv}] = {src}"]


def _consumer(r, tv, buf):
    body = r.choice([f"y[b, {tv}] += buf[{buf}, {tv} - 32] * 2.0",
                     f"y[b, {tv}] += buf[{buf}, 63 - {tv}] + a",
                     f"y[b, {tv} - 32] = y[b, {tv} - 32] + buf[{buf}, ({tv} + 1) % 32]"])
    if r.random() < 0.3:
        return [f"for {tv} in par(0, 64) @ THREADS:", f"    if {tv} >= 32:", f"        {body}"]
    return [f"for {tv} in par(32, 64) @ THREADS:", f"    {body}"]


def _ranged(r):
    buf = "i % 2" if r.random() < 0.85 else "0"
    rng = r.choice(["sync(0, 64)"] * 6 + ["sync(0, 32)", "sync()", None])
    body = _producer(r, "t", buf) + ([rng] if rng else []) + _consumer(r, "u", buf)
    return [], body


def _handback(r):
    """How the consumers arrive on ``empty``: ``(arrive's tail, lines before it)``; one
    elected thread for all 32 (count=) after their ranged barrier, which is sometimes
    missing (a race)."""
    if r.random() < 0.5:
        return "32, 64)", []
    return "32, 33, count=32)", (["sync(32, 64)"] if r.random() < 0.85 else [])


def _split(r):
    buf = "i % 2" if r.random() < 0.85 else "0"
    empty = r.random() < 0.85
    back, before = _handback(r)
    pre = ["full: barrier @ SHARED"] + ([f"empty: barrier @ SHARED", f"arrive(empty, {back}"]
                                        if empty else [])
    body = (["wait(empty, 0, 32)"] if empty else []) + _producer(r, "t", buf) + \
        ["arrive(full, 0, 32)", "wait(full, 32, 64)"] + _consumer(r, "u", buf) + \
        (before + [f"arrive(empty, {back}"] if empty else [])
    return pre, body


def _ring(r):
    """The producer/consumer loop over barrier rings (issue 35): ``full[i % 2]`` and
    ``empty[i % 2]``, each element its own split barrier; sometimes the wrong element."""
    buf = "i % 2" if r.random() < 0.9 else "0"
    el = "i % 2" if r.random() < 0.9 else "(i + 1) % 2"
    back, before = _handback(r)
    pre = ["full: barrier[2] @ SHARED", "empty: barrier[2] @ SHARED",
           "for j in seq(0, 2):", f"    arrive(empty[j], {back}"]
    body = ["wait(empty[i % 2], 0, 32)"] + _producer(r, "t", buf) + \
        ["arrive(full[i % 2], 0, 32)", f"wait(full[{el}], 32, 64)"] + _consumer(r, "u", buf) + \
        before + [f"arrive(empty[i % 2], {back}"]
    return pre, body


def _split_loop(r):
    k = r.choice(["i % 2", "i % 2", "0"])
    pre = ["bar: barrier @ SHARED"]
    body = ["for t in par(0, 64) @ THREADS:", f"    s[{k}, t] = x[b, (t + i) % 64]",
            "arrive(bar, 0, 64)",
            "for t in par(0, 64) @ THREADS:", "    y[b, t] += a",
            "wait(bar, 0, 64)" if r.random() < 0.9 else "pass",
            "for t in par(0, 64) @ THREADS:", f"    y[b, t] += s[{k}, 63 - t]"]
    return pre, body


def _halves(r):
    second = r.choice(["sync(32, 64)"] * 4 + ["sync(0, 32)", None])
    body = ["for t in par(0, 64) @ THREADS:", "    s[0, t] = x[b, t] + a",
            "sync(0, 32)"] + ([second] if second else []) + \
        ["for t in par(0, 64) @ THREADS:", "    if t < 32:",
         "        y[b, t] += s[0, 31 - t]", "    else:", "        y[b, t] += s[0, 95 - t]"]
    return [], body


def _staged(r):
    """A plain staged loop (block barriers only), the input of warp_specialize: one or
    two copy loops into ``buf`` (and ``s``), a barrier, the compute on them."""
    slot = "0" if r.random() < 0.8 else "i % 2"
    width = r.choice([32, 32, 64])
    prod = [f"for t in par(0, 32) @ THREADS:",
            f"    buf[{slot}, t] = " + r.choice(["x[b, (t + i) % 64]", "x[b, t] + a",
                                                  "x[b, 63 - t] * 2.0"])]
    if r.random() < 0.3:  # async copies committed and waited for in their thread loop
        src = r.choice(["x[b, (t + i) % 64]", "x[b, t]", "x[b, 63 - t]"])
        prod = [f"for t in par(0, 32) @ THREADS:", f"    async_copy(buf[{slot}, t], {src})",
                "    async_commit()"] + (["    async_wait(0)"] if r.random() < 0.9 else [])
    if r.random() < 0.3:
        prod += ["for t in par(0, 64) @ THREADS:", f"    s[{slot}, t] = x[b, t]"]
    use = r.choice([f"y[b, u] += buf[{slot}, 31 - u % 32] * 2.0",
                    f"y[b, u] = y[b, u] + buf[{slot}, u % 32] + a",
                    f"y[b, u] += buf[{slot}, (u + i) % 32]"])
    if any("s[" in ln for ln in prod) and r.random() < 0.7:
        use = use.replace(" + a", "").replace(" * 2.0", "") + f" + s[{slot}, 63 - u]"
    cons = [f"for u in par(0, {width}) @ THREADS:", f"    {use}"]
    lead = ["sync()"] if r.random() < 0.6 else []
    tail = ["sync()"] if r.random() < 0.6 else []
    mid = ["sync()"] if r.random() < 0.92 else []
    return [], lead + prod + mid + cons + tail


def sync_program(r: random.Random, name: str) -> Program:
    pre, body = r.choice([_ranged, _ranged, _split, _split, _ring, _split_loop, _halves,
                          _staged, _staged])(r)
    trips = r.choice(["3", "n", "4"])
    lines = ["    for b in par(0, n) @ BLOCKS:", "        buf: f32[2, 32] @ SHARED",
             "        s: f32[2, 64] @ SHARED"]
    lines += ["        " + ln for ln in pre]
    lines += [f"        for i in seq(0, {trips}):"] + ["            " + ln for ln in body]
    src = HEAD.format(name=name) + "\n".join(lines) + "\n"
    return Program("sync", name, src, pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])


__all__ = ["sync_program"]
