"""Warp specialization by a primitive: ``warp_specialize`` splits a staged loop into a
producer thread range that fills a circular buffer and a consumer thread range that
computes on it, joined by split barriers (``full`` / ``empty`` per stage), as in the
producer/consumer loops of CUTLASS's warp-specialized mainloops (docs/async_copies.md,
"Warp specialization").

The sequential meaning is kept by construction: the rewrite runs the same statement
instances in the same order (copies of step ``i``, compute of step ``i``, copies of
step ``i + 1``...), with the staged buffers given one slot per stage (``expand_dim``)
and each thread loop moved onto its thread range (the same iterations, renumbered).
What the split barriers must order in the parallel run is proved by check(): the
primitive refuses a result with a race, a barrier divergence, an out-of-bounds access
or an unknown obligation that check() did not report for the input.
"""
from __future__ import annotations

from ..ir.nodes import Alloc, Arrive, BinOp, Const, For, If, Pass, Sync, Var, Wait
from ..ir.types import BARRIER, BLOCKS, INDEX, SHARED, THREADS, bool_
from ..ir.visitor import bound_names, free_vars, substitute, walk
from .async_copy_primitives import _no_new_races, _used_after, circular_buffers
from .cursors import block_of
from .edits import Into, replace
from .fresh import proc_names
from .legality import collect
from .patterns import scope_at
from .primitive import ANY, LOOP, POSITIVE_INT, fail, primitive
from .simplify import const_value, normalize


def _range(value, what, loc):
    """``(lo, hi)`` of two integer constants, ``0 <= lo < hi``: whole warps, or the
    first thread of a warp (a producer that only issues TMA loads)."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and
            all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise fail(f"{what} must be a pair of integers (lo, hi), not {value!r}", loc)
    lo, hi = value
    if not 0 <= lo < hi or lo % 32 or (hi % 32 and hi != lo + 1):
        raise fail(f"{what}=({lo}, {hi}) must be a non-empty range of whole warps "
                   "(0 <= lo < hi, both multiples of 32) or one thread starting a warp "
                   "(lo, lo + 1)", loc)
    return lo, hi


def _thread_loop(s) -> bool:
    """A one-dimensional thread loop with constant bounds (no thread loop inside)."""
    return isinstance(s, For) and s.mapping == THREADS and \
        const_value(s.lo) is not None and const_value(s.hi) is not None and \
        not any(isinstance(n, For) and n.mapping == THREADS for n in walk(s.body))


def _block_sync(s) -> bool:
    return isinstance(s, Sync) and not s.ranged


def _parts(body):
    """``(lead, producer, consumer)`` of ``[sync()] P sync() C [sync()]`` with P and C
    runs of one-dimensional thread loops, else a reason (str)."""
    k = 0
    lead = bool(body) and _block_sync(body[0])
    k += lead
    prod = []
    while k < len(body) and _thread_loop(body[k]):
        prod.append(body[k])
        k += 1
    if not prod or k >= len(body) or not _block_sync(body[k]):
        return "the body is not `[sync()] producer-loops sync() consumer-loops [sync()]`"
    k += 1
    cons = []
    while k < len(body) and _thread_loop(body[k]):
        cons.append(body[k])
        k += 1
    if k < len(body) and _block_sync(body[k]):
        k += 1
    if not cons or k != len(body):
        return "the body is not `[sync()] producer-loops sync() consumer-loops [sync()]`"
    return lead, prod, cons


def _onto(loop: For, lo: int, hi: int, what: str):
    """``loop`` (threads ``[a, b)``) moved onto threads ``[lo, lo + b - a)``."""
    a, b = const_value(loop.lo), const_value(loop.hi)
    if b - a > hi - lo:
        raise fail(f"thread loop {loop.iter} runs {b - a} threads, more than the "
                   f"{hi - lo} {what} ({lo}, {hi})", loop.loc,
                   "divide the loop first, or give a wider range")
    if a == lo:
        return loop
    it = loop.iter
    shift = normalize(BinOp("+", Var(it), Const(a - lo), INDEX))
    body = substitute(tuple(loop.body), {it: shift})
    return loop.with_(lo=Const(lo), hi=Const(lo + b - a), body=body)


@primitive("warp_specialize", loop=LOOP, producers=ANY, consumers=ANY, stages=POSITIVE_INT)
def warp_specialize(p, loop, producers=(0, 32), consumers=(32, 64), stages: int = 2,
                    ring: bool = False, issuers=None):
    """Split a staged loop into a producer thread range that fills a ``stages``-slot
    circular buffer and a consumer thread range that computes on it, joined by split
    barriers.  The loop's body must read

        [sync()]  copies(i)  sync()  compute(i)  [sync()]

    (``copies``, ``compute``: runs of one-dimensional thread loops; the SHARED arrays
    the copies write are the *staged* buffers).  Each staged buffer gets a leading
    dimension of ``stages`` indexed by ``i % stages``, the copies move onto the
    threads ``producers = (lo, hi)`` and the compute onto ``consumers``, and each stage
    ``s`` gets two split barriers: ``full{s}`` (the producers arrive when slot ``s`` is
    filled, the consumers wait for it) and ``empty{s}`` (the consumers arrive when they
    have read it, the producers wait before refilling it; arrived once before the loop):

        arrive(empty{s}, consumers)                for each stage s
        for io in seq(0, trips // stages):         for each stage s, i = lo + stages io + s:
            wait(empty{s}, producers); copies(i); arrive(full{s}, producers)
            wait(full{s}, consumers); compute(i); arrive(empty{s}, consumers)
        the last trips % stages steps the same way, then sync()

    (``stages=1``: one pair, ``full`` and ``empty``.)  With ``issuers=(lo, hi)``, a
    range inside ``producers``, only those threads wait, copy and arrive (a TMA
    producer: one thread), and the rest of ``producers`` idles: a thread loop
    ``for idle in par(*producers) @ THREADS: pass`` before the loop keeps the whole
    range in the block (a producer *warpgroup*, whose registers ``set_registers``
    can lower).  With ``ring=True`` the barriers
    are two rings (``full: barrier[stages]``, ``empty``) and the loop is not unrolled:
    step ``i`` waits and arrives on element ``i % stages`` of each (docs/hopper.md).
    The producers run up to
    ``stages`` steps ahead of the consumers.  (Split barriers wait on a phase parity:
    with one barrier pair the producers could not fill a slot before the consumers had
    finished the previous one; one pair per stage, as CUTLASS's pipelines.)

    Legality: the loop is a ``seq`` loop directly in a ``@ BLOCKS`` loop's body; the
    ranges are disjoint whole warps (a producer range may be one thread starting a warp,
    which issues TMA loads: ``make_tma``), each thread loop fits its range; the copies write
    only SHARED arrays allocated outside the loop, read nothing the loop writes, and
    the compute writes no staged buffer; the staged buffers are not used after the
    loop.  The same statements run in the same order (the sequential meaning is kept;
    ``expand_dim`` proves the slots); the result must be proved by check(): no race,
    divergence, out-of-bounds access or unknown obligation that the input did not
    have.

    Example: ``warp_specialize(p, "i", producers=(0, 32), consumers=(32, 64), stages=2)``
    """
    c = loop
    L: For = c.node()
    k = stages
    P, C = _ranges(k, producers, consumers, L.loc)
    P, idle = _issuers(P, issuers, L.loc)
    lead, prod, cons = _staged_loop(p, c.addr, L)
    staged = _staged_buffers(p, c.addr, L, prod, cons, k)
    _fit(prod, cons, P, C)  # each thread loop fits its range

    # the circular buffer: a leading dimension of k indexed by i % k
    q = circular_buffers(p, sorted(staged), L.iter, k) if k > 1 else p
    L2: For = q.forward(c).node()
    lead2, prod_q, cons_q = _parts(L2.body)
    prod, cons = _fit(prod_q, cons_q, P, C)
    if ring:
        out, n_main = _ringed(q, L, L2, lead, prod, cons, k, P, C)
    else:
        out = _specialized(q, L, L2, lead, prod, cons, k, P, C)
        n_main = next(j for j, s in enumerate(out) if isinstance(s, For))
    if idle is not None:     # the producers' other threads, before the main loop
        out.insert(n_main, _idle_loop(q, idle, L.loc))
        n_main += 1
    a = q.forward(c).addr
    # expand_dim moves no statement: addresses of p are addresses of q; the loop and
    # all it held became the main loop
    done = replace(q.ir, a, out, keep=[Into((), a[:-1] + (a[-1] + n_main,))])
    _no_new_races(q.ir, done.ir, L.loc)
    return done


def _fit(prod, cons, P, C):
    """The copies moved onto the producer threads ``P``, the compute onto the
    consumer threads ``C``."""
    return ([_onto(s, *P, "producers") for s in prod],
            [_onto(s, *C, "consumers") for s in cons])


def _ranges(k: int, producers, consumers, loc):
    """The producer and consumer ranges, disjoint, with ``k`` at most 8."""
    if k > 8:
        raise fail(f"stages must be 1 to 8, not {k}", loc)
    plo, phi = _range(producers, "producers", loc)
    clo, chi = _range(consumers, "consumers", loc)
    if plo < chi and clo < phi:
        raise fail(f"the producer and consumer ranges ({plo}, {phi}) and ({clo}, {chi}) "
                   "overlap", loc, "one thread range fills, another computes: "
                   "pipeline_loop pipelines a loop run by all threads")
    return (plo, phi), (clo, chi)


def _issuers(P, issuers, loc):
    """``(threads that wait, copy and arrive, idle range or None)``: ``issuers`` must be
    a range inside the producers' ``P``."""
    if issuers is None or tuple(issuers) == P:
        return P, None
    ilo, ihi = _range(issuers, "issuers", loc)
    if not P[0] <= ilo < ihi <= P[1]:
        raise fail(f"issuers=({ilo}, {ihi}) must lie inside producers={P}", loc,
                   "e.g. producers=(128, 256), issuers=(128, 129): one thread of the "
                   "producer warpgroup issues the TMA loads")
    return (ilo, ihi), P


def _idle_loop(q, idle, loc) -> For:
    """``for idle in par(lo, hi) @ THREADS: pass``: threads of the block that run
    nothing here (the block size is the largest thread loop's bound)."""
    name = _fresh("idle", proc_names(q.ir))
    return For(name, Const(idle[0]), Const(idle[1]), (Pass(loc),), "par", THREADS, loc=loc)


def _staged_loop(p, addr, L: For):
    """``(lead, producer, consumer)`` of the loop ``L`` at ``addr``: a ``seq`` loop
    directly in a ``@ BLOCKS`` loop's body, allocating nothing, of the staged form."""
    if L.kind != "seq" or L.mapping is not None:
        raise fail(f"loop {L.iter} is not a seq loop", L.loc)
    owner = _owner(p.ir, addr)
    if not (isinstance(owner, For) and owner.mapping == BLOCKS):
        raise fail(f"loop {L.iter} must stand directly in a @ BLOCKS loop's body (its split "
                   "barriers are allocated at block level)", L.loc)
    inside = [s.name for s in L.body if isinstance(s, Alloc)]
    if inside:
        raise fail(f"'{inside[0]}' is allocated in the loop: lift_alloc it out first "
                   "(the staged buffers must be allocated outside the loop)", L.loc,
                   f"lift_alloc(p, \"{inside[0]}\")")
    parts = _parts(L.body)
    if isinstance(parts, str):
        raise fail(f"{parts} (loop {L.iter})", L.loc,
                   "a staged loop: copies into SHARED, a barrier, the compute on them")
    return parts


def _staged_buffers(p, addr, L: For, prod, cons, k: int) -> set:
    """The SHARED arrays the copies ``prod`` write (allocated outside the loop),
    which the copies do not read, the compute ``cons`` does not write and nothing
    after the loop uses; the copies read nothing else the loop writes."""
    env = scope_at(p.ir, addr)
    inner = bound_names(tuple(prod))
    staged = set()
    for a in collect(tuple(prod)):
        if a.writes and a.buf not in inner:
            info = env.get(a.buf)
            mem = _memory_of(p.ir, addr, a.buf)
            if info is None or mem is None or not mem.per_block:
                raise fail(f"the copies write '{a.buf}', which is not a SHARED array "
                           f"allocated outside loop {L.iter}", L.loc,
                           "lift_alloc the staging buffer out of the loop first")
            staged.add(a.buf)
    if not staged:
        raise fail("the copies write no SHARED array", L.loc)
    written = {a.buf for a in collect(tuple(L.body)) if a.writes}
    read_by_copies = {a.buf for a in collect(tuple(prod)) if not a.writes} - inner
    bad = sorted((read_by_copies & written) - staged)
    if bad or read_by_copies & staged:
        name = (bad or sorted(read_by_copies & staged))[0]
        raise fail(f"the copies read '{name}', which the loop writes: producers running "
                   f"{k} steps ahead would read it too soon", L.loc)
    for a in collect(tuple(cons)):
        if a.writes and a.buf in staged:
            raise fail(f"the compute writes the staged buffer '{a.buf}'", L.loc)
    if free_vars(L.lo) & written or free_vars(L.hi) & written:
        raise fail(f"the bounds of {L.iter} read what its body writes", L.loc)
    if _used_after(p.ir, addr, sorted(staged)):
        raise fail("a staged buffer is used after the loop", L.loc)
    return staged


def _specialized(q, L: For, L2: For, lead: bool, prod, cons, k: int, P, C) -> list:
    """The statements replacing the loop (``L2``, its slots expanded in ``q``):
    the split barriers (allocated, ``empty`` arrived once), the loop running each
    step between them (unrolled by ``k`` when ``k > 1``), a closing ``sync()``."""
    taken = proc_names(q.ir)
    full, empty = [], []
    for s in range(k):
        for lst, base in ((full, "full"), (empty, "empty")):
            name = _fresh(f"{base}{s if k > 1 else ''}", taken)
            lst.append(name)
    loc = L.loc
    P = tuple(Const(x) for x in P)
    C = tuple(Const(x) for x in C)

    lo_c = const_value(L2.lo)
    slot = normalize(BinOp("%", Var(L.iter), Const(k), INDEX))
    prod, cons = (_mark_slot(x, slot) for x in (prod, cons))

    def step(i_expr, s):
        # the slot of step i = lo + k io + s is (lo + s) % k
        sub = {L.iter: i_expr, _SLOT: Const((lo_c + s) % k) if lo_c is not None
               else normalize(BinOp("%", i_expr, Const(k), INDEX))}
        return (Wait(empty[s], *P, loc),
                *substitute(tuple(prod), sub),
                Arrive(full[s], *P, loc), Wait(full[s], *C, loc),
                *substitute(tuple(cons), sub),
                Arrive(empty[s], *C, loc))

    out = [Sync(loc)] if lead else []
    out += [Alloc(n, BARRIER, (), SHARED, loc) for n in full + empty]
    out += [Arrive(e, *C, loc) for e in empty]
    if k == 1:
        out.append(L2.with_(body=step(Var(L.iter), 0)))
    else:
        out += _unrolled(L2, k, step, taken, loc)
    out.append(Sync(loc))
    return out


_SLOT = "__slot"


def _ringed(q, L: For, L2: For, lead: bool, prod, cons, k: int, P, C):
    """The statements replacing the loop with barrier rings, and the index of the
    loop among them: two rings of ``k`` (``empty`` arrived once per element before the
    loop), the loop's step ``i`` on element ``i % k`` (the slot ``expand_dim`` chose)."""
    taken = proc_names(q.ir)
    full, empty = _fresh("full", taken), _fresh("empty", taken)
    taken |= {full, empty}
    j = _fresh("j", taken)
    loc = L.loc
    P = tuple(Const(x) for x in P)
    C = tuple(Const(x) for x in C)
    slot = normalize(BinOp("%", Var(L.iter), Const(k), INDEX))
    e = slot if k > 1 else Const(0)
    body = (Wait(empty, *P, loc, e), *prod, Arrive(full, *P, loc, e),
            Wait(full, *C, loc, e), *cons, Arrive(empty, *C, loc, e))
    out = [Sync(loc)] if lead else []
    out += [Alloc(n, BARRIER, (Const(k),), SHARED, loc) for n in (full, empty)]
    out.append(For(j, Const(0), Const(k), (Arrive(empty, *C, loc, Var(j)),), loc=loc))
    out.append(L2.with_(body=body))
    out.append(Sync(loc))
    return out, len(out) - 2


def _mark_slot(stmts, slot):
    """``stmts`` with the slot index ``i % k`` (as expand_dim wrote it) replaced by
    the variable :data:`_SLOT`."""
    from ..ir.visitor import ExprMap

    def fn(e):
        return Var(_SLOT) if e == slot else e

    return list(ExprMap(fn).visit_block(tuple(stmts)))


def _unrolled(L: For, k: int, step, taken: set, loc) -> list:
    """``for io in seq(0, trips // k)`` running ``k`` steps an iteration (stage ``s``:
    ``i = lo + k io + s``), then the last ``trips % k`` steps under ``if``s on the trip
    count (the same for every thread: the barrier counts stay exact)."""
    lo, hi = L.lo, L.hi
    trips = normalize(BinOp("-", hi, lo, INDEX))
    io = _fresh(f"{L.iter}o", taken)
    n_full = normalize(BinOp("//", trips, Const(k), INDEX))
    body = []
    for s in range(k):
        i_expr = normalize(BinOp("+", lo, BinOp("+", BinOp("*", Const(k), Var(io), INDEX),
                                                Const(s), INDEX), INDEX))
        body += step(i_expr, s)
    out = [L.with_(iter=io, lo=Const(0), hi=n_full, body=tuple(body))]
    rest = normalize(BinOp("%", trips, Const(k), INDEX))
    base = normalize(BinOp("+", lo, BinOp("*", Const(k), n_full, INDEX), INDEX))
    for s in range(k - 1):
        i_expr = normalize(BinOp("+", base, Const(s), INDEX))
        r = const_value(rest)
        if r is not None:
            if r > s:
                out += step(i_expr, s)
            continue
        out.append(If(BinOp(">", rest, Const(s), bool_), step(i_expr, s), (), loc))
    return out


def _fresh(base: str, taken: set) -> str:
    from ..ir.visitor import fresh_name

    n = fresh_name(base, taken)
    taken.add(n)
    return n


def _owner(pdef, addr):
    """The statement whose body holds the statement at ``addr`` (None at the top)."""
    if len(addr) < 3:
        return None
    blk = block_of(pdef, addr[:-3])
    return blk[addr[-3]]


def _memory_of(pdef, addr, name):
    from .patterns import string_scope

    for f in string_scope(pdef, addr).frames:
        sym = f.get(name)
        if sym is not None:
            return sym.mem
    return None


__all__ = ["warp_specialize"]
