"""A decorated Python function → :class:`gpudsl.ir.ProcDef`.

Parsing checks types, shapes and scopes, so that a bad proc fails where it is
defined, with file:line:column and the source line.
"""
from __future__ import annotations

import ast

from ..errors import ProcError
from ..ir.nodes import (ATOMIC_OPS, ATOMIC_TYPES, Alloc, Assign, Atomic, Call, Const, For, If, Interval,
                        Param, Pass, Point, ProcDef, Read, Reduce, WindowArg)
from ..ir.procdef import as_procdef
from ..ir.types import (BLOCKS, DTYPES, DType, GLOBAL, INDEX, MAPPINGS, MEMORIES, param_memory, REGISTER,
                        THREADS, bool_)
from ..ir.visitor import substitute
from .exprs import TYPE_NAMES, ExprParser, coerce
from .scope import Scope, Sym, name_problem
from .source import Source
from .async_stmts import ASYNC_FUNCS, parse_async_call
from .wgmma_stmts import WGMMA_FUNCS, parse_wgmma_call
from .tma_stmts import TMA_FUNCS, parse_tma_call
from .sync_stmts import SYNC_FUNCS, check_cluster_extent, parse_barrier_alloc, parse_sync_call
from .memory_layouts import check_swizzle, parse_memory
from .setmaxnreg import SETMAXNREG_FUNCS, parse_setmaxnreg

_LOOP_FUNCS = ("seq", "range", "par")


class ProcParser:
    def __init__(self, src: Source, resolve, instr: str | None = None):
        self.src = src
        self.resolve = resolve  # name (or dotted) → Proc or None
        self.instr = instr
        self.scope = Scope()
        self.ex = ExprParser(src, self.scope, getattr(resolve, "constant", None))
        self.in_blocks = 0  # depth of enclosing BLOCKS loops

    def err(self, node, msg, hint=None):
        return ProcError(msg, self.src.loc(node), hint)

    # ------------------------------------------------------------------ proc

    def parse(self) -> ProcDef:
        fn = self.src.tree
        if name_problem(fn.name, proc=True):
            raise self.err(fn, name_problem(fn.name, proc=True), "rename the proc")
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.err(fn, "procs take plain positional parameters only",
                           "remove *args, **kwargs, defaults and keyword-only markers")
        sizes = [x.arg for x in a.args if isinstance(x.annotation, ast.Name)
                 and x.annotation.id in ("size", "index")]
        # Sizes may be used in shapes of parameters listed before them.
        for x in a.args:
            if x.arg in sizes:
                kind = x.annotation.id
                self.scope.bind(Sym(x.arg, kind, INDEX, loc=self.src.loc(x), param=True),
                                self.src.loc(x))
        params = [self.param(x) for x in a.args]
        body = list(fn.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # docstring
        preds = []
        while body and isinstance(body[0], ast.Assert):
            st = body.pop(0)
            if st.msg is not None:
                raise self.err(st, "asserts in procs take no message")
            preds.append(self._pred(st.test))
        stmts = self.block(body) if body else ()
        return ProcDef(fn.name, tuple(params), tuple(preds), stmts, self.instr,
                       self.src.loc(fn))

    def _pred(self, node):
        e = self.ex.bool_expr(node, "an assert")
        for n in ast.walk(node):
            if isinstance(n, ast.Subscript):
                raise self.err(n, "asserts state preconditions on sizes and index "
                               "parameters; they cannot read arrays")
            if isinstance(n, ast.Name):
                sym = self.scope.lookup(n.id)
                if sym is not None and sym.kind not in ("size", "index"):
                    raise self.err(n, f"asserts may use sizes and index parameters only; "
                                   f"'{n.id}' is {sym.describe()}")
        return e

    def param(self, x: ast.arg) -> Param:
        loc = self.src.loc(x)
        ann = x.annotation
        if ann is None:
            raise self.err(x, f"parameter '{x.arg}' needs a type",
                           "e.g. `n: size`, `a: f32`, `x: f32[n]`, `w: [f32][4] @ SHARED`")
        if isinstance(ann, ast.Name) and ann.id in ("size", "index"):
            return Param(x.arg, ann.id, INDEX, loc=loc)
        if isinstance(ann, ast.Name) and self.dtype(ann, quiet=True) is not None:
            ty = self.dtype(ann)
            self.scope.bind(Sym(x.arg, "scalar", ty, loc=loc, param=True), loc)
            return Param(x.arg, "scalar", ty, loc=loc)
        mem = GLOBAL
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.MatMult):
            mem = self.memory(ann.right)
            ann = ann.left
        window = False
        if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.List):
            window = True
            if len(ann.value.elts) != 1 or not isinstance(ann.value.elts[0], ast.Name):
                raise self.err(ann, "a window type is written [f32][4, 4]")
            tname = ann.value.elts[0]
        elif isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name):
            tname = ann.value
        else:
            raise self.err(ann, f"cannot understand the type of parameter '{x.arg}'",
                           "e.g. `n: size`, `a: f32`, `x: f32[n]`, `w: [f32][4] @ SHARED`")
        ty = self.dtype(tname)
        shape = self.shape(ann)
        self.scope.bind(Sym(x.arg, "array", ty, shape, mem, loc, param=True), loc)
        return Param(x.arg, "window" if window else "tensor", ty, shape, mem, loc)

    def dtype(self, tname: ast.Name, quiet: bool = False):
        """The scalar type ``tname`` names: a type's name (``f32``), or a compile-time
        constant holding one (``T`` of a proc factory, ``T = gpudsl.constexpr(f16)``)."""
        if tname.id in TYPE_NAMES:
            return TYPE_NAMES[tname.id]
        value, _ = self.ex.constants(tname)
        if isinstance(value, DType) and value in DTYPES.values():
            return value
        if quiet:
            return None
        raise self.err(tname, f"unknown scalar type '{tname.id}'",
                       "types: " + ", ".join(DTYPES))

    def shape(self, sub: ast.Subscript) -> tuple:
        dims = ExprParser.index_nodes(sub)
        out = []
        for d in dims:
            for n in ast.walk(d):
                if isinstance(n, ast.Name) and self.scope.lookup(n.id) is None and \
                        self.ex.constants(n)[0] is None:
                    raise self.err(n, f"the size '{n.id}' in this shape is not declared",
                                   f"add a parameter `{n.id}: size`")
            out.append(self.ex.control_expr(d, "a shape"))
        return tuple(out)

    def memory(self, node):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name not in MEMORIES:
            raise self.err(node, f"unknown memory '{ast.unparse(node)}'",
                           "memories: GLOBAL, SHARED, REGISTER, CONST")
        return MEMORIES[name]

    # ------------------------------------------------------------------ statements

    def block(self, stmts: list) -> tuple:
        self.scope.push()
        try:
            out = []
            for s in stmts:
                r = self.stmt(s)
                out.extend(r if isinstance(r, tuple) else (r,))
            return tuple(out)
        finally:
            self.scope.pop()

    def stmt(self, s: ast.stmt):
        m = getattr(self, "_" + type(s).__name__, None)
        if m is None:
            raise self.err(s, self._unsupported(s))
        return m(s)

    @staticmethod
    def _unsupported(s) -> str:
        name = type(s).__name__
        return {
            "Return": "'return' is not allowed in a proc: procs write their results into "
                      "array parameters",
            "While": "'while' loops are not allowed in a proc: use `for i in seq(lo, hi)`",
            "Assert": "asserts (preconditions) must come first in the proc's body",
            "Break": "'break' is not allowed: loops have fixed bounds",
            "Continue": "'continue' is not allowed: use an `if`",
            "FunctionDef": "nested functions are not allowed in a proc",
        }.get(name, f"this kind of statement ({name}) is not part of gpudsl")

    def _Pass(self, s):
        return Pass(self.src.loc(s))

    def _target(self, node, what):
        """The array name and indices of an assignment target."""
        if isinstance(node, ast.Name):
            sym = self.scope.lookup(node.id)
            if sym is None:
                raise self.err(node, f"unknown name '{node.id}'",
                               f"allocate it first: `{node.id}: f32`")
            if sym.kind != "local":
                if sym.kind == "array":
                    raise self.err(node, f"'{node.id}' is an array: {what} one element, "
                                   f"e.g. {node.id}[i]")
                raise self.err(node, f"'{node.id}' is {sym.describe()} and cannot be "
                               "assigned", "only allocated scalars and arrays can be written")
            return node.id, (), sym
        if isinstance(node, ast.Subscript):
            r = self.ex.expr(node)
            assert isinstance(r, Read)
            return r.name, r.idx, self.scope.lookup(r.name)
        raise self.err(node, f"cannot assign to {ast.unparse(node)}")

    def _value(self, node, sym):
        e = self.ex.expr(node)
        c = coerce(e, sym.ty)
        if c is None:
            raise self.err(node, f"a {e.ty.name} value cannot be stored in '{sym.name}' "
                           f"({sym.ty.name})", f"cast it: {sym.ty.name}(...)")
        return c

    def _Assign(self, s: ast.Assign):
        if len(s.targets) != 1 or isinstance(s.targets[0], ast.Tuple):
            raise self.err(s, "assign one element at a time")
        atomic = self._atomic_call(s.value)
        if atomic:
            return self._atomic(s, s.value, atomic, self._result(s.targets[0], s.value))
        name, idx, sym = self._target(s.targets[0], "assign")
        return Assign(name, idx, self._value(s.value, sym), self.src.loc(s))

    @staticmethod
    def _atomic_call(v) -> str | None:
        """The op of an ``atomic_<op>(...)`` call, else None."""
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and \
                v.func.id.startswith("atomic_") and v.func.id[7:] in ATOMIC_OPS:
            return v.func.id[7:]
        return None

    def _result(self, node, v):
        """The local scalar that receives an atomic's old value."""
        if not isinstance(node, ast.Name):
            raise self.err(node, f"the old value of {v.func.id}(...) goes into a local "
                           "scalar", f"`old: T` first, then `old = {v.func.id}(...)`")
        name, _, sym = self._target(node, "assign")
        return sym

    def _AugAssign(self, s: ast.AugAssign):
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
        op = ops.get(type(s.op))
        if op is None:
            raise self.err(s, f"'{type(s.op).__name__}=' is not a reduction of gpudsl",
                           "use +=, -= or *=, or write x[i] = x[i] op e")
        name, idx, sym = self._target(s.target, "update")
        if sym.ty == bool_:
            raise self.err(s, "a bool cannot be reduced with arithmetic")
        return Reduce(name, idx, op, self._value(s.value, sym), self.src.loc(s))

    def _AnnAssign(self, s: ast.AnnAssign):
        loc = self.src.loc(s)
        if not isinstance(s.target, ast.Name):
            raise self.err(s, "allocations name a new variable: `s: f32[4] @ SHARED`")
        name = s.target.id
        ann = s.annotation
        mem = REGISTER if self.in_blocks else GLOBAL
        swizzle = 0
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.MatMult):
            mem, swizzle = parse_memory(self, ann.right)
            ann = ann.left
        if isinstance(ann, ast.Name):
            tname, shape = ann, ()
        elif isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name):
            tname, shape = ann.value, self.shape(ann)
        else:
            raise self.err(ann, f"cannot understand the type of '{name}'",
                           "e.g. `s: f32`, `t: f32[16, 16] @ SHARED`")
        if tname.id == "barrier":
            if swizzle:
                raise self.err(ann, "a split barrier has no layout", f"write `{name}: barrier @ SHARED`")
            return parse_barrier_alloc(self, s, name, shape, mem, loc)
        ty = self.dtype(tname)
        kind = "local" if not shape else "array"
        sym = Sym(name, kind, ty, shape, mem, loc, swizzle=swizzle)
        self.scope.bind(sym, loc)
        if not mem.allocated_at:
            raise self.err(s.annotation.right,
                           "CONST memory holds read-only kernel arguments; it cannot be "
                           "allocated", "declare a parameter `x: f32[n] @ CONST`")
        alloc = Alloc(name, ty, shape, mem, loc, swizzle)
        if swizzle:
            check_swizzle(self, s, alloc)
        if s.value is None:
            return alloc
        if not shape and self._atomic_call(s.value):
            return (alloc, self._atomic(s, s.value, self._atomic_call(s.value), sym))
        if shape:
            raise self.err(s, "arrays cannot be initialised in their declaration",
                           "assign elements in a loop")
        return (alloc, Assign(name, (), self._value(s.value, sym), loc))

    def _For(self, s: ast.For):
        loc = self.src.loc(s)
        if s.orelse:
            raise self.err(s, "for ... else is not allowed")
        if not isinstance(s.target, ast.Name):
            raise self.err(s.target, "a loop variable is a single name")
        it = s.iter
        mapping, cluster = None, False
        if isinstance(it, ast.BinOp) and isinstance(it.op, ast.MatMult):
            mname = it.right.attr if isinstance(it.right, ast.Attribute) else \
                getattr(it.right, "id", None)
            cluster = mname == "CLUSTERS"
            if mname not in MAPPINGS and not cluster:
                raise self.err(it.right, f"unknown loop annotation '{ast.unparse(it.right)}'",
                               "par loops are mapped with @ BLOCKS, @ THREADS or @ CLUSTERS")
            mapping = BLOCKS if cluster else MAPPINGS[mname]
            it = it.left
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id in _LOOP_FUNCS):
            raise self.err(s.iter, "loops iterate over seq(lo, hi), range(lo, hi) or "
                           "par(lo, hi)")
        kind = "par" if it.func.id == "par" else "seq"
        if mapping is not None and kind != "par":
            raise self.err(s.iter, f"only par loops can be mapped to {mapping.name}",
                           f"write par(lo, hi) @ {mapping.name}")
        unroll, per_sm, group = False, 0, 0
        if cluster and it.keywords:
            raise self.err(it.keywords[0], "a CLUSTERS loop takes no keywords",
                           "write par(0, c) @ CLUSTERS with c a constant from 1 to 8")
        for kw in it.keywords:
            if kw.arg == "unroll" and isinstance(kw.value, ast.Constant):
                unroll = bool(kw.value.value)
            elif kw.arg == "blocks_per_sm" and mapping == BLOCKS and not self.in_blocks \
                    and _int_at_least(kw.value, 0):
                per_sm = kw.value.value
            elif kw.arg == "group" and mapping == BLOCKS and _int_at_least(kw.value, 1):
                group = kw.value.value
            else:
                raise self.err(kw, f"{it.func.id}() takes only the keywords unroll=True and, "
                               "on the outermost BLOCKS loop, blocks_per_sm=<int>; on a "
                               "BLOCKS loop around a BLOCKS loop, group=<int >= 1>")
        if len(it.args) == 1:
            lo, hi = Const(0, INDEX, loc), self.ex.int_expr(it.args[0], "a loop bound")
        elif len(it.args) == 2:
            lo = self.ex.int_expr(it.args[0], "a loop bound")
            hi = self.ex.int_expr(it.args[1], "a loop bound")
        else:
            raise self.err(it, f"{it.func.id}() takes (lo, hi)")
        lo, hi = coerce(lo, INDEX) or lo, coerce(hi, INDEX) or hi
        if cluster:
            check_cluster_extent(self, s.iter, lo, hi)
        name = s.target.id
        self.scope.push()
        try:
            self.scope.bind(Sym(name, "loop", INDEX, loc=self.src.loc(s.target),
                                mapping=mapping), loc)
            self.in_blocks += mapping == BLOCKS
            body = self.block(s.body)
        finally:
            self.in_blocks -= mapping == BLOCKS
            self.scope.pop()
        if group and not (len(body) == 1 and isinstance(body[0], For)
                          and body[0].mapping == BLOCKS):
            raise self.err(s.iter, "group= (the grouped block order) needs a BLOCKS loop "
                           "whose only statement is a BLOCKS loop",
                           "the two loops share one linear block index")
        return For(name, lo, hi, body, kind, mapping, unroll, loc, per_sm, group, cluster)

    def _If(self, s: ast.If):
        cond = self.ex.bool_expr(s.test, "an if condition")
        body = self.block(s.body)
        orelse = self.block(s.orelse) if s.orelse else ()
        return If(cond, body, orelse, self.src.loc(s))

    def _Expr(self, s: ast.Expr):
        v = s.value
        if isinstance(v, ast.Constant) and (isinstance(v.value, str) or v.value is Ellipsis):
            return ()  # a comment-like string or ...
        if not isinstance(v, ast.Call):
            raise self.err(s, "an expression on its own does nothing",
                           "assign it, or call sync(), atomic_add(...) or a proc")
        fname = v.func.id if isinstance(v.func, ast.Name) else None
        if fname in SYNC_FUNCS:
            return parse_sync_call(self, s, v, fname)
        if fname in ASYNC_FUNCS:
            return parse_async_call(self, s, v, fname)
        if fname in SETMAXNREG_FUNCS:
            return parse_setmaxnreg(self, s, v, fname)
        if fname in WGMMA_FUNCS:
            return parse_wgmma_call(self, s, v, fname)
        if fname in TMA_FUNCS:
            return parse_tma_call(self, s, v, fname)
        if self._atomic_call(v):
            return self._atomic(s, v, fname[7:])
        return self._call(s, v)

    def _atomic(self, s, v: ast.Call, op: str, res=None):
        """``atomic_<op>(x[i], e)`` (``atomic_cas(x[i], cmp, e)``), its old value
        into the local scalar ``res`` (a :class:`Sym`) when given."""
        nargs = 3 if op == "cas" else 2
        if len(v.args) != nargs or v.keywords:
            form = "(x[i], compare, value)" if op == "cas" else "(x[i], value)"
            raise self.err(v, f"atomic_{op}{form} takes {nargs} arguments")
        name, idx, sym = self._target(v.args[0], f"atomic_{op} updates")
        if sym.kind != "array" or sym.mem.per_thread:
            raise self.err(v.args[0], f"atomic_{op} updates an element of a GLOBAL or SHARED "
                           "array")
        if sym.ty.name not in ATOMIC_TYPES[op]:
            raise self.err(v, f"atomic_{op} does not take {sym.ty.name} elements ('{name}')",
                           f"atomic_{op} takes " + ", ".join(ATOMIC_TYPES[op]))
        if res is not None and res.ty != sym.ty:
            raise self.err(s, f"the old value of '{name}' is {sym.ty.name}, but '{res.name}' "
                           f"is {res.ty.name}", f"declare `{res.name}: {sym.ty.name}`")
        cmp = self._value(v.args[1], sym) if op == "cas" else None
        return Atomic(op, name, idx, self._value(v.args[-1], sym), self.src.loc(s),
                      res.name if res is not None else None, cmp)

    def _call(self, s, v: ast.Call):
        callee = self.resolve(v.func)
        fname = ast.unparse(v.func)
        if callee is None:
            raise self.err(v.func, f"unknown proc '{fname}'",
                           "define it with @proc or @instr before this proc")
        cd = as_procdef(callee)
        if cd is None:
            raise self.err(v.func, f"'{fname}' is not a gpudsl proc",
                           "only @proc / @instr functions and sync/atomic_* can be called")
        args_nodes = list(v.args)
        if v.keywords:
            names = [p.name for p in cd.params]
            byname = {}
            for kw in v.keywords:
                if kw.arg not in names:
                    raise self.err(kw, f"{cd.name} has no parameter '{kw.arg}'")
                byname[kw.arg] = kw.value
            for p in cd.params[len(args_nodes):]:
                if p.name not in byname:
                    break
                args_nodes.append(byname.pop(p.name))
            if byname:
                raise self.err(v, "keyword arguments must follow the positional ones in "
                               "parameter order")
        if len(args_nodes) != len(cd.params):
            raise self.err(v, f"{cd.name} takes {len(cd.params)} argument(s) "
                           f"({', '.join(p.name for p in cd.params)}), got {len(args_nodes)}")
        args = []
        env = {}
        for p, a in zip(cd.params, args_nodes):
            if p.is_control:
                e = self.ex.int_expr(a, f"the argument for '{p.name}'")
                env[p.name] = e
            elif p.kind == "scalar":
                e = self.ex.expr(a)
                c = coerce(e, p.ty)
                if c is None:
                    raise self.err(a, f"'{p.name}' of {cd.name} is {p.ty.name}, got "
                                   f"{e.ty.name}")
                e = c
            else:
                e = self.ex.window(a)
                self._check_window(a, e, p, env, cd.name)
            args.append(e)
        return Call(cd, tuple(args), self.src.loc(s))

    def _check_window(self, node, w: WindowArg, p: Param, env, callee: str):
        sym = self.scope.lookup(w.name)
        if w.ty != p.ty:
            raise self.err(node, f"'{p.name}' of {callee} holds {p.ty.name}, but '{w.name}' "
                           f"holds {sym.ty.name}")
        if param_memory(p.mem) != sym.mem:
            raise self.err(node, f"'{p.name}' of {callee} is in {param_memory(p.mem).name} "
                           f"memory, but '{w.name}' is in {sym.mem.name}",
                           "stage the data into the right memory first")
        if not w.idx:
            extents = list(sym.shape)
        else:
            extents = [_extent(i) for i in w.idx if isinstance(i, Interval)]
        if len(extents) != len(p.shape):
            raise self.err(node, f"'{p.name}' of {callee} has {len(p.shape)} dimension(s), "
                           f"the argument has {len(extents)}")
        for want, got in zip(p.shape, extents):
            want = substitute(want, env)
            wv, gv = _const_value(want), _const_value(got)
            if wv is not None and gv is not None and wv != gv:
                raise self.err(node, f"'{p.name}' of {callee} has extent {wv} but the "
                               f"argument has extent {gv}")


def _extent(i: Interval):
    from ..ir.nodes import BinOp

    return BinOp("-", i.hi, i.lo, INDEX)


def _const_value(e):
    """The value of a constant integer expression, else None."""
    from ..ir.nodes import BinOp, Const as C

    if isinstance(e, C):
        return e.val
    if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
        a, b = _const_value(e.lhs), _const_value(e.rhs)
        if a is None or b is None:
            # x + c - x style: compare structurally
            if e.op == "-" and e.lhs == e.rhs:
                return 0
            if e.op == "-" and isinstance(e.lhs, BinOp) and e.lhs.op == "+":
                if e.lhs.lhs == e.rhs:
                    return _const_value(e.lhs.rhs)
                if e.lhs.rhs == e.rhs:
                    return _const_value(e.lhs.lhs)
            return None
        return {"+": a + b, "-": a - b, "*": a * b}[e.op]
    return None


def _int_at_least(node, least: int) -> bool:
    """``node`` is an integer literal ``>= least`` (a hint's value)."""
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= least
