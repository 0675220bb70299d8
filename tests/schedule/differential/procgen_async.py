"""Random kernels with the asynchronous copies (docs/async_copies.md) for the differential test of
the primitives: a block of 64 threads staging rows of ``x`` into SHARED memory with
``async_copy`` (1 or 4 elements a copy), one stage per iteration (copy, commit,
wait, barrier, use) or double-buffered (a prologue copy, then each iteration issues
the next row's copy into ``buf[(i + 1) % 2]`` before waiting for its own with
``async_wait(1)``), or completing on a barrier ring (``async_copy(..., bar=full[i % 2])``,
the copying threads' arrive, sometimes one counting for several: ``count=``).  Some are broken on purpose (no wait, the wrong depth, no barrier
after the wait, one buffer instead of two): the primitives must not turn a proved
kernel into one with an access in flight, and must keep every meaning, faults
included."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes

HEAD = "def {name}(n: size, a: f32, x: f32[n, 64], y: f32[n, 64]):\n    assert n >= 1\n"


def _copy(r, buf, row, tv, bar=""):
    """A thread loop of copies of row ``row`` of x into ``buf`` (``bar``: ``, bar=...``)."""
    if r.random() < 0.5:
        return [f"for {tv} in par(0, 16) @ THREADS:",
                f"    async_copy({buf}4 * {tv}:4 * {tv} + 4], x[{row}, 4 * {tv}:4 * {tv} + 4]"
                f"{bar})"]
    return [f"for {tv} in par(0, 64) @ THREADS:",
            f"    async_copy({buf}{tv}], x[{row}, {tv}]{bar})"]


def _use(r, buf, row, tv):
    body = r.choice([f"y[{row}, {tv}] += {buf}63 - {tv}] * 2.0",
                     f"y[{row}, {tv}] = {buf}{tv}] + a",
                     f"y[{row}, {tv}] += {buf}({tv} + 1) % 64]"])
    return [f"for {tv} in par(0, 64) @ THREADS:", f"    {body}"]


def _broken(r, lines, p=0.12):
    """Drop or change one synchronizing line now and then."""
    if r.random() >= p:
        return lines
    idx = [k for k, ln in enumerate(lines) if ln.strip().startswith(("async_wait", "sync()",
                                                                      "async_commit"))]
    if not idx:
        return lines
    k = r.choice(idx)
    if lines[k].strip().startswith("async_wait") and r.random() < 0.5:
        return lines[:k] + [lines[k].replace("(0)", "(1)").replace("(1)", "(2)")] + lines[k + 1:]
    return lines[:k] + lines[k + 1:]


def _single(r):
    body = _copy(r, "s[0, ", "i", "t") + ["async_commit()", "async_wait(0)", "sync()"] + \
        _use(r, "s[0, ", "i", "u") + ["sync()"]
    return [], body


def _double(r):
    k = "(i + 1) % 2" if r.random() < 0.85 else "i % 2"
    pre = _copy(r, "s[0, ", "0", "t") + ["async_commit()"]
    nxt = _copy(r, f"s[{k}, ", "i + 1", "t")
    body = ["if i + 1 < n:"] + ["    " + ln for ln in nxt] + \
        ["async_commit()", "async_wait(1)", "sync()"] + _use(r, "s[i % 2, ", "i", "u") + \
        ["sync()"]
    return pre, body


def _plain(r):
    """A staged loop with plain copies, for make_async and pipeline_loop."""
    if r.random() < 0.5:
        cp = ["for t in par(0, 64) @ THREADS:", "    s[0, t] = x[i, t]"]
    else:
        cp = ["for t in par(0, 16) @ THREADS:", "    for v in seq(0, 4):",
              "        s[0, 4 * t + v] = x[i, 4 * t + v]"]
    if r.random() < 0.3:  # already async
        cp = _copy(r, "s[0, ", "i", "t") + ["async_commit()", "async_wait(0)"]
    body = ["sync()"] + cp + ["sync()"] + _use(r, "s[0, ", "i", "u")
    return [], body


def _local(r):
    """Copies committed and waited for in their own thread loop."""
    col = r.choice(["t", "63 - t"])
    use = r.choice([f"y[i, t] += s[0, {col}] * 2.0", f"y[i, t] = s[0, {col}] + a"])
    body = ["for t in par(0, 64) @ THREADS:", f"    async_copy(s[0, {col}], x[i, t])",
            "    async_commit()", "    async_wait(0)", f"    {use}"]
    if r.random() < 0.12:
        body.pop(r.choice([2, 3]))
    return [], body + ["sync()"]


def _on_barrier(r):
    """Copies completing on a ring element (issue 35): the copying threads arrive (one
    thread for all 64 with count=, after a barrier, now and then), everybody waits, then
    uses the slot; sometimes the wait, the barrier or the copiers' arrive is missing."""
    cp = _copy(r, "s[i % 2, ", "i", "t", ", bar=full[i % 2]")
    width = int(cp[0].split("par(0, ")[1].split(")")[0])
    arrive = r.choice([f"arrive(full[i % 2], 0, {width})", f"arrive(full[i % 2], 0, {width})",
                       f"arrive(full[i % 2], 0, {width}, count=2)",
                       f"arrive(full[i % 2], 0, {width // 2})"])
    wait = "wait(full[i % 2], 0, 64)" if r.random() < 0.9 else "pass"
    tail = ["sync()"] if r.random() < 0.9 else []
    body = cp + [arrive, wait] + _use(r, "s[i % 2, ", "i", "u") + tail
    return ["full: barrier[2] @ SHARED"], body


def async_program(r: random.Random, name: str) -> Program:
    pre, body = r.choice([_single, _double, _plain, _plain, _plain, _local, _on_barrier,
                          _on_barrier])(r)
    pre, body = _broken(r, pre), _broken(r, body)
    lines = ["    for b in par(0, 1) @ BLOCKS:", "        s: f32[2, 64] @ SHARED"]
    lines += ["        " + ln for ln in pre]
    lines += ["        for i in seq(0, n):"] + ["            " + ln for ln in body]
    src = HEAD.format(name=name) + "\n".join(lines) + "\n"
    return Program("async", name, src, pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])


__all__ = ["async_program"]
