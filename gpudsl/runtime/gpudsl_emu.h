// gpudsl_emu.h — run CUDA C kernels on the CPU (gpudsl's "emulator" target).
//
// The generated .cu file is compiled by g++ -std=c++20 -x c++ with `-include gpudsl_emu.h`.
// Each block's threads run as fibers on one OS thread; a fiber yields only at
// __syncthreads() and warp-collective operations (__syncwarp, __shfl*_sync, __ballot_sync...).
// Threads run in order 0..n-1 until they block ("a pass"); when every live thread waits at
// the block barrier it is released.  Threads that exit while others wait at a barrier, or
// threads waiting at two different __syncthreads() sites, are reported as barrier divergence
// (an error, never a hang).  Blocks run one after another on each of `workers` OS threads;
// __shared__ storage is thread_local (uninitialised in CUDA, so reuse across blocks is fine).
//
// Limits: every emulated thread has a fixed stack (GPUDSL_EMU_STACK bytes, default 128 KiB, less
// two pages for its header and a guard page); a deeper stack faults (SIGSEGV) on the guard page.  Threads that
// spin-wait on memory written by other threads hang.  Inline PTX, cp.async, TMA and wgmma
// cannot be emulated.
#ifndef GPUDSL_EMU_H
#define GPUDSL_EMU_H

#define GPUDSL_EMULATOR 1

// the system headers (precompiled once per flags when g++ allows: gpudsl/runtime/emu_pch.py)
#include "gpudsl_emu_sys.h"

// ---------------------------------------------------------------- qualifiers and keywords
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __cluster_dims__(...)   // the launcher knows the cluster size (gpudsl_emu_cluster.h)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
#define __shared__ thread_local  // per OS thread = per running block (blocks may run in parallel)
#define warpSize 32

// ---------------------------------------------------------------- vector and index types
#define GPUDSL_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; }; \
  static inline N##2 make_##N##2(T x, T y) { N##2 r; r.x = x; r.y = y; return r; }
#define GPUDSL_VEC3(T, N) struct N##3 { T x, y, z; }; \
  static inline N##3 make_##N##3(T x, T y, T z) { N##3 r; r.x = x; r.y = y; r.z = z; return r; }
#define GPUDSL_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r; }
#define GPUDSL_VECS(T, N, A2, A4) GPUDSL_VEC2(T, N, A2) GPUDSL_VEC3(T, N) GPUDSL_VEC4(T, N, A4)
GPUDSL_VECS(float, float, 8, 16)
GPUDSL_VECS(double, double, 16, 16)
GPUDSL_VECS(int, int, 8, 16)
GPUDSL_VECS(unsigned int, uint, 8, 16)
GPUDSL_VECS(long long, longlong, 16, 16)
GPUDSL_VECS(unsigned long long, ulonglong, 16, 16)
GPUDSL_VECS(short, short, 4, 8)
GPUDSL_VECS(unsigned short, ushort, 4, 8)
GPUDSL_VECS(signed char, char, 2, 4)
GPUDSL_VECS(unsigned char, uchar, 2, 4)

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---------------------------------------------------------------- half precision
struct __half {
  _Float16 v;
  __half() = default;
  __half(float f) : v((_Float16)f) {}
  __half(double f) : v((_Float16)f) {}
  __half(int f) : v((_Float16)f) {}
  operator float() const { return (float)v; }
};
struct __nv_bfloat16 {
  uint16_t bits;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) {  // round to nearest even
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) { bits = (uint16_t)((u >> 16) | 0x40u); return; }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = (uint16_t)(u >> 16);
  }
  __nv_bfloat16(double f) : __nv_bfloat16((float)f) {}
  __nv_bfloat16(int f) : __nv_bfloat16((float)f) {}
  operator float() const { uint32_t u = (uint32_t)bits << 16; float f; memcpy(&f, &u, 4); return f; }
};
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;
static inline float __half2float(__half h) { return (float)h; }
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
#define GPUDSL_HALF_OPS(H) \
  static inline H operator+(H a, H b) { return H((float)a + (float)b); } \
  static inline H operator-(H a, H b) { return H((float)a - (float)b); } \
  static inline H operator*(H a, H b) { return H((float)a * (float)b); } \
  static inline H operator/(H a, H b) { return H((float)a / (float)b); } \
  static inline H operator-(H a) { return H(-(float)a); } \
  static inline H& operator+=(H& a, H b) { a = a + b; return a; } \
  static inline H& operator-=(H& a, H b) { a = a - b; return a; } \
  static inline H& operator*=(H& a, H b) { a = a * b; return a; } \
  static inline H& operator/=(H& a, H b) { a = a / b; return a; } \
  static inline bool operator<(H a, H b) { return (float)a < (float)b; } \
  static inline bool operator>(H a, H b) { return (float)a > (float)b; } \
  static inline bool operator<=(H a, H b) { return (float)a <= (float)b; } \
  static inline bool operator>=(H a, H b) { return (float)a >= (float)b; } \
  static inline bool operator==(H a, H b) { return (float)a == (float)b; } \
  static inline bool operator!=(H a, H b) { return (float)a != (float)b; }
GPUDSL_HALF_OPS(__half)
GPUDSL_HALF_OPS(__nv_bfloat16)
static inline __half __hadd(__half a, __half b) { return a + b; }
static inline __half __hsub(__half a, __half b) { return a - b; }
static inline __half __hmul(__half a, __half b) { return a * b; }
static inline __half __hdiv(__half a, __half b) { return a / b; }
static inline __half __hfma(__half a, __half b, __half c) { return __half(fmaf((float)a, (float)b, (float)c)); }
// the bit casts of cuda_fp16.h / cuda_bf16.h (vector copies of halves move raw bits)
static inline unsigned short __half_as_ushort(__half h) { unsigned short u; memcpy(&u, &h, 2); return u; }
static inline __half __ushort_as_half(unsigned short u) { __half h; memcpy(&h, &u, 2); return h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 h; h.bits = u; return h; }
struct __attribute__((aligned(4))) __half2 { __half x, y; };
struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;
static inline __half2 __halves2half2(__half a, __half b) { __half2 r; r.x = a; r.y = b; return r; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { __nv_bfloat162 r; r.x = a; r.y = b; return r; }
static inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return make_float2((float)h.x, (float)h.y); }
static inline __half2 __float22half2_rn(float2 f) { return __halves2half2(__half(f.x), __half(f.y)); }
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __halves2bfloat162(__nv_bfloat16(f.x), __nv_bfloat16(f.y)); }

// ---------------------------------------------------------------- math
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
// glibc declares __expf & co. itself: use macros for CUDA's fast intrinsics.
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __powf(x, y) powf((x), (y))
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf((x), (s), (c))
static inline float __fdividef(float x, float y) { return x / y; }
static inline float fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fsub_rn(float x, float y) { return x - y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fdiv_rn(float x, float y) { return x / y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline double __dadd_rn(double x, double y) { return x + y; }
static inline double __dmul_rn(double x, double y) { return x * y; }
static inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

template <class A, class B>
static inline std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  return (T)b < (T)a ? (T)b : (T)a;
}
template <class A, class B>
static inline std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  return (T)a < (T)b ? (T)b : (T)a;
}
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline int umin(int a, int b) { return min(a, b); }
static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a < b ? b : a; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a < b ? b : a; }

// ---------------------------------------------------------------- integer and bit intrinsics
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
static inline int __mul24(int a, int b) { return a * b; }
static inline unsigned int __umul24(unsigned int a, unsigned int b) { return a * b; }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
template <class To, class From>
static inline To gpudsl_bitcast(From f) { static_assert(sizeof(To) == sizeof(From)); To t; memcpy(&t, &f, sizeof(To)); return t; }
static inline int __float_as_int(float f) { return gpudsl_bitcast<int>(f); }
static inline unsigned int __float_as_uint(float f) { return gpudsl_bitcast<unsigned int>(f); }
static inline float __int_as_float(int i) { return gpudsl_bitcast<float>(i); }
static inline float __uint_as_float(unsigned int i) { return gpudsl_bitcast<float>(i); }
static inline long long __double_as_longlong(double d) { return gpudsl_bitcast<long long>(d); }
static inline double __longlong_as_double(long long i) { return gpudsl_bitcast<double>(i); }
// float -> integer as the GPU's cvt: saturating at the limits; NaN gives 0 from f32 to a
// 32-bit integer, the minimum from f64 or to 64 bits (PTX ISA, cvt).  A plain C cast is
// undefined out of range (x86 gives the minimum).
template <class I>
static inline I gpudsl_cvt_sat(double r, bool nan_min) {
  const I lo = (I)((I)1 << (sizeof(I) * 8 - 1)), hi = (I)~lo;
  if (r != r) return nan_min ? lo : (I)0;
  if (r >= -(double)lo) return hi;
  if (r <= (double)lo) return lo;
  return (I)r;
}
static inline int __float2int_rn(float f) { return gpudsl_cvt_sat<int>(nearbyintf(f), false); }
static inline int __float2int_rz(float f) { return gpudsl_cvt_sat<int>(truncf(f), false); }
static inline int __float2int_rd(float f) { return gpudsl_cvt_sat<int>(floorf(f), false); }
static inline int __float2int_ru(float f) { return gpudsl_cvt_sat<int>(ceilf(f), false); }
static inline float __int2float_rn(int i) { return (float)i; }
static inline float __uint2float_rn(unsigned int i) { return (float)i; }
static inline long long __float2ll_rn(float f) { return gpudsl_cvt_sat<long long>(nearbyintf(f), true); }
static inline long long __float2ll_rz(float f) { return gpudsl_cvt_sat<long long>(truncf(f), true); }
static inline int __double2int_rn(double d) { return gpudsl_cvt_sat<int>(nearbyint(d), true); }
static inline int __double2int_rz(double d) { return gpudsl_cvt_sat<int>(trunc(d), true); }
static inline long long __double2ll_rz(double d) { return gpudsl_cvt_sat<long long>(trunc(d), true); }
static inline float __double2float_rn(double d) { return (float)d; }

template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }

static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#define __trap() gpudsl_emu::trap("__trap() called", __FILE__, __LINE__)
#define __brkpt() gpudsl_emu::trap("__brkpt() called", __FILE__, __LINE__)
static inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }
static inline void __nanosleep(unsigned) {}
static inline void __prof_trigger(int) {}
static inline void __assume(bool) {}
#define __builtin_assume(x) ((void)0)

// ---------------------------------------------------------------- atomics
// Real atomics (blocks may run on several OS threads), with exactly the overloads CUDA 13
// offers, so that code the emulator accepts also compiles with NVRTC.
#define GPUDSL_SEQ __ATOMIC_SEQ_CST
#define GPUDSL_AT_FETCH(name, op, T) \
  static inline T name(T* p, T v) { return __atomic_fetch_##op(p, v, GPUDSL_SEQ); }
#define GPUDSL_AT_EXCH(T) \
  static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, GPUDSL_SEQ); }
#define GPUDSL_AT_CAS(T) \
  static inline T atomicCAS(T* p, T cmp, T v) { \
    __atomic_compare_exchange_n(p, &cmp, v, false, GPUDSL_SEQ, GPUDSL_SEQ); return cmp; }
#define GPUDSL_AT_MINMAX(T) \
  static inline T atomicMin(T* p, T v) { \
    T old = __atomic_load_n(p, GPUDSL_SEQ); \
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, GPUDSL_SEQ, GPUDSL_SEQ)) {} \
    return old; } \
  static inline T atomicMax(T* p, T v) { \
    T old = __atomic_load_n(p, GPUDSL_SEQ); \
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, GPUDSL_SEQ, GPUDSL_SEQ)) {} \
    return old; }
#define GPUDSL_AT_BITS(T) GPUDSL_AT_FETCH(atomicAnd, and, T) GPUDSL_AT_FETCH(atomicOr, or, T) \
  GPUDSL_AT_FETCH(atomicXor, xor, T)
GPUDSL_AT_FETCH(atomicAdd, add, int)
GPUDSL_AT_FETCH(atomicAdd, add, unsigned int)
GPUDSL_AT_FETCH(atomicAdd, add, unsigned long long)
GPUDSL_AT_FETCH(atomicSub, sub, int)
GPUDSL_AT_FETCH(atomicSub, sub, unsigned int)
GPUDSL_AT_EXCH(int)
GPUDSL_AT_EXCH(unsigned int)
GPUDSL_AT_EXCH(unsigned long long)
GPUDSL_AT_CAS(int)
GPUDSL_AT_CAS(unsigned int)
GPUDSL_AT_CAS(unsigned long long)
GPUDSL_AT_CAS(unsigned short)
GPUDSL_AT_MINMAX(int)
GPUDSL_AT_MINMAX(unsigned int)
GPUDSL_AT_MINMAX(long long)
GPUDSL_AT_MINMAX(unsigned long long)
GPUDSL_AT_BITS(int)
GPUDSL_AT_BITS(unsigned int)
GPUDSL_AT_BITS(long long)
GPUDSL_AT_BITS(unsigned long long)
static inline unsigned int atomicInc(unsigned int* p, unsigned int lim) {
  unsigned int old = __atomic_load_n(p, GPUDSL_SEQ), nv;
  do { nv = old >= lim ? 0 : old + 1; } while (!__atomic_compare_exchange_n(p, &old, nv, true, GPUDSL_SEQ, GPUDSL_SEQ));
  return old; }
static inline unsigned int atomicDec(unsigned int* p, unsigned int lim) {
  unsigned int old = __atomic_load_n(p, GPUDSL_SEQ), nv;
  do { nv = (old == 0 || old > lim) ? lim : old - 1; } while (!__atomic_compare_exchange_n(p, &old, nv, true, GPUDSL_SEQ, GPUDSL_SEQ));
  return old; }
// Floating point atomics through compare-and-swap on the bit pattern.
template <class F, class Op>
static inline F gpudsl_atomic_fp(F* p, Op op) {
  using U = std::conditional_t<sizeof(F) == 4, uint32_t, std::conditional_t<sizeof(F) == 8, uint64_t, uint16_t>>;
  U* q = reinterpret_cast<U*>(p);
  U old = __atomic_load_n(q, GPUDSL_SEQ);
  for (;;) {
    F cur = gpudsl_bitcast<F>(old);
    U nv = gpudsl_bitcast<U>(op(cur));
    if (__atomic_compare_exchange_n(q, &old, nv, true, GPUDSL_SEQ, GPUDSL_SEQ)) return cur;
  }
}
static inline float atomicAdd(float* p, float v) { return gpudsl_atomic_fp(p, [v](float c) { return c + v; }); }
static inline double atomicAdd(double* p, double v) { return gpudsl_atomic_fp(p, [v](double c) { return c + v; }); }
static inline __half atomicAdd(__half* p, __half v) { return gpudsl_atomic_fp(p, [v](__half c) { return c + v; }); }
static inline float atomicExch(float* p, float v) { return gpudsl_atomic_fp(p, [v](float) { return v; }); }
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicMin_block atomicMin
#define atomicMax_block atomicMax
#define atomicExch_block atomicExch
#define atomicCAS_block atomicCAS

// ---------------------------------------------------------------- fibers and the scheduler
#include "gpudsl_emu_sched.h"

#define threadIdx (gpudsl_emu::self()->tid)
#define blockIdx (gpudsl_emu::self()->blk->block_idx)
#define blockDim (gpudsl_emu::self()->blk->block_dim)
#define gridDim (gpudsl_emu::self()->blk->grid_dim)
#define __syncthreads() gpudsl_emu::block_barrier(__FILE__, __LINE__, 0, 0)
#define __syncthreads_count(p) gpudsl_emu::block_barrier(__FILE__, __LINE__, 1, (p))
#define __syncthreads_and(p) gpudsl_emu::block_barrier(__FILE__, __LINE__, 2, (p))
#define __syncthreads_or(p) gpudsl_emu::block_barrier(__FILE__, __LINE__, 3, (p))
#define __syncwarp(...) gpudsl_emu::syncwarp(__FILE__, __LINE__, ##__VA_ARGS__)
// named barriers and mbarriers (the generated helpers use inline PTX on a GPU)
#define gpudsl_bar_sync(id, n) gpudsl_emu::named_barrier((id), (n), __FILE__, __LINE__)
#define gpudsl_mbar_init(p, n) gpudsl_emu::mbar_init((p), (n))
#define gpudsl_mbar_arrive(p) gpudsl_emu::mbar_arrive((p), __FILE__, __LINE__)
#define gpudsl_mbar_arrive_n(p, n) gpudsl_emu::mbar_arrive_n((p), (n), __FILE__, __LINE__)
// cp.async copies are plain copies here (landed already): nothing is left to track
#define gpudsl_cp_async_mbar_arrive(p) ((void)(p))
#define gpudsl_mbar_wait(p, par) gpudsl_emu::mbar_wait((p), (par), __FILE__, __LINE__)
#define gpudsl_sync_cluster() gpudsl_emu::sync_cluster(__FILE__, __LINE__)
#define gpudsl_mbar_arrive_cluster(p, q, n) gpudsl_emu::mbar_arrive_cluster((p), (q), (n), __FILE__, __LINE__)
#define gpudsl_mbar_wait_cluster(p, par) gpudsl_emu::mbar_wait_cluster((p), (par), __FILE__, __LINE__)
#define gpudsl_mbar_init_fence_cluster() ((void)0)

static inline unsigned int __activemask() { return gpudsl_emu::active_mask(); }
static inline unsigned int __lanemask_lt() { return (1u << gpudsl_emu::lane()) - 1u; }
template <class T> static inline T __shfl_sync(unsigned m, T v, int src, int w = 32) {
  int l = gpudsl_emu::lane();
  return gpudsl_emu::shfl(m, v, (l & ~(w - 1)) + (src & (w - 1)));
}
template <class T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) {
  int l = gpudsl_emu::lane(), s = l - (int)d;
  return gpudsl_emu::shfl(m, v, s < (l & ~(w - 1)) ? l : s);
}
template <class T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) {
  int l = gpudsl_emu::lane(), s = l + (int)d;
  return gpudsl_emu::shfl(m, v, s >= (l & ~(w - 1)) + w ? l : s);
}
template <class T> static inline T __shfl_xor_sync(unsigned m, T v, int x, int w = 32) {
  int l = gpudsl_emu::lane(), s = l ^ x;
  return gpudsl_emu::shfl(m, v, s >= (l & ~(w - 1)) + w ? l : s);
}
static inline unsigned int __ballot_sync(unsigned m, int p) { return gpudsl_emu::vote(m, p, gpudsl_emu::OP_BALLOT); }
static inline int __any_sync(unsigned m, int p) { return gpudsl_emu::vote(m, p, gpudsl_emu::OP_BALLOT) != 0; }
static inline int __all_sync(unsigned m, int p) { return gpudsl_emu::vote(m, p, gpudsl_emu::OP_ALL) != 0; }
static inline unsigned int __reduce_add_sync(unsigned m, unsigned v) { return gpudsl_emu::vote(m, v, gpudsl_emu::OP_ADD); }
static inline unsigned int __reduce_min_sync(unsigned m, unsigned v) { return gpudsl_emu::vote(m, v, gpudsl_emu::OP_UMIN); }
static inline unsigned int __reduce_max_sync(unsigned m, unsigned v) { return gpudsl_emu::vote(m, v, gpudsl_emu::OP_UMAX); }
// the signed overloads (CUDA has both): min/max on the order-preserving flip of the sign bit
static inline int __reduce_add_sync(unsigned m, int v) { return (int)__reduce_add_sync(m, (unsigned)v); }
static inline int __reduce_min_sync(unsigned m, int v) { return (int)(__reduce_min_sync(m, (unsigned)v ^ 0x80000000u) ^ 0x80000000u); }
static inline int __reduce_max_sync(unsigned m, int v) { return (int)(__reduce_max_sync(m, (unsigned)v ^ 0x80000000u) ^ 0x80000000u); }

// ---------------------------------------------------------------- printf
// Kernel printf (compile(..., trace=...) emits it) is written into a buffer that Python takes
// after each launch (gpudsl_emu_take_output) and prints on sys.stdout, which a notebook shows
// (it does not show the C stdout).  One mutex keeps lines from several workers whole; at most
// GPUDSL_EMU_OUTPUT_MAX bytes are kept per launch, as CUDA's printf FIFO is bounded too.
#ifndef GPUDSL_EMU_OUTPUT_MAX
#define GPUDSL_EMU_OUTPUT_MAX (16u << 20)
#endif
namespace gpudsl_emu {
static std::mutex g_out_mu;
static std::string g_out;
static bool g_out_truncated = false;
}  // namespace gpudsl_emu
__attribute__((format(printf, 1, 2))) static int gpudsl_emu_printf(const char* fmt, ...) {
  char small[512];
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n > 0) {
    std::string big;
    if ((size_t)n >= sizeof small) {
      big.resize((size_t)n + 1);
      vsnprintf(big.data(), big.size(), fmt, ap2);
    }
    std::lock_guard<std::mutex> lock(gpudsl_emu::g_out_mu);
    if (gpudsl_emu::g_out.size() + (size_t)n <= GPUDSL_EMU_OUTPUT_MAX)
      gpudsl_emu::g_out.append(big.empty() ? small : big.data(), (size_t)n);
    else
      gpudsl_emu::g_out_truncated = true;
  }
  va_end(ap2);
  return n;
}
#define printf(...) gpudsl_emu_printf(__VA_ARGS__)

// What the kernels printed since the last call (the buffer is handed over and emptied).
GPUDSL_EXPORT const char* gpudsl_emu_take_output(unsigned long long* len) {
  static thread_local std::string taken;
  {
    std::lock_guard<std::mutex> lock(gpudsl_emu::g_out_mu);
    taken.swap(gpudsl_emu::g_out);
    gpudsl_emu::g_out.clear();
    if (gpudsl_emu::g_out_truncated) taken += "... (printf output truncated)\n";
    gpudsl_emu::g_out_truncated = false;
  }
  *len = taken.size();
  return taken.data();
}

#endif  // GPUDSL_EMU_H
