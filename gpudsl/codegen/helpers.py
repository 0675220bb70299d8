"""Small ``__device__`` helpers emitted at the top of a translation unit, only
when the generated code uses them."""
from __future__ import annotations

from .collective_cuda import WARP_COMMENT, WARP_HELPERS
from .async_copy_cuda import ASYNC_COPY
from .setmaxnreg_cuda import SETMAXNREG
from .cluster_cuda import CLUSTER_ARRIVE, SYNC_CLUSTER
from ..ir.wgmma_meaning import tf32_truncate_c
from ..targets import CLUSTERS as CLUSTERS_FEATURE, SETMAXNREG as SETMAXNREG_FEATURE, TMA as TMA_FEATURE, WGMMA as WGMMA_FEATURE
from .tma_cuda import TMA as TMA_TEXT
from .swizzle_cuda import SWIZZLE
from .wgmma_cuda import PREFIX as _WGMMA_PREFIX, WGMMA_COMMON, shape_helper
from .sync_cuda import MBARRIER, NAMED_BARRIER

_FLOOR = """\
// Python's floor division and modulo (C's / and % truncate toward zero).
__device__ __forceinline__ int gpudsl_floordiv(int a, int b) {
  if (b == -1) return (int)(0u - (unsigned)a);  // INT_MIN / -1 traps; it wraps
  int q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long gpudsl_floordiv(long long a, long long b) {
  if (b == -1) return (long long)(0ull - (unsigned long long)a);
  long long q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int gpudsl_floormod(int a, int b) {
  if (b == -1) return 0;
  int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ long long gpudsl_floormod(long long a, long long b) {
  if (b == -1) return 0;
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""



def _wrapping(c: str, u: str, bits: int) -> str:
    """i32 / i64 arithmetic that wraps (two's complement), as in the interpreter and
    check(); C's signed overflow is undefined.  Shifts by an amount outside ``[0, bits)``
    (a negative one reads as a large unsigned one, as in PTX): ``<<`` gives 0, ``>>`` the
    sign (:mod:`gpudsl.ir.numeric`)."""
    n = f"i{bits}"
    return (
        f"__device__ __forceinline__ {c} gpudsl_add_{n}({c} a, {c} b) "
        f"{{ return ({c})(({u})a + ({u})b); }}\n"
        f"__device__ __forceinline__ {c} gpudsl_sub_{n}({c} a, {c} b) "
        f"{{ return ({c})(({u})a - ({u})b); }}\n"
        f"__device__ __forceinline__ {c} gpudsl_mul_{n}({c} a, {c} b) "
        f"{{ return ({c})(({u})a * ({u})b); }}\n"
        f"__device__ __forceinline__ {c} gpudsl_neg_{n}({c} a) "
        f"{{ return ({c})(({u})0 - ({u})a); }}\n"
        f"__device__ __forceinline__ {c} gpudsl_abs_{n}({c} a) "
        f"{{ return a < 0 ? ({c})(({u})0 - ({u})a) : a; }}\n"
        f"__device__ __forceinline__ {c} gpudsl_shl_{n}({c} a, long long s) "
        f"{{ return (unsigned long long)s >= {bits} ? 0 : ({c})(({u})a << s); }}\n"
        f"__device__ __forceinline__ {c} gpudsl_shr_{n}({c} a, long long s) "
        f"{{ return (unsigned long long)s >= {bits} ? (a < 0 ? -1 : 0) : a >> s; }}\n")


_F2I = """\
// float -> integer as the GPU converts (cvt.rzi): toward zero, saturating, NaN -> 0;
// PTX gives the minimum for a NaN f64 or into 64 bits, so that case is tested first.
__device__ __forceinline__ int gpudsl_f2i32(float x) { return __float2int_rz(x); }
__device__ __forceinline__ int gpudsl_f2i32(double x) { return x != x ? 0 : __double2int_rz(x); }
__device__ __forceinline__ long long gpudsl_f2i64(float x) { return x != x ? 0 : __float2ll_rz(x); }
__device__ __forceinline__ long long gpudsl_f2i64(double x) { return x != x ? 0 : __double2ll_rz(x); }
"""


def _fminmax(t: str, fn: str) -> str:
    """``gpudsl_fmin``/``gpudsl_fmax`` on ``t``: the GPU's ``min``/``max`` (``fminf``...)
    on the device; written out on the host, where ``fminf`` leaves the sign of a zero
    result to the compiler."""
    sign = "" if fn == "min" else "!"
    cmp = "<" if fn == "min" else ">"
    libm = f"f{fn}f" if t == "float" else f"f{fn}"
    return (f"__device__ __forceinline__ {t} gpudsl_f{fn}({t} a, {t} b) {{\n"
            "#ifdef __CUDA_ARCH__\n"
            f"  return {libm}(a, b);\n"
            "#else\n"
            f"  return (b != b || a {cmp} b || (a == b && {sign}__builtin_signbit(a))) ? a : b;\n"
            "#endif\n"
            "}\n")


_FMINMAX = {t: f"// {t} min/max as the GPU's: a NaN operand is ignored, -0.0 < +0.0.\n"
            + _fminmax(t, "min") + _fminmax(t, "max") for t in ("float", "double")}

_TF32 = ("// tf32(x): x read as the tensor cores read a tf32 operand, its low 13 mantissa bits\n"
         "// cleared, a NaN kept a NaN (gpudsl.ir.wgmma_meaning.tf32_truncate)\n"
         "__device__ __forceinline__ float gpudsl_tf32(float x) {\n"
         "  const unsigned u = __float_as_uint(x);\n"
         f"  return __uint_as_float({tf32_truncate_c('u')});\n"
         "}\n")

_WRAP = ("// i32 and i64 arithmetic wraps (two's complement), as in the interpreter.\n"
         + _wrapping("int", "unsigned int", 32)
         + _wrapping("long long", "unsigned long long", 64))

# the compare-and-swap loops of atomic min/max on floats: one template, by width
_CAS_TYPES = {  # C type: (its bits as an unsigned type, bits -> value, value -> bits)
    "float": ("unsigned int", "__uint_as_float({})", "__float_as_uint({})"),
    "double": ("unsigned long long", "__longlong_as_double((long long){})",
               "(unsigned long long)__double_as_longlong({})"),
}


def _cas_minmax(ty: str, op: str, returns_old: bool) -> str:
    """``gpudsl_atomic_min``/``max`` (``_old``: returning the old value) for ``ty``,
    through compare-and-swap (CUDA has no native float ones)."""
    u, as_value, as_bits = _CAS_TYPES[ty]
    name = f"gpudsl_atomic_{op}" + ("_old" if returns_old else "")
    want = as_bits.format(f"gpudsl_f{op}({as_value.format('old')}, v)")
    return (f"__device__ __forceinline__ {ty if returns_old else 'void'} {name}({ty}* p, "
            f"{ty} v) {{\n"
            f"  {u}* q = ({u}*)p;\n"
            f"  {u} old = *q;\n"
            "  for (;;) {  // gpudsl_fmin/fmax: NaN ignored, -0.0 < +0.0\n"
            f"    {u} want = {want};\n"
            "    if (want == old) break;\n"
            f"    {u} seen = atomicCAS(q, old, want);\n"
            "    if (seen == old) break;\n"
            "    old = seen;\n"
            "  }\n"
            + (f"  return {as_value.format('old')};\n" if returns_old else "")
            + "}\n")


_ATOMIC_F32 = ("// atomic min/max of floats through compare-and-swap (CUDA has no native ones).\n"
               + _cas_minmax("float", "min", False) + _cas_minmax("float", "max", False))

_ATOMIC_F64 = _cas_minmax("double", "min", False) + _cas_minmax("double", "max", False)

_ATOMIC_OLD = ("// atomics CUDA has no overload for, each returning the old value "
               "(compare-and-swap).\n"
               + "".join(_cas_minmax(ty, op, True) for ty in ("float", "double")
                         for op in ("min", "max"))
               + """\
__device__ __forceinline__ double gpudsl_atomic_exch(double* p, double v) {
  return __longlong_as_double((long long)atomicExch((unsigned long long*)p,
                                                    (unsigned long long)__double_as_longlong(v)));
}
// atomic_inc: 0 if old >= m else old + 1 (signed comparison, unlike atomicInc).
__device__ __forceinline__ int gpudsl_atomic_inc(int* p, int m) {
  int old = *p;
  for (;;) {
    int seen = atomicCAS(p, old, old >= m ? 0 : (int)((unsigned int)old + 1u));
    if (seen == old) return old;
    old = seen;
  }
}
__device__ __forceinline__ long long gpudsl_atomic_inc(long long* p, long long m) {
  unsigned long long* q = (unsigned long long*)p;
  unsigned long long old = *q;
  for (;;) {
    long long o = (long long)old;
    unsigned long long seen = atomicCAS(q, old, o >= m ? 0ull : old + 1ull);
    if (seen == old) return o;
    old = seen;
  }
}
""")

HELPERS = {
    "gpudsl_bar_sync": ("named_barrier", NAMED_BARRIER),
    "gpudsl_mbar": ("mbarrier", MBARRIER),
    "gpudsl_cp_async": ("cp_async", ASYNC_COPY),
    "gpudsl_setmaxnreg": ("setmaxnreg", SETMAXNREG),
    "gpudsl_sync_cluster": ("sync_cluster", SYNC_CLUSTER),
    "gpudsl_cluster_arrive": ("cluster_arrive", CLUSTER_ARRIVE),
    "gpudsl_swizzle": ("swizzle", SWIZZLE),
    "gpudsl_wgmma": ("wgmma", WGMMA_COMMON),
    "gpudsl_tma": ("tma", TMA_TEXT),
    "gpudsl_floordiv": ("floor", _FLOOR),
    "gpudsl_floormod": ("floor", _FLOOR),
    "gpudsl_wrap": ("wrap", _WRAP),
    "gpudsl_f2i": ("f2i", _F2I),
    "gpudsl_tf32": ("tf32", _TF32),
    "gpudsl_fminmax:float": ("fminmax:float", _FMINMAX["float"]),
    "gpudsl_fminmax:double": ("fminmax:double", _FMINMAX["double"]),
    "gpudsl_atomic_f32": ("atomic_f32", _ATOMIC_F32),
    "gpudsl_atomic_f64": ("atomic_f64", _ATOMIC_F64),
    "gpudsl_atomic_old": ("atomic_old", _ATOMIC_OLD),
}
HELPERS.update({name: (name, text) for name, text in WARP_HELPERS.items()})

_ORDER = ("floor", "wrap", "f2i", "tf32", "fminmax:float", "fminmax:double", "atomic_f32",
          "atomic_f64", "atomic_old", "named_barrier", "mbarrier", "tma", "cp_async", "setmaxnreg", "sync_cluster", "cluster_arrive", "swizzle",
          "wgmma") + \
    tuple(WARP_HELPERS)


_GROUP_TEXT = dict(HELPERS.values())
# groups whose text calls another group's helpers (the compare-and-swap loops call
# gpudsl_fmin / gpudsl_fmax)
_NEEDS = {"atomic_f32": ("fminmax:float",), "atomic_f64": ("fminmax:double",),
          "atomic_old": ("fminmax:float", "fminmax:double"), "tma": ("mbarrier",),
          "cluster_arrive": ("mbarrier", "sync_cluster")}


# the target features a helper's code needs (gpudsl.targets names)
FEATURES = {"gpudsl_setmaxnreg": SETMAXNREG_FEATURE, "gpudsl_wgmma": WGMMA_FEATURE,
            "gpudsl_tma": TMA_FEATURE, "gpudsl_sync_cluster": CLUSTERS_FEATURE,
            "gpudsl_cluster_arrive": CLUSTERS_FEATURE}


def features_of(used: set[str]) -> frozenset:
    """The target features the helpers named in ``used`` need."""
    return frozenset(f for h, f in FEATURES.items() if h in used)


def helper_source(used: set[str]) -> str:
    """The C text of the helpers named in ``used`` (each group once)."""
    groups = {HELPERS[u][0]: HELPERS[u][1] for u in used if u in HELPERS}
    for g in list(groups):
        for need in _NEEDS.get(g, ()):
            groups[need] = _GROUP_TEXT[need]
    out = [groups[g] for g in _ORDER if g in groups]
    # one wgmma function per shape and type, after the common wgmma helpers
    shapes = sorted(u for u in used if u.startswith(_WGMMA_PREFIX))
    if shapes:
        at = next(k for k, g in enumerate(g for g in _ORDER if g in groups) if g == "wgmma")
        out[at + 1:at + 1] = [shape_helper(u) for u in shapes]
    first_warp = next((k for k, g in enumerate(g for g in _ORDER if g in groups)
                       if g in WARP_HELPERS), None)
    if first_warp is not None:
        out.insert(first_warp, WARP_COMMENT)
    return "".join(out)
