"""Python expressions → typed IR expressions."""
from __future__ import annotations

import ast
import numbers

from ..errors import ProcError
from ..ir.nodes import (ATOMIC_OPS, BUILTINS, BinOp, Builtin, Const, Expr, Interval, Point,
                        Read, UnOp, Var, WindowArg)
from ..ir.types import DTYPES, INDEX, DType, bool_, f32, join_numeric
from .scope import Scope
from ..ir.collective_meaning import COLLECTIVES
from .collective_exprs import collective

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>", ast.Pow: "**"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">="}
_PLURAL = {"size": "sizes", "index": "index parameters", "loop": "loop variables"}
# Scalar type names as written in procs: ``bool_`` (what gpudsl exports, since
# ``bool`` is Python's) means ``bool``.
TYPE_NAMES: dict[str, DType] = {**DTYPES, "bool_": bool_}


def coerce(e: Expr, ty: DType) -> Expr:
    """``e`` as a value of type ``ty``: literals are retyped, other numeric
    values are converted implicitly (integer → float); None when impossible."""
    if e.ty == ty:
        return e
    if isinstance(e, Const) and e.ty.kind in ("index", "float") and ty.is_numeric:
        if ty.is_float:
            return Const(float(e.val), ty, e.loc)
        if float(e.val) == int(e.val):
            v = int(e.val)
            if ty.kind == "int" and not -(1 << (ty.bits - 1)) <= v < (1 << (ty.bits - 1)):
                # C would compute it in a wider type (2147483648 is a long long) where
                # gpudsl's meaning wraps: refused rather than two meanings
                raise ProcError(f"the literal {v} does not fit in {ty.name}", e.loc,
                                f"write it with an explicit type, e.g. i64({v}), or "
                                f"compute in i64")
            return Const(v, ty, e.loc)
        return None
    if e.ty.is_numeric and ty.is_numeric:
        if e.ty.is_float and not ty.is_float:
            return None  # float → integer needs an explicit cast
        if e.ty.is_float and ty.is_float:
            return None  # f32 ↔ f64 (and f16) need an explicit cast
        return e
    return None


class ExprParser:
    """Parses expressions in the scope of the statement parser."""

    def __init__(self, src, scope: Scope, constants=None):
        self.src = src
        self.scope = scope
        # node -> (value, why not): compile-time constants (frontend._Resolver.constant)
        self.constants = constants or (lambda node: (None, None))

    def err(self, node, msg, hint=None):
        return ProcError(msg, self.src.loc(node), hint)

    # -------------------------------------------------------------- entry points

    def expr(self, node: ast.AST) -> Expr:
        m = getattr(self, "_" + type(node).__name__, None)
        if m is None:
            raise self.err(node, f"this kind of expression ({type(node).__name__}) is not "
                           "part of gpudsl",
                           "expressions are arithmetic, comparisons, array reads and the "
                           "builtins " + ", ".join(BUILTINS))
        return m(node)

    def int_expr(self, node: ast.AST, what: str) -> Expr:
        e = self.expr(node)
        if not e.ty.is_integer:
            raise self.err(node, f"{what} must be an integer expression, not {e.ty.name}",
                           "use // for integer division; cast with i32(...) if needed")
        return e

    def bool_expr(self, node: ast.AST, what: str) -> Expr:
        e = self.expr(node)
        if e.ty != bool_:
            raise self.err(node, f"{what} must be a condition (a comparison, and/or/not), "
                           f"not {e.ty.name}", "compare explicitly, e.g. `x != 0`")
        return e

    def control_expr(self, node: ast.AST, what: str, allowed=("size", "index")) -> Expr:
        """An integer expression over the given kinds of names and constants only
        (shapes and asserts)."""
        e = self.int_expr(node, what)
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                sym = self.scope.lookup(n.id)
                if sym is not None and sym.kind not in allowed:
                    raise self.err(n, f"{what} may use only "
                                   f"{', '.join(_PLURAL[a] for a in allowed)} and constants; "
                                   f"'{n.id}' is {sym.describe()}")
            elif isinstance(n, ast.Subscript):
                raise self.err(n, f"{what} cannot read memory")
        return e

    # -------------------------------------------------------------- leaves

    def _Constant(self, node: ast.Constant) -> Expr:
        v = node.value
        loc = self.src.loc(node)
        if isinstance(v, bool):
            return Const(v, bool_, loc)
        if isinstance(v, int):
            return Const(v, INDEX, loc)
        if isinstance(v, float):
            return Const(v, f32, loc)
        raise self.err(node, f"the constant {v!r} is not a number or a bool")

    def _Name(self, node: ast.Name) -> Expr:
        sym = self.scope.lookup(node.id)
        loc = self.src.loc(node)
        if sym is None:
            if node.id in ("True", "False"):
                return Const(node.id == "True", bool_, loc)
            return self.constant(node, node.id)
        if sym.is_int_control:
            return Var(node.id, INDEX, loc)
        if sym.kind in ("scalar", "local"):
            return Read(node.id, (), sym.ty, loc)
        raise self.err(node, f"'{node.id}' is an array of {len(sym.shape)} dimension(s); "
                       "index it to read an element",
                       f"write {node.id}[{', '.join('i' * 1 for _ in sym.shape)}]")

    def cast_type(self, name: ast.Name):
        """The type a cast ``name(...)`` converts to (a type's name, or a constant holding
        a dtype: ``T(x)`` in a proc generic over ``T``), or None."""
        if name.id in TYPE_NAMES:
            return TYPE_NAMES[name.id]
        if self.scope.lookup(name.id) is not None:
            return None
        value, _ = self.constants(name)
        return value if isinstance(value, DType) and value in DTYPES.values() else None

    def _Attribute(self, node: ast.Attribute) -> Expr:
        return self.constant(node, ast.unparse(node))

    def constant(self, node, name: str) -> Expr:
        """The compile-time constant ``name`` (:class:`gpudsl.constexpr`) as a literal."""
        value, why = self.constants(node)
        loc = self.src.loc(node)
        if value is None:
            raise self.err(node, f"unknown name '{name}'", why or (
                f"declare '{name}' as a parameter, an allocation (`{name}: f32`) or a loop "
                f"variable, or define it as a Python constant: "
                f"`{name} = gpudsl.constexpr(...)`"))
        if isinstance(value, bool):
            return Const(value, bool_, loc)
        if isinstance(value, numbers.Integral):
            return Const(int(value), INDEX, loc)
        if isinstance(value, numbers.Real):
            return Const(float(value), f32, loc)
        raise self.err(node, f"'{name}' is {value!r}, not a number or a bool",
                       "a dtype names a type: use it in annotations and casts")

    def _Subscript(self, node: ast.Subscript) -> Expr:
        if not isinstance(node.value, ast.Name):
            raise self.err(node, "only named arrays can be indexed")
        name = node.value.id
        sym = self.scope.lookup(name)
        if sym is None:
            raise self.err(node.value, f"unknown name '{name}'",
                           "declare the array as a parameter or an allocation")
        if sym.kind != "array":
            raise self.err(node, f"'{name}' is {sym.describe()} ({sym.ty.name}), it cannot be "
                           "indexed", "only arrays take indices")
        idx_nodes = self.index_nodes(node)
        if any(isinstance(i, ast.Slice) for i in idx_nodes):
            raise self.err(node, "a window (slice) can only be passed to a proc call",
                           "read single elements in expressions")
        if len(idx_nodes) != len(sym.shape):
            raise self.err(node, f"'{name}' has {len(sym.shape)} dimension(s) but "
                           f"{len(idx_nodes)} index(es) were given")
        idx = tuple(self.int_expr(i, f"an index of '{name}'") for i in idx_nodes)
        return Read(name, idx, sym.ty, self.src.loc(node))

    @staticmethod
    def index_nodes(node: ast.Subscript) -> list:
        sl = node.slice
        return list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]

    def window(self, node: ast.AST) -> WindowArg:
        """An array argument of a call: a name or a window ``x[i:i+4, j]``."""
        loc = self.src.loc(node)
        if isinstance(node, ast.Name):
            sym = self.scope.lookup(node.id)
            if sym is None or sym.kind != "array":
                raise self.err(node, f"'{node.id}' is not an array",
                               "this parameter of the callee takes an array or a window")
            return WindowArg(node.id, (), sym.ty, loc)
        if not isinstance(node, ast.Subscript) or not isinstance(node.value, ast.Name):
            raise self.err(node, "expected an array or a window such as x[i:i+4, j]")
        name = node.value.id
        sym = self.scope.lookup(name)
        if sym is None or sym.kind != "array":
            raise self.err(node.value, f"'{name}' is not an array")
        parts = self.index_nodes(node)
        if len(parts) != len(sym.shape):
            raise self.err(node, f"'{name}' has {len(sym.shape)} dimension(s) but the window "
                           f"gives {len(parts)}")
        idx = []
        for p, extent in zip(parts, sym.shape):
            if isinstance(p, ast.Slice):
                if p.step is not None:
                    raise self.err(p, "windows take no step")
                lo = self.int_expr(p.lower, "a window bound") if p.lower else Const(0, INDEX)
                hi = self.int_expr(p.upper, "a window bound") if p.upper else extent
                idx.append(Interval(lo, hi, self.src.loc(p)))
            else:
                idx.append(Point(self.int_expr(p, "a window index"), self.src.loc(p)))
        return WindowArg(name, tuple(idx), sym.ty, loc)

    # -------------------------------------------------------------- operators

    def _BinOp(self, node: ast.BinOp) -> Expr:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.err(node, f"the operator {type(node.op).__name__} is not part of gpudsl")
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        if op == "**":
            return self.power(node, lhs, rhs)
        return self.binop(node, op, lhs, rhs)

    def power(self, node, base: Expr, exp: Expr) -> Expr:
        """``base ** exp`` and ``pow(base, exp)``: floats (a literal converts), C's
        ``pow``; integer powers are refused (write the product)."""
        ty = self._join(node, "**", base, exp)
        if not ty.is_float:
            raise self.err(node, f"'**' is for floats, got {base.ty.name} and {exp.ty.name}",
                           "write an integer power as a product, or cast to a float type "
                           "first")
        return Builtin("pow", (coerce(base, ty), coerce(exp, ty)), ty, self.src.loc(node))

    def binop(self, node, op: str, lhs: Expr, rhs: Expr) -> Expr:
        loc = self.src.loc(node)
        if not (lhs.ty.is_numeric and rhs.ty.is_numeric):
            raise self.err(node, f"'{op}' needs numbers, got {lhs.ty.name} and {rhs.ty.name}")
        if op in ("//", "%", "&", "|", "^", "<<", ">>"):
            if not (lhs.ty.is_integer and rhs.ty.is_integer):
                raise self.err(node, f"'{op}' is for integers, got {lhs.ty.name} and "
                               f"{rhs.ty.name}", "use / for floats" if op == "//" else None)
        ty = self._join(node, op, lhs, rhs)
        if op == "/" and ty.is_integer:
            raise self.err(node, "'/' on integers is not allowed", "use // (floor division)")
        return BinOp(op, coerce(lhs, ty), coerce(rhs, ty), ty, loc)

    def _join(self, node, op, lhs: Expr, rhs: Expr) -> DType:
        if isinstance(lhs, Const) and not isinstance(rhs, Const) and lhs.ty.kind != "bool":
            if coerce(lhs, rhs.ty) is not None and (rhs.ty.is_float or lhs.ty.is_integer):
                return rhs.ty
        if isinstance(rhs, Const) and not isinstance(lhs, Const) and rhs.ty.kind != "bool":
            if coerce(rhs, lhs.ty) is not None and (lhs.ty.is_float or rhs.ty.is_integer):
                return lhs.ty
        ty = join_numeric(lhs.ty, rhs.ty)
        if ty is None:
            raise self.err(node, f"'{op}' mixes {lhs.ty.name} and {rhs.ty.name}",
                           f"cast one side, e.g. {rhs.ty.name}(...)")
        return ty

    def _UnaryOp(self, node: ast.UnaryOp) -> Expr:
        loc = self.src.loc(node)
        if isinstance(node.op, ast.Not):
            return UnOp("not", self.bool_expr(node.operand, "the operand of 'not'"), bool_, loc)
        arg = self.expr(node.operand)
        if isinstance(node.op, ast.UAdd):
            return arg
        if isinstance(node.op, ast.USub):
            if not arg.ty.is_numeric:
                raise self.err(node, f"unary '-' needs a number, got {arg.ty.name}")
            if isinstance(arg, Const):
                return Const(-arg.val, arg.ty, loc)
            return UnOp("-", arg, arg.ty, loc)
        raise self.err(node, "'~' is not part of gpudsl", "use ^ with a mask")

    def _Compare(self, node: ast.Compare) -> Expr:
        loc = self.src.loc(node)
        left = self.expr(node.left)
        out = None
        for op_node, right_node in zip(node.ops, node.comparators):
            op = _CMPOPS.get(type(op_node))
            if op is None:
                raise self.err(node, f"the comparison {type(op_node).__name__} is not part "
                               "of gpudsl")
            right = self.expr(right_node)
            if left.ty == bool_ and right.ty == bool_ and op in ("==", "!="):
                cmp = BinOp(op, left, right, bool_, loc)
            else:
                if not (left.ty.is_numeric and right.ty.is_numeric):
                    raise self.err(node, f"cannot compare {left.ty.name} with {right.ty.name}")
                ty = self._join(node, op, left, right)
                cmp = BinOp(op, coerce(left, ty), coerce(right, ty), bool_, loc)
            out = cmp if out is None else BinOp("and", out, cmp, bool_, loc)
            left = right
        return out

    def _BoolOp(self, node: ast.BoolOp) -> Expr:
        op = "and" if isinstance(node.op, ast.And) else "or"
        vals = [self.bool_expr(v, f"an operand of '{op}'") for v in node.values]
        out = vals[0]
        for v in vals[1:]:
            out = BinOp(op, out, v, bool_, self.src.loc(node))
        return out

    def _IfExp(self, node: ast.IfExp) -> Expr:
        raise self.err(node, "conditional expressions are written select(cond, a, b)")

    # -------------------------------------------------------------- builtins

    def _Call(self, node: ast.Call) -> Expr:
        loc = self.src.loc(node)
        if not isinstance(node.func, ast.Name):
            raise self.err(node, "only builtins can be called inside expressions",
                           "builtins: " + ", ".join(BUILTINS) + "; casts: " +
                           ", ".join(TYPE_NAMES) + " (e.g. exp(x[i]), not math.exp)")
        fname = node.func.id
        if node.keywords:
            raise self.err(node, f"{fname}() takes no keyword arguments")
        ty = self.cast_type(node.func)
        if ty is not None:
            if len(node.args) != 1:
                raise self.err(node, f"the cast {fname}(...) takes one argument")
            a = self.expr(node.args[0])
            return Builtin(ty.name, (a,), ty, loc)
        if fname.startswith("atomic_") and fname[7:] in ATOMIC_OPS:
            raise self.err(node, f"{fname}(...) is a statement: its old value can only be "
                           "assigned whole to a local scalar",
                           f"write `old = {fname}(...)` on its own line, then use `old`")
        if fname in COLLECTIVES:
            return collective(self, node, fname)
        if fname not in BUILTINS:
            raise self.err(node, f"'{fname}' is not a builtin of gpudsl",
                           "builtins: " + ", ".join(BUILTINS + tuple(COLLECTIVES)) +
                           "; calls of procs are statements, not expressions")
        args = [self.expr(a) for a in node.args]
        want = 3 if fname == "select" else 2 if fname in ("min", "max", "pow") else 1
        if len(args) != want:
            raise self.err(node, f"{fname}() takes {want} argument(s), got {len(args)}")
        if fname == "select":
            c, a, b = args
            if c.ty != bool_:
                raise self.err(node.args[0], "select's first argument must be a condition")
            ty = self._join(node, "select", a, b)
            return Builtin(fname, (c, coerce(a, ty), coerce(b, ty)), ty, loc)
        for a, an in zip(args, node.args):
            if not a.ty.is_numeric:
                raise self.err(an, f"{fname}() needs a number, got {a.ty.name}")
        if fname in ("min", "max"):
            ty = self._join(node, fname, args[0], args[1])
            return Builtin(fname, tuple(coerce(a, ty) for a in args), ty, loc)
        if fname == "abs":
            return Builtin(fname, (args[0],), args[0].ty, loc)
        if fname == "pow":
            return self.power(node, args[0], args[1])
        a = args[0]
        if fname == "tf32":   # f32 -> f32, the low 13 mantissa bits cleared
            if isinstance(a, Const) and a.ty != f32:
                a = coerce(a, f32)
            if a.ty != f32:
                raise self.err(node, f"tf32() reads an f32, got {a.ty.name}",
                               "cast first: tf32(f32(...))")
            return Builtin(fname, (a,), f32, loc)
        if not a.ty.is_float:
            if isinstance(a, Const):
                a = coerce(a, f32)
            else:
                raise self.err(node, f"{fname}() needs a float, got {a.ty.name}",
                               f"cast first: {fname}(f32(...))")
        return Builtin(fname, (a,), a.ty, loc)
