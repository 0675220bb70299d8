"""Barrier intervals (phases) that follow control flow.

Block-level control flow is uniform (every thread of a block runs the same block-level
loops and ifs; :mod:`gpudsl.analysis.mapping` proves it), so all threads of a block
pass the same sequence of barriers.  Each access therefore has a *barrier count*: the
number of ``sync()`` the block has executed before the access runs.  Two accesses by
different threads of one block can run concurrently exactly when their barrier counts
are equal.  The count is an IR integer expression over the enclosing block-level loop
variables and sizes, e.g. for::

    for k in seq(0, K):          # body has 2 syncs per iteration
        A                        # count = 2*k
        sync()
        B                        # count = 2*k + 1
        sync()
    C                            # count = 2*max(0, K)

Each of the two symbolic threads gets its own copy of ``k``, so a phase that starts in
iteration ``k`` and ends in iteration ``k+1`` (across the back edge: ``B`` at ``k`` and
``A`` at ``k+1`` have counts ``2k+1`` and ``2k+2``: different, ordered) and code before
and after the loop are handled by one equation, quantified over the iterations (this
is Faial's loop alignment, done by arithmetic).  Syncs under a uniform ``if`` count as
``select(cond, n_then, n_else)``.  When a loop body's count depends on the loop
variable, the count is replaced by a fresh unknown (``__bc_*``), which the encoder
leaves unconstrained and different for each thread: sound, possibly imprecise.
"""
from __future__ import annotations

import itertools

from ..ir.nodes import Builtin, BinOp, Const, Expr, For, If, Stmt, Sync, Var
from ..ir.types import BLOCKS, INDEX, THREADS
from ..ir.visitor import walk

_fresh = itertools.count()


def _block_sync(s) -> bool:
    """A barrier of the whole block: ``sync()``.  Ranged and split barriers
    (docs/language.md (synchronization)) order only some threads: :mod:`.sync_counts` handles them."""
    return isinstance(s, Sync) and not s.ranged


def fresh_unknown() -> Var:
    return Var(f"__bc_{next(_fresh)}")


def is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.val == 0


def add(a: Expr, b: Expr) -> Expr:
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.val + b.val)
    return BinOp("+", a, b, INDEX)


def sub(a: Expr, b: Expr) -> Expr:
    if is_zero(b):
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.val - b.val)
    return BinOp("-", a, b, INDEX)


def mul(a: Expr, b: Expr) -> Expr:
    if is_zero(a) or is_zero(b):
        return Const(0)
    if isinstance(a, Const) and a.val == 1:
        return b
    if isinstance(b, Const) and b.val == 1:
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.val * b.val)
    return BinOp("*", a, b, INDEX)


def _mentions(e: Expr, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk(e))


def _has_unknown(e: Expr) -> bool:
    return any(isinstance(n, Var) and n.name.startswith("__bc_") for n in walk(e))


class PhaseCounter:
    """Computes barrier counts of block-level statement positions (memoised).
    ``leaf`` says which statements it counts (default: ``sync()``)."""

    def __init__(self, leaf=None):
        self.leaf = leaf or _block_sync
        # id(s) -> (s, count): the statement kept alive beside its count, so that an id
        # reused by a later statement (one built during the analysis and dropped) never
        # returns another statement's count
        self.memo: dict[int, tuple] = {}
        self.prefix: dict = {}

    def count(self, s: Stmt) -> Expr:
        """Number of block-level barriers executed by running ``s`` once."""
        hit = self.memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        r = self._count(s)
        self.memo[id(s)] = (s, r)
        return r

    def count_block(self, stmts) -> Expr:
        tot: Expr = Const(0)
        for s in stmts:
            tot = add(tot, self.count(s))
        return tot

    def _count(self, s: Stmt) -> Expr:
        if self.leaf(s):
            return Const(1)
        if isinstance(s, If):
            a, b = self.count_block(s.body), self.count_block(s.orelse)
            if is_zero(a) and is_zero(b):
                return Const(0)
            if a == b:
                return a
            return Builtin("select", (s.cond, a, b), INDEX)
        if isinstance(s, For):
            if s.mapping == THREADS or (s.kind == "par"):
                return Const(0)  # no barrier may stand there (a mapping error)
            c = self.count_block(s.body)
            if is_zero(c):
                return Const(0)
            if _has_unknown(c):
                return fresh_unknown()
            if _mentions(c, s.iter):  # a ring element's count (:mod:`.ring_counts`)
                from .ring_counts import sum_over
                return sum_over(c, s.iter, s.lo, s.hi) or fresh_unknown()
            trips = Builtin("max", (Const(0), sub(s.hi, s.lo)), INDEX)
            if isinstance(s.hi, Const) and isinstance(s.lo, Const):
                trips = Const(max(0, s.hi.val - s.lo.val))
            return mul(trips, c)
        return Const(0)

    def position(self, start: Expr, stmts, i: int) -> Expr:
        """Count at the start of ``stmts[i]`` when ``stmts`` starts at ``start``."""
        pre = self.prefix.get(id(stmts))
        if pre is None or pre[0] is not stmts:
            sums, tot = [], Const(0)
            for s in stmts:
                sums.append(tot)
                tot = add(tot, self.count(s))
            pre = self.prefix[id(stmts)] = (stmts, sums)
        return add(start, pre[1][i])

    def loop_body_start(self, start: Expr, s: For) -> Expr:
        """Count at the start of the body of ``s`` in iteration ``s.iter``, when the
        loop starts at count ``start``."""
        c = self.count_block(s.body)
        if is_zero(c):
            return start
        if _has_unknown(c):
            return fresh_unknown()
        if _mentions(c, s.iter):  # a ring element's count (:mod:`.ring_counts`)
            from .ring_counts import sum_over
            done = sum_over(c, s.iter, s.lo, Var(s.iter))
            return fresh_unknown() if done is None else add(start, done)
        return add(start, mul(sub(Var(s.iter), s.lo), c))


# ---------------------------------------------------------------- phase relation
#
# Barrier counts are exact only when a loop body's count does not depend on its
# variable.  The race obligation therefore asks a finer question, on the *paths*
# of the two accesses (``KernelAccess.path``: the (statement list, index) steps from the
# kernel's block-level body down to the statement that holds the access): since
# block-level control flow is uniform, both threads run the same sequence of
# block-level statements, and two instances are between the same two barriers
# exactly when no ``sync()`` runs between them in that sequence.  Where the paths
# part, the earlier instance is known (statement order, or loop iterations), and
# "no sync between" is a conjunction of "this code runs no sync" conditions.  Such
# a condition over a loop ("every iteration runs no sync") is instantiated at the
# first and the last iteration: a necessary condition, so the constraint
# over-approximates the pairs that may meet (sound) and is exact for the forms
# real kernels use (trip counts from outer loop variables, uniform ifs on loop
# variables, loops that run zero times).


def has_sync(s) -> bool:
    """Does statement (or list) ``s`` hold a block-level ``sync()`` (memoised)?"""
    if isinstance(s, tuple):
        return any(has_sync(x) for x in s)
    k = id(s)
    r = _has_sync_memo.get(k)
    if r is None or r[0] is not s:
        if _block_sync(s):
            v = True
        elif isinstance(s, If):
            v = has_sync(s.body) or has_sync(s.orelse)
        elif isinstance(s, For):
            v = s.mapping != THREADS and has_sync(s.body)
        else:
            v = False
        if len(_has_sync_memo) > 200000:
            _has_sync_memo.clear()
        r = _has_sync_memo[k] = (s, v)
    return r[1]


_has_sync_memo: dict = {}


def has_leaf(s, leaf, memo: dict) -> bool:
    """Does statement (or list) ``s`` hold a block-level statement ``leaf`` accepts (memoised
    in ``memo``)?  :func:`has_sync` for another kind of barrier (``sync_cluster()``)."""
    if isinstance(s, tuple):
        return any(has_leaf(x, leaf, memo) for x in s)
    r = memo.get(id(s))
    if r is None or r[0] is not s:
        if leaf(s):
            v = True
        elif isinstance(s, If):
            v = has_leaf(s.body, leaf, memo) or has_leaf(s.orelse, leaf, memo)
        elif isinstance(s, For):
            v = s.mapping != THREADS and has_leaf(s.body, leaf, memo)
        else:
            v = False
        if len(memo) > 200000:
            memo.clear()
        r = memo[id(s)] = (s, v)
    return r[1]


def _fold(xs, unit: bool, make):
    """``make(*xs)`` with Python booleans folded: ``unit`` (True for And, False for
    Or) drops out, its negation decides the whole."""
    out = []
    for x in xs:
        if x is unit:
            continue
        if x is (not unit):
            return not unit
        out.append(x)
    if not out:
        return unit
    return out[0] if len(out) == 1 else make(*out)


def _and(*xs):
    import z3
    return _fold(xs, True, z3.And)


def _or(*xs):
    import z3
    return _fold(xs, False, z3.Or)


class PhaseRelation:
    """Builds, for two accesses placed in two symbolic threads, a necessary
    condition for "no barrier between them" (see above).  Results are z3 booleans
    or Python ``True``/``False`` (decided without the solver)."""

    def __init__(self, leaf=None):
        """``leaf``: the barriers that end a phase (default: ``sync()``; the cluster's
        phases are between ``sync_cluster()``, :mod:`.obligations.cluster_obligations`)."""
        from ..ir.smt import Unsupported
        self.Unsupported = Unsupported
        self.leaf = leaf or _block_sync
        if leaf is None:
            self.has = has_sync
        else:
            memo: dict = {}
            self.has = lambda s: has_leaf(s, leaf, memo)

    # -- expressions under a thread, some variables overridden
    def _env(self, t, over):
        if not over:
            return t
        from ..ir.smt import ThreadEnv
        e = ThreadEnv(t.enc, t.tag)
        e.vars = dict(t.vars)
        e.vars.update(over)
        # a counter replaced by another value keeps no range of its own
        e.ranges = {k: v for k, v in t.ranges.items() if k not in over}
        return e

    def zero(self, stmts, t, depth=0):
        """Necessary condition that running ``stmts`` (in thread env ``t``) executes
        no barrier."""
        parts = []
        for s in stmts:
            if not self.has(s):
                continue
            if self.leaf(s):
                return False
            parts.append(self._zero_stmt(s, t, depth))
            if parts[-1] is False:
                return False
        return _and(*parts)

    def _zero_stmt(self, s, t, depth):
        import z3
        if isinstance(s, If):
            zb, ze = self.zero(s.body, t, depth), self.zero(s.orelse, t, depth)
            if zb is ze and isinstance(zb, bool):
                return zb
            try:
                c = t.cond(s.cond)
            except self.Unsupported:
                return _or(zb, ze)
            return _or(_and(c, zb), _and(z3.Not(c), ze))
        if isinstance(s, For):
            if s.mapping == BLOCKS:
                return self.zero(s.body, t, depth)
            try:
                lo, hi = t.expr(s.lo), t.expr(s.hi)
            except self.Unsupported:
                return True
            empty = hi <= lo
            if depth > 6:
                return _or(empty, True)
            z_first = self.zero(s.body, self._env(t, {s.iter: lo}), depth + 1)
            if not _mentions_any(s.body, s.iter):
                return _or(empty, z_first)  # the same in every iteration
            z_last = self.zero(s.body, self._env(t, {s.iter: hi - 1}), depth + 1)
            return _or(empty, _and(z_first, z_last))
        return True

    # -- the rest of an iteration after / before an access
    def after(self, path, d, t):
        """No barrier from the access (path) to the end of the list at depth ``d``."""
        return self._rest(path, d, t, after=True)

    def before(self, path, d, t):
        """No barrier from the start of the list at depth ``d`` to the access (path)."""
        return self._rest(path, d, t, after=False)

    def _rest(self, path, d, t, after):
        parts = []
        for j in range(d, len(path)):
            L, i = path[j]
            parts.append(self.zero(L[i + 1:] if after else L[:i], t))
            s = L[i]
            if j + 1 < len(path) and isinstance(s, For) and s.mapping != BLOCKS \
                    and self.has(s.body):
                parts.append(self._rest_iters(s, t, after=after))
            if parts[-1] is False:
                return False
        return _and(*parts)

    def _rest_iters(self, s, t, after):
        """No barrier in the iterations of loop ``s`` after (before) the thread's."""
        try:
            v = t.var(s.iter)
            lo, hi = t.expr(s.lo), t.expr(s.hi)
        except self.Unsupported:
            return True
        if after:
            none = v + 1 >= hi
            a, b = v + 1, hi - 1
        else:
            none = v <= lo
            a, b = lo, v - 1
        za = self.zero(s.body, self._env(t, {s.iter: a}))
        zb = self.zero(s.body, self._env(t, {s.iter: b}))
        return _or(none, _and(za, zb))

    def same_phase(self, p1, p2, t1, t2):
        """Necessary condition that the two accesses' instances run between the same
        two barriers (the enclosing common loops placed by the caller)."""
        if p1 is None or p2 is None:
            return True
        try:
            return self._same(p1, p2, 0, t1, t2)
        except self.Unsupported:
            return True

    def _same(self, p1, p2, d, t1, t2):
        import z3
        if d >= len(p1) or d >= len(p2):
            return True
        (L1, i1), (L2, i2) = p1[d], p2[d]
        if L1 is not L2:
            return True  # different branches of one if: the guards decide
        if i1 != i2:
            if i1 < i2:
                return _and(self.after(p1, d + 1, t1), self._own_iters(p1, d, t1, True),
                            self.zero(L1[i1 + 1:i2], t1), self._own_iters(p2, d, t2, False),
                            self.before(p2, d + 1, t2))
            return _and(self.after(p2, d + 1, t2), self._own_iters(p2, d, t2, True),
                        self.zero(L1[i2 + 1:i1], t2), self._own_iters(p1, d, t1, False),
                        self.before(p1, d + 1, t1))
        s = L1[i1]
        if isinstance(s, If):
            # an access in the condition runs before either branch
            if d + 1 == len(p1) and d + 1 < len(p2):
                return self.before(p2, d + 1, t2)
            if d + 1 == len(p2) and d + 1 < len(p1):
                return self.before(p1, d + 1, t1)
            return self._same(p1, p2, d + 1, t1, t2)
        if not isinstance(s, For):
            return True
        if s.mapping == BLOCKS:
            return self._same(p1, p2, d + 1, t1, t2)
        if s.mapping == THREADS or s.kind == "par" or not self.has(s.body):
            return True
        if d + 1 >= len(p1) or d + 1 >= len(p2):
            return True  # an access in the loop's bounds
        v1, v2 = t1.var(s.iter), t2.var(s.iter)
        eq = _and(v1 == v2, self._same(p1, p2, d + 1, t1, t2))
        lt = self._across(s, p1, p2, d + 1, t1, t2, v1, v2)
        gt = self._across(s, p2, p1, d + 1, t2, t1, v2, v1)
        return _or(eq, lt, gt)

    def _own_iters(self, path, d, t, after):
        """Where the paths part at depth ``d`` and the access lies in a loop there
        (``path[d]`` names it), no barrier in that loop's iterations after (before)
        the thread's: the loop's other iterations run between the two accesses too."""
        L, i = path[d]
        s = L[i]
        if d + 1 < len(path) and isinstance(s, For) and s.mapping != BLOCKS \
                and self.has(s.body):
            return self._rest_iters(s, t, after=after)
        return True

    def _across(self, s, pa, pb, d, ta, tb, va, vb):
        """``pa`` in an earlier iteration ``va`` of loop ``s`` than ``pb`` (``vb``)."""
        aft = self.after(pa, d, ta)
        if aft is False:
            return False
        bef = self.before(pb, d, tb)
        if bef is False:
            return False
        zm1 = self.zero(s.body, self._env(ta, {s.iter: va + 1}))
        zm2 = self.zero(s.body, self._env(ta, {s.iter: vb - 1}))
        mid = _or(vb <= va + 1, _and(zm1, zm2))
        return _and(va < vb, aft, bef, mid)


_mention_memo: dict = {}


def _mentions_any(stmts, name) -> bool:
    k = (id(stmts), name)
    r = _mention_memo.get(k)
    if r is None or r[0] is not stmts:
        if len(_mention_memo) > 200000:
            _mention_memo.clear()
        v = any(isinstance(n, Var) and n.name == name for n in walk(tuple(stmts)))
        r = _mention_memo[k] = (stmts, v)
    return r[1]
