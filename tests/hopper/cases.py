"""Procs of the Hopper tests (docs/hopper.md): setmaxnreg over warpgroups, swizzled tiles."""
from __future__ import annotations

import gpudsl
from gpudsl import proc_from_source

NS = vars(gpudsl)


def roles(regs=("setmaxnreg(40, 0, 128)", "setmaxnreg(232, 128, 384)"), between=(),
          threads=384, loop=""):
    """A producer warpgroup (threads 0-127) fills a tile, the other warpgroups use it;
    ``regs`` at the top of the block's code (or inside ``loop``, a block-level header)."""
    pad = "        "
    regs_text = "".join(pad + ("    " if loop else "") + r + "\n" for r in regs)
    head = (pad + loop + "\n") if loop else ""
    src = f'''
@proc
def roles(x: f32[{threads}], y: f32[{threads}]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[{threads}] @ SHARED
{head}{regs_text}{"".join(pad + ln + chr(10) for ln in between)}        for t in par(0, 128) @ THREADS:
            for k in seq(0, {threads // 128}):
                s[t + 128 * k] = x[t + 128 * k]
        sync()
        for t in par(128, {threads}) @ THREADS:
            y[t - 128] = s[{threads - 1} - t] * 2.0
'''
    return proc_from_source(src, NS)


def tile_copy(swizzle=128, ty="f16", cols=64, rows=64):
    """Rows of x through a swizzled tile, read back transposed in 16-element runs."""
    lay = f"(swizzle={swizzle})" if swizzle else ""
    src = f'''
@proc
def tile_copy(x: {ty}[{rows}, {cols}], y: {ty}[{rows}, {cols}]):
    for b in par(0, 1) @ BLOCKS:
        s: {ty}[{rows}, {cols}] @ SHARED{lay}
        for t in par(0, {rows}) @ THREADS:
            for j in seq(0, {cols}):
                s[t, j] = x[t, j]
        sync()
        for t in par(0, {rows}) @ THREADS:
            for j in seq(0, {cols}):
                y[t, j] = s[{rows - 1} - j % {rows}, (t + j) % {cols}]
'''
    return proc_from_source(src, NS)
