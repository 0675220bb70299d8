"""The obligations of ``setmaxnreg(n, lo, hi)`` (docs/hopper.md, SPEC 2.9).

``setmaxnreg`` lowers to ``setmaxnreg.inc/dec.sync.aligned.u32 n``, run by every warp of
the warpgroups of ``[lo, hi)``.  A kernel that uses it starts each thread with the
registers its launch bounds give (``Target.launch_registers``: 168 for 384 threads), and
the block's registers form one pool: ``.dec`` gives registers back, ``.inc`` waits until
the pool has enough.  What check() proves, per kernel:

- ``n`` is one the instruction takes: 24 to 256, a multiple of 8 (``"resource"``);
- the block is whole warpgroups (a multiple of 128 threads, ``"resource"``) and each range
  is whole warpgroups of it: ``lo`` and ``hi`` multiples of 128, ``hi`` at most the block
  (``"divergence"``: a warp of a warpgroup that does not run it is undefined behaviour);
- the registers fit: the warpgroups' counts (``n`` where set, the launch's count
  elsewhere) sum to at most the block's pool, the launch's count times the warpgroups
  (``"resource"``, the sums as witness): otherwise an ``.inc`` waits forever;
- no ``.inc`` can wait on a ``.dec`` behind a barrier: in the block's statement order no
  barrier (``sync``, ``wait``, a split barrier's initialisation) stands between a
  setmaxnreg that raises the count and one that lowers it (``"divergence"``: the raising
  warpgroup would wait at its ``.inc`` while the lowering one waits for it at the
  barrier).

What the proof covers, and refuses otherwise (``"unknown"``): setmaxnreg statements stand
at the top level of the block's code (not inside a ``seq`` loop or an ``if``), the block
size is a constant, and each warpgroup is named by at most one setmaxnreg.
"""
from __future__ import annotations

from ...ir.nests import direct_nest
from ...ir.nodes import Alloc, Const, For, SetMaxNReg, Sync, Wait
from ...ir.types import BARRIER
from ...ir.visitor import walk
from ..check_report import Diagnostic

WARPGROUP = 128
MIN_REGS, MAX_REGS, STEP = 24, 256, 8


def _text(s) -> str:
    from ...ir.printer import print_stmt
    return print_stmt(s)[0].strip()


def _diag(ctx, kind, msg, locs, hint, witness=None):
    ctx.diagnostics.append(Diagnostic(kind, msg, [l for l in locs if l is not None],
                                      witness or {}, hint))


def check_setmaxnreg(ctx) -> None:
    kernels: dict = {}
    for si in ctx.eff.setmaxnregs:
        if si.kernel is not None and si.level == "block":   # else a mapping error
            kernels.setdefault(si.kernel, []).append(si)
    for k, sites in kernels.items():
        ki = ctx.eff.kernels[k]
        ok = _counts(ctx, sites)
        bs = _block_size(ki)
        if bs is None:
            ctx.unknown("that the setmaxnreg ranges are whole warpgroups", [si.loc for si in sites],
                        "the block size is not a constant")
            continue
        ok = _ranges(ctx, sites, bs, ki) and ok
        if not _placed(ctx, sites) or not ok:
            continue
        body = direct_nest(ki.loop)[-1].body
        regs0 = ctx.target.launch_registers(bs, ki.loop.blocks_per_sm or 1)
        _fits(ctx, sites, bs, regs0, ki)
        _no_wait_on_dec(ctx, body, regs0)


def _counts(ctx, sites) -> bool:
    ok = True
    for si in sites:
        n = si.stmt.regs
        if not (MIN_REGS <= n <= MAX_REGS and n % STEP == 0):
            ok = False
            _diag(ctx, "resource", f"`{_text(si.stmt)}` asks for {n} registers per thread; "
                  f"setmaxnreg takes {MIN_REGS} to {MAX_REGS}, a multiple of {STEP}",
                  [si.loc], f"use {max(MIN_REGS, min(MAX_REGS, n // STEP * STEP))}",
                  {"registers": n})
    return ok


def _block_size(ki):
    n = 1
    for d in range(3):
        his = ki.thread_extents.get(d, [])
        if not his:
            continue
        if not all(isinstance(h, Const) for h in his):
            return None
        n *= max(h.val for h in his)
    return n


def _ranges(ctx, sites, bs, ki) -> bool:
    ok = True
    if bs % WARPGROUP:
        ok = False
        _diag(ctx, "resource", f"setmaxnreg sets the registers of warpgroups of {WARPGROUP} "
              f"threads; this block has {bs} threads, not a whole number of warpgroups",
              [ki.loc] + [si.loc for si in sites][:1],
              f"make the block a multiple of {WARPGROUP} threads", {"block_size": bs})
    for si in sites:
        lo, hi = si.stmt.lo.val, si.stmt.hi.val
        if lo % WARPGROUP or hi % WARPGROUP or hi > bs:
            ok = False
            why = f"past the block of {bs} threads" if hi > bs else \
                f"not whole warpgroups ({WARPGROUP} threads starting at a multiple of {WARPGROUP})"
            _diag(ctx, "divergence", f"`{_text(si.stmt)}` names threads [{lo}, {hi}), {why}: "
                  "every warp of a warpgroup runs the same setmaxnreg, or the hardware's "
                  "behaviour is undefined", [si.loc],
                  f"use a range of multiples of {WARPGROUP} inside the block",
                  {"range": (lo, hi), "block_size": bs})
    return ok


def _placed(ctx, sites) -> bool:
    ok = True
    for si in sites:
        if any(not (isinstance(s, For) and s.mapping is not None and s.mapping.name == "BLOCKS")
               for s in si.inside):
            ok = False
            ctx.unknown(f"the registers of `{_text(si.stmt)}`", [si.loc],
                        "check() proves setmaxnreg at the top level of the block's code only "
                        "(not inside a seq loop or an if)")
    seen: dict = {}
    for si in sites:
        for wg in range(si.stmt.lo.val // WARPGROUP, si.stmt.hi.val // WARPGROUP):
            if wg in seen:
                ok = False
                ctx.unknown(f"the registers of `{_text(si.stmt)}`", [seen[wg], si.loc],
                            f"warpgroup {wg} is named by two setmaxnreg statements; check() "
                            "proves one setting per warpgroup")
            seen[wg] = si.loc
    return ok


def _fits(ctx, sites, bs, regs0, ki) -> None:
    groups = bs // WARPGROUP
    per = [regs0] * groups
    for si in sites:
        for wg in range(si.stmt.lo.val // WARPGROUP, si.stmt.hi.val // WARPGROUP):
            per[wg] = si.stmt.regs
    total, pool = sum(per) * WARPGROUP, regs0 * groups * WARPGROUP
    if total > pool:
        _diag(ctx, "resource", f"the warpgroups ask for {' + '.join(map(str, per))} = "
              f"{sum(per)} registers per thread of a warpgroup, {total} in all; the block of "
              f"{bs} threads starts with {regs0} each ({ctx.target.name}'s launch bounds), "
              f"{pool} in all: a raising setmaxnreg would wait forever",
              [ki.loc] + [si.loc for si in sites],
              "lower the raised counts or lower the others further (e.g. 40 for a producer "
              "warpgroup, 232 for two consumers of a 384-thread block)",
              {"per_warpgroup": per, "registers": total, "pool": pool,
               "launch_registers": regs0})


def _blocking(s) -> bool:
    return any(isinstance(n, (Sync, Wait)) or (isinstance(n, Alloc) and n.ty == BARRIER)
               for n in walk(s))


def _no_wait_on_dec(ctx, body, regs0) -> None:
    raised = None   # the last raising setmaxnreg with no barrier after it yet
    barrier = None
    for s in body:
        if isinstance(s, SetMaxNReg):
            if s.regs > regs0:
                raised, barrier = s, None
            elif s.regs < regs0 and raised is not None and barrier is not None:
                _diag(ctx, "divergence", f"`{_text(raised)}` raises its warpgroups' registers "
                      f"and waits for `{_text(s)}` to give some back, but a barrier stands "
                      f"between them (`{_text(barrier)}`): the lowering threads wait there for "
                      "the raising ones, which wait for the registers (a deadlock)",
                      [raised.loc, barrier.loc, s.loc],
                      "lower registers before raising them, or before the barrier",
                      {"launch_registers": regs0})
                return
        elif raised is not None and barrier is None and _blocking(s):
            barrier = s


__all__ = ["check_setmaxnreg"]
