"""The immutable IR of gpudsl: nodes, types, traversal and printing."""
from .nodes import *  # noqa: F401,F403
from .nodes import (Alloc, Arrive, Wait, Assign, Atomic, BinOp, Builtin, Call, Const, Expr, For, If,
                    Interval, Node, Param, Pass, Point, ProcDef, Read, Reduce, Stmt, Sync,
                    UnOp, Var, WindowArg)
from .types import (BLOCKS, GLOBAL, INDEX, REGISTER, SHARED, THREADS, DType, Mapping,
                    Memory, bf16, bool_, f16, f32, f64, i32, i64)
from .printer import print_expr, print_proc, print_stmt
from .visitor import (ExprMap, Transformer, bound_names, children, free_vars, fresh_name,
                      rename, substitute, walk)
