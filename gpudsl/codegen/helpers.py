"""Small ``__device__`` helpers emitted at the top of a translation unit, only
when the generated code uses them."""
from __future__ import annotations

_FLOOR = """\
// Python's floor division and modulo (C's / and % truncate toward zero).
__device__ __forceinline__ int gpudsl_floordiv(int a, int b) {
  int q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long gpudsl_floordiv(long long a, long long b) {
  long long q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int gpudsl_floormod(int a, int b) {
  int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ long long gpudsl_floormod(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""

_ATOMIC_F32 = """\
// atomic min/max of floats through compare-and-swap (CUDA has no native ones).
__device__ __forceinline__ void gpudsl_atomic_min(float* p, float v) {
  unsigned int* q = (unsigned int*)p;
  unsigned int old = *q;
  while (v < __uint_as_float(old)) {
    unsigned int seen = atomicCAS(q, old, __float_as_uint(v));
    if (seen == old) break;
    old = seen;
  }
}
__device__ __forceinline__ void gpudsl_atomic_max(float* p, float v) {
  unsigned int* q = (unsigned int*)p;
  unsigned int old = *q;
  while (v > __uint_as_float(old)) {
    unsigned int seen = atomicCAS(q, old, __float_as_uint(v));
    if (seen == old) break;
    old = seen;
  }
}
"""

_ATOMIC_F64 = """\
__device__ __forceinline__ void gpudsl_atomic_min(double* p, double v) {
  unsigned long long* q = (unsigned long long*)p;
  unsigned long long old = *q;
  while (v < __longlong_as_double((long long)old)) {
    unsigned long long seen = atomicCAS(q, old, (unsigned long long)__double_as_longlong(v));
    if (seen == old) break;
    old = seen;
  }
}
__device__ __forceinline__ void gpudsl_atomic_max(double* p, double v) {
  unsigned long long* q = (unsigned long long*)p;
  unsigned long long old = *q;
  while (v > __longlong_as_double((long long)old)) {
    unsigned long long seen = atomicCAS(q, old, (unsigned long long)__double_as_longlong(v));
    if (seen == old) break;
    old = seen;
  }
}
"""

_ATOMIC_OLD = """\
// atomics CUDA has no overload for, each returning the old value (compare-and-swap).
__device__ __forceinline__ float gpudsl_atomic_min_old(float* p, float v) {
  unsigned int* q = (unsigned int*)p;
  unsigned int old = *q;
  while (v < __uint_as_float(old)) {
    unsigned int seen = atomicCAS(q, old, __float_as_uint(v));
    if (seen == old) break;
    old = seen;
  }
  return __uint_as_float(old);
}
__device__ __forceinline__ float gpudsl_atomic_max_old(float* p, float v) {
  unsigned int* q = (unsigned int*)p;
  unsigned int old = *q;
  while (v > __uint_as_float(old)) {
    unsigned int seen = atomicCAS(q, old, __float_as_uint(v));
    if (seen == old) break;
    old = seen;
  }
  return __uint_as_float(old);
}
__device__ __forceinline__ double gpudsl_atomic_min_old(double* p, double v) {
  unsigned long long* q = (unsigned long long*)p;
  unsigned long long old = *q;
  while (v < __longlong_as_double((long long)old)) {
    unsigned long long seen = atomicCAS(q, old, (unsigned long long)__double_as_longlong(v));
    if (seen == old) break;
    old = seen;
  }
  return __longlong_as_double((long long)old);
}
__device__ __forceinline__ double gpudsl_atomic_max_old(double* p, double v) {
  unsigned long long* q = (unsigned long long*)p;
  unsigned long long old = *q;
  while (v > __longlong_as_double((long long)old)) {
    unsigned long long seen = atomicCAS(q, old, (unsigned long long)__double_as_longlong(v));
    if (seen == old) break;
    old = seen;
  }
  return __longlong_as_double((long long)old);
}
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
"""

HELPERS = {
    "gpudsl_floordiv": ("floor", _FLOOR),
    "gpudsl_floormod": ("floor", _FLOOR),
    "gpudsl_atomic_f32": ("atomic_f32", _ATOMIC_F32),
    "gpudsl_atomic_f64": ("atomic_f64", _ATOMIC_F64),
    "gpudsl_atomic_old": ("atomic_old", _ATOMIC_OLD),
}

_ORDER = ("floor", "atomic_f32", "atomic_f64", "atomic_old")


def helper_source(used: set[str]) -> str:
    """The C text of the helpers named in ``used`` (each group once)."""
    groups = {HELPERS[u][0]: HELPERS[u][1] for u in used if u in HELPERS}
    return "".join(groups[g] for g in _ORDER if g in groups)
