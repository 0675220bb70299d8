"""One warp's memory requests, enumerated (docs/performance.md).

The first warp (threads 0..31 in x-fastest order, ``threadIdx`` from the real
x/y/z mapping of ``gpudsl.ir.nests``) of block 0 runs through one kernel's body
with every control value computed by the one evaluator (``gpudsl.ir.control``).
Each access statement executed by the warp is a *request*: the addresses of its
active lanes.  An ``@instr`` call (a float2/float4 copy) is one request per
array, each lane contributing all the elements it moves (the vector width); an
``@instr`` whose template states its loads through pointers into its windows
(``mma.sync`` fragments, ``templates``) is one request per load of the template.

``seq`` loops run their first ``SEQ_SAMPLE`` iterations (every iteration
of a loop with fewer); a request's figures are exact for the addresses of the
lanes, and an access's figures are the worst over its sampled requests.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.async_copy_meaning import elements
from ..ir.control import NotConstant
from ..ir.control import evaluate as _evaluate
from ..ir.stmt_effects import Walker, inline_call
from ..ir.nests import direct_nest, nest_dims
from ..ir.printer import print_expr, print_stmt
from ..ir.inline import written_names
from ..ir.nodes import Assign, For, Interval, Point, WindowArg
from ..ir.numeric import shift_left, shift_right
from ..ir.types import BLOCKS, THREADS
from .templates import lane_env, template_reads
from ..ir.swizzle_meaning import swizzled_element

SEQ_SAMPLE = 8
_COMPILED: dict = {}  # id(expr) -> (expr, code object or None)
_TEMPLATES: dict = {}  # (instr template, window params) -> template_reads(...)
MAX_REQUESTS = 64  # per access
SECTOR = 32  # bytes
BANKS = 32
BANK_BYTES = 4


@dataclass
class Buffer:
    name: str
    memory: object
    shape: tuple  # ints
    elem_bytes: int
    swizzle: int = 0  # a swizzled SHARED tile's width (bytes): offsets are swizzled


@dataclass
class Request:
    lanes: dict  # lane -> list of element offsets (row-major)


@dataclass
class AccessRecord:
    key: tuple
    buf: str
    memory: str
    kind: str  # "read" / "write"
    loc: object
    requests: list = field(default_factory=list)
    elem_bytes: int = 4
    statement: str = ""
    unknown: bool = False  # an index the evaluator could not compute (data-dependent)
    banked: bool = False  # counted by banks (shared memory), not by sectors
    assumes: str = ""  # the data-dependent guard(s) whose branch the figures assume taken
    layout: str = ""  # "swizzle 128": the element offsets are where the tile stores them


_PY_OPS = {"+", "-", "*", "/", "//", "%", "&", "|", "^", "==", "!=", "<", "<=", ">", ">="}
_PY_BUILTINS = {"min": min, "max": max, "abs": abs, "_int": int,
                "_select": lambda c, a, b: a if c else b,
                "_shl": shift_left, "_shr": shift_right}  # a negative amount: 0, the sign


def _py_text(e) -> str | None:
    """``e`` as Python text with ``ir.control.evaluate``'s meaning (Python's ``//``
    and ``%``), or None for what it does not cover (memory reads: the evaluator then
    answers)."""
    from ..ir.nodes import BinOp, Builtin, Const, UnOp, Var

    if isinstance(e, Const) and isinstance(e.val, (bool, int)):
        return repr(e.val)
    if isinstance(e, Var) and e.name.isidentifier():
        return e.name
    if isinstance(e, BinOp):
        a, b = _py_text(e.lhs), _py_text(e.rhs)
        if a is None or b is None:
            return None
        if e.op in ("and", "or"):
            return f"bool(({a}) {e.op} ({b}))" if e.op == "and" else f"bool(({a}) or ({b}))"
        if e.op in ("<<", ">>"):
            return f"_sh{'l' if e.op == '<<' else 'r'}({a}, {b})"
        return f"(({a}) {e.op} ({b}))" if e.op in _PY_OPS else None
    if isinstance(e, UnOp):
        a = _py_text(e.arg)
        return None if a is None else (f"(not ({a}))" if e.op == "not" else f"(-({a}))")
    if isinstance(e, Builtin):
        args = [_py_text(x) for x in e.args]
        if None in args:
            return None
        name = {"i32": "_int", "i64": "_int", "select": "_select"}.get(e.name, e.name)
        return f"{name}({', '.join(args)})" if name in _PY_BUILTINS else None
    return None


def evaluate(e, env: dict):
    """``ir.control.evaluate`` compiled once per expression (the walker evaluates the
    same index expressions for every lane and sampled iteration)."""
    hit = _COMPILED.get(id(e))
    if hit is None or hit[0] is not e:
        text = _py_text(e)
        hit = (e, compile(text, "<index>", "eval") if text is not None else None)
        if len(_COMPILED) > 200_000:
            _COMPILED.clear()
        _COMPILED[id(e)] = hit
    if hit[1] is None:
        return _evaluate(e, env)
    try:
        return eval(hit[1], {"__builtins__": _PY_BUILTINS}, env)  # noqa: S307 (IR text)
    except NameError:
        return _evaluate(e, env)  # raises NotConstant with the names


def _offset_code(idx: tuple, shape: tuple):
    """The row-major element offset of ``idx`` in ``shape`` as one compiled Python
    expression (one evaluation per lane), or None where ``_py_text`` does not cover an
    index."""
    key = (id(idx), shape)
    hit = _COMPILED.get(key)
    if hit is not None and hit[0] is idx:
        return hit[1]
    parts = [_py_text(e) for e in idx]
    code = None
    if None not in parts and len(parts) == len(shape):
        text = parts[0]
        for p, n in zip(parts[1:], shape[1:]):
            text = f"({text}) * {int(n)} + ({p})"
        code = compile(text, "<offset>", "eval")
    if len(_COMPILED) > 200_000:
        _COMPILED.clear()
    _COMPILED[key] = (idx, code)
    return code


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def elem_bytes(ty) -> int:
    return max(1, ty.bits // 8)


def linear(idx: tuple, shape: tuple) -> int:
    off = 0
    for i, n in zip(idx, shape):
        off = off * n + i
    return off


class WarpWalker(Walker):
    """Runs one warp through a kernel body (a ``@ BLOCKS`` loop nest): the one
    effect walker with a context ``(lanes, vec)``, ``lanes`` mapping each active
    lane to its environment, ``vec`` the ``@instr`` call being gathered or None."""

    def __init__(self, buffers: dict, block: tuple, env: dict):
        super().__init__()
        self.buffers = dict(buffers)
        self.block_dims = block  # (x, y, z)
        self.base = env
        self.records: dict = {}
        self.guards: list = []  # data-dependent guards around the statement walked
        self.dims: dict = {}  # id(For) -> "x"/"y"/"z"
        nthreads = block[0] * block[1] * block[2]
        self.tid = {}
        for lane in range(min(32, nthreads)):
            self.tid[lane] = {"x": lane % block[0], "y": (lane // block[0]) % block[1],
                              "z": lane // (block[0] * block[1])}

    def run(self, body):
        lanes = {lane: dict(self.base) for lane in self.tid}
        self.block_(body, lanes, None)
        return list(self.records.values())

    # ------------------------------------------------------------ statements

    def block_(self, stmts, lanes, vec):
        if lanes:
            self.block(stmts, (lanes, vec))

    def stmt(self, s, ctx):
        if ctx[0]:
            super().stmt(s, ctx)

    def branch(self, s, ctx):
        lanes, vec = ctx
        self.exprs((s.cond,), s, ctx)
        then, other, unknown = {}, {}, False
        for lane, env in lanes.items():
            try:
                (then if evaluate(s.cond, env) else other)[lane] = env
            except (NotConstant, ZeroDivisionError):
                then[lane] = env  # data-dependent: each side is walked as if the
                other[lane] = env  # lane took it (the figures say so: ``assumes``)
                unknown = True
        if not unknown:
            self.block_(s.body, then, vec)
            self.block_(s.orelse, other, vec)
            return
        cond = print_expr(s.cond)
        for body, lanes_, side in ((s.body, then, cond), (s.orelse, other, f"not ({cond})")):
            self.guards.append(side)
            try:
                self.block_(body, lanes_, vec)
            finally:
                self.guards.pop()

    def declare(self, s, ctx):
        if s.shape or s.mem.warp_access:
            env = next(iter(ctx[0].values()))
            try:
                shape = tuple(evaluate(e, env) for e in s.shape)
            except (NotConstant, ZeroDivisionError):
                return s.name
            self.buffers[s.name] = Buffer(s.name, s.mem, shape, elem_bytes(s.ty), s.swizzle)
        return s.name

    def read(self, n, s, ctx):
        self.access(n.name, n.idx, "read", s, *ctx)

    def write(self, s, ctx):
        lanes, vec = ctx
        if not isinstance(s, Assign):
            self.access(s.name, s.idx, "read", s, lanes, vec)
        self.access(s.name, s.idx, "write", s, lanes, vec)
        if isinstance(s, Assign) and not s.idx and s.rhs.ty.is_integer:
            for env in lanes.values():  # integer locals (index scalars)
                try:
                    env[s.name] = evaluate(s.rhs, env)
                except (NotConstant, ZeroDivisionError, TypeError):
                    env.pop(s.name, None)

    def call(self, s, ctx):
        lanes, vec = ctx
        if s.proc.instr is not None and vec is None and self.template_call(s, lanes):
            return
        taken = set(self.buffers) | {n for env in lanes.values() for n in env} | self.taken(ctx)
        body = inline_call(s, taken)
        if s.proc.instr is not None and vec is None:
            group: dict = {}
            self.block_(body, lanes, (s, group))
            for rec, req in group.values():
                self.add(rec, req)
        else:
            self.block_(body, lanes, vec)

    def async_copy(self, s, ctx):
        """An async copy (docs/async_copies.md): one vector request per side, as a vector copy."""
        lanes, vec = ctx
        if vec is not None:
            return super().async_copy(s, ctx)
        group: dict = {}
        for e in elements(s, self.elem_type(s.src)):
            self.assign(e, (lanes, (s, group)))
        for rec, req in group.values():
            self.add(rec, req)

    def loop(self, s: For, ctx):
        lanes, vec = ctx
        if s.mapping == THREADS:
            if id(s) not in self.dims:
                nest = direct_nest(s)
                for f, d in zip(nest[-3:], nest_dims(min(3, len(nest)))):
                    self.dims[id(f)] = d
                for f in nest[:-3]:
                    self.dims[id(f)] = "z"
            d = self.dims[id(s)]
            inner = {}
            for lane, env in lanes.items():
                v = self.tid[lane][d]
                try:
                    if evaluate(s.lo, env) <= v < evaluate(s.hi, env):
                        inner[lane] = {**env, s.iter: v}
                except (NotConstant, ZeroDivisionError):
                    pass
            self.block_(s.body, inner, vec)
            return
        bounds = {}
        for lane, env in lanes.items():
            try:
                bounds[lane] = (evaluate(s.lo, env), evaluate(s.hi, env))
            except (NotConstant, ZeroDivisionError):
                pass
        if not bounds:
            return
        lo = min(b[0] for b in bounds.values())
        hi = max(b[1] for b in bounds.values())
        if s.mapping == BLOCKS:  # block 0
            hi = min(hi, lo + 1)
        elif vec is None:
            hi = min(hi, lo + SEQ_SAMPLE)
        for v in range(lo, hi):
            inner = {lane: {**lanes[lane], s.iter: v} for lane, (a, b) in bounds.items()
                     if a <= v < b}
            self.block_(s.body, inner, vec)

    def template_call(self, s, lanes) -> bool:
        """An ``@instr`` call read by the real loads of its template's GPU code
        (``templates``): one request per load of the template; False (walk the
        body instead) where the template does not say them in the form read there,
        or the instr writes one of its SHARED/GLOBAL windows."""
        arrays = {}
        for prm, a in zip(s.proc.params, s.args):
            if prm.is_array and isinstance(a, WindowArg):
                buf = self.buffers.get(a.name)
                if buf is not None and buf.memory.warp_access:
                    arrays[prm.name] = (a, buf)
        if not arrays:
            return False
        key = (s.proc.instr, tuple(sorted(arrays)))
        if key not in _TEMPLATES:
            parsed = template_reads(s.proc.instr, set(arrays))
            if parsed is not None and written_names(s.proc.body) & set(arrays):
                parsed = None
            _TEMPLATES[key] = parsed
        parsed = _TEMPLATES[key]
        if parsed is None:
            return False
        decls, loads = parsed
        holes = {}
        for pname, (a, buf) in arrays.items():
            dims = range(len(buf.shape)) if not a.idx else \
                [k for k, ix in enumerate(a.idx) if isinstance(ix, Interval)]
            for j, k in enumerate(dims):
                holes[f"{pname}_stride_{j}"] = _prod(buf.shape[k + 1:])
        recs = {}
        for pname, (a, buf) in arrays.items():
            rec = self.record(a.name, buf, "read", s)
            if len(rec.requests) >= MAX_REQUESTS:
                continue
            bases = {}
            for lane, env in lanes.items():
                try:
                    origin = tuple(evaluate(ix.pt if isinstance(ix, Point) else ix.lo, env)
                                   for ix in a.idx) or (0,) * len(buf.shape)
                except (NotConstant, ZeroDivisionError, TypeError):
                    rec.unknown = True
                    bases = None
                    break
                bases[lane] = linear(origin, buf.shape)
            if bases is not None:
                recs[pname] = (rec, bases)
        envs = {lane: lane_env(decls, lane, holes) for lane in lanes}
        for ld in loads:
            if ld.param not in recs:
                continue
            rec, bases = recs[ld.param]
            self.add(rec, Request({lane: [bases[lane] + int(eval(ld.offset, envs[lane])) + e
                                          for e in range(ld.width)] for lane in lanes}))
        return True

    # ------------------------------------------------------------ accesses

    def record(self, name, buf, kind, stmt) -> "AccessRecord":
        key = (id(stmt), name, kind, stmt.loc)
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = AccessRecord(key, name, buf.memory.name, kind, stmt.loc,
                                                     banked=buf.memory.warp_access == "banks",
                                                     elem_bytes=buf.elem_bytes,
                                                     statement=print_stmt(stmt)[0].strip(),
                                                     assumes=" and ".join(self.guards),
                                                     layout=f"swizzle {buf.swizzle}"
                                                     if buf.swizzle else "")
        return rec

    def access(self, name, idx, kind, s, lanes, vec):
        buf = self.buffers.get(name)
        if buf is None or not buf.memory.warp_access or not idx:
            return
        rec = self.record(name, buf, kind, vec[0] if vec is not None else s)
        if len(rec.requests) >= MAX_REQUESTS:
            return  # the figures are the worst over the first MAX_REQUESTS requests
        offs = {}
        code = _offset_code(idx, buf.shape)
        for lane, env in lanes.items():
            try:
                if code is not None:
                    try:
                        offs[lane] = [eval(code, {"__builtins__": _PY_BUILTINS}, env)]  # noqa: S307
                        continue
                    except NameError:
                        pass  # the evaluator names what is missing
                offs[lane] = [linear(tuple(evaluate(e, env) for e in idx), buf.shape)]
            except (NotConstant, ZeroDivisionError, TypeError):
                rec.unknown = True
                return
        if buf.swizzle:   # where the swizzled tile stores each element (gpudsl.ir.swizzle_meaning)
            offs = {lane: [swizzled_element(o, buf.elem_bytes, buf.swizzle) for o in os_]
                    for lane, os_ in offs.items()}
        if vec is not None:
            group, key = vec[1], rec.key
            if key not in group:
                group[key] = (rec, Request({}))
            req = group[key][1]
            for lane, o in offs.items():
                req.lanes.setdefault(lane, []).extend(o)
        else:
            self.add(rec, Request(offs))

    def add(self, rec, req):
        if len(rec.requests) < MAX_REQUESTS and req.lanes:
            rec.requests.append(req)


# ---------------------------------------------------------------- figures


def sectors(req: Request, es: int) -> tuple[int, int]:
    """(sectors the warp touches, the minimum for the bytes it asks for)."""
    elems = {o for offs in req.lanes.values() for o in offs}
    touched = set()
    for o in elems:
        touched.add(o * es // SECTOR)
        touched.add((o * es + es - 1) // SECTOR)
    return len(touched), -(-len(elems) * es // SECTOR)


def bank_conflict(req: Request, es: int) -> int:
    """The worst number of distinct 4-byte words a warp-wide shared access puts in
    one bank, per phase (a lane moving 8 bytes: two half-warp phases; 16 bytes: four
    quarter-warp phases)."""
    width = max((len(v) for v in req.lanes.values()), default=1) * es
    phases = 1 if width <= 4 else (2 if width <= 8 else 4)
    lanes_per_phase = 32 // phases
    worst = 1 if req.lanes else 0
    for ph in range(phases):
        banks: dict = {}
        for lane, offs in req.lanes.items():
            if lane // lanes_per_phase != ph:
                continue
            for o in offs:
                for w in range(o * es // BANK_BYTES, (o * es + es - 1) // BANK_BYTES + 1):
                    banks.setdefault(w % BANKS, set()).add(w)
        if banks:
            worst = max(worst, max(len(ws) for ws in banks.values()))
    return worst


def vector_width(req: Request) -> int:
    return max((len(v) for v in req.lanes.values()), default=1)
