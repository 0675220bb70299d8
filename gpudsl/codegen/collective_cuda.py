"""Warp collectives → CUDA (docs/language.md (synchronization)), from the one table
:data:`gpudsl.ir.collective_meaning.COLLECTIVES`.

Every collective is evaluated by all 32 lanes (check() proves it), so the mask is
always ``0xffffffff``.  Shuffles are ``__shfl*_sync``; ``ballot`` is
``__ballot_sync`` widened to ``long long`` (a non-negative i64); ``any_lanes`` /
``all_lanes`` are ``__any_sync`` / ``__all_sync``.  Warp reductions call the
``gpudsl_warp_*`` helpers below: ``__reduce_add/min/max_sync`` for 32-bit integers on
sm_80+ (and on the emulator), a 5-step ``__shfl_xor_sync`` butterfly otherwise (every
lane gets the result; the interpreter follows the same butterfly, so float results
agree bit for bit).
"""
from __future__ import annotations

from ..ir.collective_meaning import COLLECTIVES
from ..ir.nodes import Collective

FULL = "0xffffffffu"


def _butterfly(ctype: str, name: str, step: str, unsigned: str | None = None) -> str:
    """A reduction helper: ``step`` combines ``v`` and ``o`` (the partner's value)."""
    return (f"__device__ __forceinline__ {ctype} {name}({ctype} v) {{\n"
            "#pragma unroll\n"
            "  for (int m = 16; m > 0; m >>= 1) {\n"
            f"    {ctype} o = __shfl_xor_sync({FULL}, v, m);\n"
            f"    v = {step};\n"
            "  }\n"
            "  return v;\n"
            "}\n")


_STEPS = {
    # floats: the GPU's min/max (gpudsl_fmin, helpers.py), so the butterfly's order
    # cannot change the sign of a zero result on the emulator
    "float": {"sum": "v + o", "max": "gpudsl_fmax(v, o)", "min": "gpudsl_fmin(v, o)"},
    "double": {"sum": "v + o", "max": "gpudsl_fmax(v, o)", "min": "gpudsl_fmin(v, o)"},
    "long long": {"sum": "(long long)((unsigned long long)v + (unsigned long long)o)",
                  "max": "(o > v ? o : v)", "min": "(o < v ? o : v)"},
    "int": {"sum": "(int)((unsigned)v + (unsigned)o)", "max": "(o > v ? o : v)",
            "min": "(o < v ? o : v)"},
}


def _int32(op: str) -> str:
    name = f"gpudsl_warp_{op}"
    return (f"__device__ __forceinline__ int {name}(int v) {{\n"
            "#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800\n"
            f"  return __reduce_{'add' if op == 'sum' else op}_sync({FULL}, v);\n"
            "#else\n"
            "#pragma unroll\n"
            "  for (int m = 16; m > 0; m >>= 1) {\n"
            f"    int o = __shfl_xor_sync({FULL}, v, m);\n"
            f"    v = {_STEPS['int'][op]};\n"
            "  }\n"
            "  return v;\n"
            "#endif\n"
            "}\n")


# one helper per (C type, reduction), emitted only where used; the first one used
# carries the comment
WARP_HELPERS = {
    f"gpudsl_warp_{op}:{t}": (_int32(op) if t == "int" else
                              _butterfly(t, f"gpudsl_warp_{op}", _STEPS[t][op]))
    for t in ("float", "double", "long long", "int") for op in ("sum", "max", "min")}
WARP_COMMENT = ("// warp reductions (every lane gets the result): __reduce_*_sync for 32-bit "
                "integers\n// on sm_80+, a 5-step __shfl_xor_sync butterfly otherwise.\n")


def collective_c(em, e: Collective, ATOM: int, UNARY: int) -> tuple[str, int]:
    """The C text of ``e`` and its precedence (``ATOM`` or ``UNARY``, the printer's
    levels); ``em`` is the expression printer (:class:`gpudsl.codegen.cexpr.ExprEmitter`)."""
    cd = COLLECTIVES[e.name]
    v = em.expr(e.args[0])
    if e.name.startswith("warp_"):
        em.use_helper(f"{e.name.replace('warp_', 'gpudsl_warp_')}:{e.ty.ctype}")
        if e.ty.is_float and e.name != "warp_sum":
            em.use_helper(f"gpudsl_fminmax:{e.ty.ctype}")
        return f"gpudsl_warp_{e.name[5:]}({v})", ATOM
    if cd.lane is not None:
        k = em.expr(e.args[1], UNARY)
        k = f"(unsigned){k}" if e.name in ("shfl_down", "shfl_up") else f"(int){k}"
        return f"{cd.cuda}({FULL}, {v}, {k})", ATOM
    if e.name == "ballot":
        return f"(long long){cd.cuda}({FULL}, {v})", UNARY
    return f"({cd.cuda}({FULL}, {v}) != 0)", ATOM


def count_shuffles(e: Collective) -> int:
    """Warp shuffles (or votes/reductions) one evaluation issues: 5 for a butterfly
    reduction, 1 otherwise (the performance report)."""
    if e.name.startswith("warp_") and not (e.ty.name == "i32"):
        return 5
    return 1
