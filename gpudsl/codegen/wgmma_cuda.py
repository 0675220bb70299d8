"""CUDA for the warpgroup MMA (docs/hopper.md, meaning: :mod:`gpudsl.ir.wgmma_meaning`), sm_90a.

- ``wgmma(acc, a, b)``: one 64-bit shared-memory *matrix descriptor* per operand
  (``gpudsl_wgmma_make_desc``: start address, leading-dimension byte offset = the stride
  of the window's first range (the two 8-column halves of K), stride-dimension byte offset
  = 128 (8 rows of 16 bytes), no swizzle: the PTX ISA's canonical K-major layout
  ``((8, m), (8, 2)) : ((8, SBO), (1, LBO))`` in halves); of a ``[rows, 16]`` window of
  a tile swizzled with ``W`` bytes (rows of ``W`` bytes), the swizzle mode (layout type
  bits 62-63: 1 = 128B, 2 = 64B, 3 = 32B), SBO = ``8 * W`` (8 rows), LBO unused (1), the
  start address the row's (a multiple of the period ``8 * W``, proved) plus the window's
  column offset in bytes (CUTLASS's advance along K inside a swizzle atom); then
  ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16}`` with the thread's
  ``N / 2`` accumulator registers (``"+f"``), scale-d 1 (accumulate), no negation, both
  operands K-major (``imm-trans-a = imm-trans-b = 0``).
- Before the first wgmma of a run (consecutive wgmmas, or a ``seq`` loop of them, with
  no other statement between), ``wgmma.fence.sync.aligned``: it orders the registers the
  thread wrote (the accumulator) before the asynchronous accesses.
- Operands written through the generic proxy (stores, ``cp.async``) must be seen by the
  async proxy that wgmma reads with: the writers fence (``fence.proxy.async.shared::cta``)
  after their writes and before the barrier that orders them with the wgmma, as CUTLASS
  does: a thread loop that writes an array some wgmma of the kernel reads ends with the
  fence, and so does every ``async_wait`` of such a kernel (the copies land there).  A
  proved proc always has such a barrier: every element of ``a`` and ``b`` is read by
  several threads, so the writes stand in an earlier thread loop.
- ``wgmma_commit()``: ``wgmma.commit_group.sync.aligned``; ``wgmma_wait(n)``:
  ``wgmma.wait_group.sync.aligned n``; after ``wgmma_wait(0)`` an empty ``asm volatile``
  on every element of the kernel's accumulators in scope, so that the C compiler moves no
  read of them above the wait (CUTLASS's ``warpgroup_fence_operand``); after a wait that
  leaves groups in flight none (their registers are not to be touched; ptxas waits
  before a read of a register a pending wgmma defines).  At block level both run in the
  branch of the warps that issue wgmmas (:mod:`.warp_roles`).

The emulator (``GPUDSL_EMULATOR``) compiles the same calls: a descriptor there keeps the
start pointer and both byte offsets, and the wgmma is each thread's share of the product
computed from them in the canonical layout and the fragment's lane map (lane = the flat
thread index modulo 128), summed in f32 in order of k as the interpreter does; commit,
wait and the fences are nothing (a proved proc touches nothing in flight).  Compiling a
kernel holding wgmma for a GPU without sm_90a's features stops with ``#error``.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import AsyncCopy, Const, For, Interval, Wgmma, WgmmaCommit, WgmmaWait
from ..ir.visitor import walk
from ..ir.wgmma_meaning import (tf32_truncate_c, CORE, CORE_BYTES, core_of, intervals, is_swizzled_form, k_of,
                                mn_problem, operand_problem)
from .warp_roles import group_guard

PREFIX = "gpudsl_wgmma_m64n"

WGMMA_COMMON = r"""
// wgmma (docs/hopper.md): warpgroup MMA from shared memory, sm_90a
#if !defined(GPUDSL_EMULATOR) && defined(__CUDA_ARCH__)
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gpudsl: wgmma needs sm_90a (NVRTC --gpu-architecture=sm_90a)"
#endif
#define GPUDSL_WGMMA_PTX 1
#endif
#ifdef GPUDSL_EMULATOR
// w: a swizzled tile's width (0: none); col: the start's byte offset in its row
struct gpudsl_wgmma_desc { const unsigned char* p; unsigned lbo, sbo, w, col; };
#else
typedef unsigned long long gpudsl_wgmma_desc;
#endif
// a shared-memory matrix descriptor: no swizzle, offsets in bytes
__device__ __forceinline__ gpudsl_wgmma_desc gpudsl_wgmma_make_desc(const void* p, unsigned lbo,
                                                                   unsigned sbo) {
#ifdef GPUDSL_EMULATOR
  return gpudsl_wgmma_desc{(const unsigned char*)p, lbo, sbo, 0u, 0u};
#else
  unsigned a;
  a = (unsigned)__cvta_generic_to_shared(p);  // folded by ptxas (an asm is not)
  return (unsigned long long)((a & 0x3FFFFu) >> 4)
       | ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16)
       | ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32);
#endif
}
// a descriptor of a K-major operand in a tile swizzled with W bytes (rows of W bytes):
// row0 the first element of the window's first row at column 0 (a multiple of the
// pattern's period 8 * W in the tile), col the window's column offset in bytes; the start
// address is row0 + col (as CUTLASS advances a descriptor along K inside a swizzle atom),
// LBO unused (1), SBO = 8 rows of W bytes, layout type 1 (128B), 2 (64B), 3 (32B)
template <int W>
__device__ __forceinline__ gpudsl_wgmma_desc gpudsl_wgmma_make_desc_swz(const void* row0,
                                                                       unsigned col) {
#ifdef GPUDSL_EMULATOR
  return gpudsl_wgmma_desc{(const unsigned char*)row0, 1u, 8u * W, (unsigned)W, col};
#else
  unsigned a;
  a = (unsigned)__cvta_generic_to_shared(row0);  // folded by ptxas (an asm is not)
  a += col;
  const unsigned long long mode = W == 128 ? 1ull : W == 64 ? 2ull : 3ull;
  return (unsigned long long)((a & 0x3FFFFu) >> 4)
       | (1ull << 16)
       | ((unsigned long long)(((8u * W) & 0x3FFFFu) >> 4) << 32)
       | (mode << 62);
#endif
}
// a descriptor of an MN-major B operand (imm-trans-b = 1) in a tile swizzled with W bytes
// (rows of W bytes, N contiguous): start the first element (a multiple of the period
// 8 * W), LBO the bytes between blocks of W bytes of N, SBO = 8 rows of W bytes (the PTX
// ISA's ((T, W / 16, m), (8, k)) : ((1, T, LBO), (W / 16 T, SBO)))
template <int W>
__device__ __forceinline__ gpudsl_wgmma_desc gpudsl_wgmma_make_desc_mn(const void* p,
                                                                      unsigned lbo) {
#ifdef GPUDSL_EMULATOR
  return gpudsl_wgmma_desc{(const unsigned char*)p, lbo, 8u * W, (unsigned)W, 0u};
#else
  unsigned a;
  a = (unsigned)__cvta_generic_to_shared(p);  // folded by ptxas (an asm is not)
  const unsigned long long mode = W == 128 ? 1ull : W == 64 ? 2ull : 3ull;
  return (unsigned long long)((a & 0x3FFFFu) >> 4)
       | ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16)
       | ((unsigned long long)(((8u * W) & 0x3FFFFu) >> 4) << 32)
       | (mode << 62);
#endif
}
__device__ __forceinline__ void gpudsl_wgmma_fence() {
#ifdef GPUDSL_WGMMA_PTX
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void gpudsl_proxy_fence() {
#ifdef GPUDSL_WGMMA_PTX
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void gpudsl_wgmma_commit() {
#ifdef GPUDSL_WGMMA_PTX
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void gpudsl_wgmma_wait() {
#ifdef GPUDSL_WGMMA_PTX
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
#endif
}
// after a wait: the compiler may not move a read of an accumulator above it
__device__ __forceinline__ void gpudsl_reg_fence(float& r) {
#ifdef GPUDSL_WGMMA_PTX
  asm volatile("" : "+f"(r) :: "memory");
#endif
}
#ifdef GPUDSL_EMULATOR
// element (r, k) of an operand through its descriptor: the canonical layout at
// p + (k / c) * lbo + (r / 8) * sbo + (r % 8) * 16 + (k % c) * size (c = 16 / size: the
// elements of a 16-byte core-matrix row); a swizzled one's row-major offset
// (r / 8) * sbo + (r % 8) * w + col + size * k from the period-aligned row0, swizzled as
// gpudsl_swz does (the 16-byte chunk XOR the 128-byte line modulo w / 16)
template <class T>
static inline T gpudsl_wgmma_elem(const gpudsl_wgmma_desc& d, int r, int k) {
  const int c = 16 / (int)sizeof(T);
  if (!d.w)
    return *(const T*)(d.p + (k / c) * d.lbo + (r / 8) * d.sbo + (r % 8) * 16
                       + (k % c) * (int)sizeof(T));
  unsigned long long o = (unsigned long long)((r / 8) * d.sbo + (r % 8) * d.w + d.col + k * sizeof(T));
  o ^= ((o >> 7) & (unsigned long long)(d.w / 16 - 1)) << 4;
  return *(const T*)(d.p + o);
}
// element B[k, n] of an MN-major B operand (imm-trans-b = 1) through its descriptor: no
// swizzle, ((T, 1, m), (8, k)) : ((1, T, SBO), (T, LBO)) with T the elements of 16 bytes, at
// p + (n / T) * sbo + (n % T) * size + (k / 8) * lbo + (k % 8) * 16; swizzled with w bytes
// (rows of E = w / size elements), ((T, w / 16, m), (8, k)) : ((1, T, LBO), (E, SBO)): the
// offset (n / E) * lbo + (k / 8) * sbo + (k % 8) * w + (n % E) * size from the
// period-aligned start, swizzled as gpudsl_swz does
template <class T>
static inline T gpudsl_wgmma_elem_mn(const gpudsl_wgmma_desc& d, int n, int k) {
  const int sz = (int)sizeof(T);
  if (!d.w)
    return *(const T*)(d.p + (n / (16 / sz)) * d.sbo + (n % (16 / sz)) * sz + (k / 8) * d.lbo
                       + (k % 8) * 16);
  const int e = (int)d.w / sz;
  unsigned long long o = (unsigned long long)((n / e) * d.lbo + (k / 8) * d.sbo + (k % 8) * d.w
                                              + (n % e) * sz);
  o ^= ((o >> 7) & (unsigned long long)(d.w / 16 - 1)) << 4;
  return *(const T*)(d.p + o);
}
// an operand as the tensor cores read it: a half widened; an f32 as tf32, its low 13
// mantissa bits dropped, a NaN kept a NaN (gpudsl.ir.wgmma_meaning.tf32_truncate)
static inline float gpudsl_wgmma_in(__half x) { return (float)x; }
static inline float gpudsl_wgmma_in(__nv_bfloat16 x) { return (float)x; }
static inline float gpudsl_wgmma_in(float x) {
  unsigned u;
  __builtin_memcpy(&u, &x, 4);
  u = GPUDSL_TF32_BITS;
  __builtin_memcpy(&x, &u, 4);
  return x;
}
// one thread's share of D += A @ B (m64nNk16; k8 of f32 read as tf32), read through the
// descriptors (MN: B is MN-major, imm-trans-b = 1)
template <class T, bool MN = false>
static inline void gpudsl_wgmma_emu(float* const* d, int n, gpudsl_wgmma_desc da,
                                    gpudsl_wgmma_desc db) {
  const unsigned flat = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int lane = (int)(flat % 128u);
  for (int i = 0; i < n / 2; ++i) {
    const int r = 16 * (lane / 32) + (lane % 32) / 4 + 8 * ((i / 2) % 2);
    const int c = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    float s = *d[i];
    for (int k = 0; k < 32 / (int)sizeof(T); ++k) {
      const T a = gpudsl_wgmma_elem<T>(da, r, k);
      const T b = MN ? gpudsl_wgmma_elem_mn<T>(db, c, k) : gpudsl_wgmma_elem<T>(db, c, k);
      s += gpudsl_wgmma_in(a) * gpudsl_wgmma_in(b);
    }
    *d[i] = s;
  }
}
#endif
""".replace("GPUDSL_TF32_BITS", tf32_truncate_c("u"))


MN_SUFFIX = "_mn"


def helper_name(n: int, ty, b_major: str = "k") -> str:
    if ty.name == "f32":
        return f"{PREFIX}{n}k8_tf32"
    return f"{PREFIX}{n}k16_{ty.name}" + (MN_SUFFIX if b_major == "mn" else "")


def shape_helper(name: str) -> str:
    """The C text of ``gpudsl_wgmma_m64n<N>k16_<f16|bf16>[_mn]`` (``_mn``: B MN-major,
    ``imm-trans-b = 1``) or ``gpudsl_wgmma_m64n<N>k8_tf32`` (f32 operands read as tf32,
    both K-major: the tf32 form has no transpose immediates)."""
    mn = name.endswith(MN_SUFFIX)
    tail = name[len(PREFIX):len(name) - (len(MN_SUFFIX) if mn else 0)]
    n, ty = tail.split("k8_") if tail.endswith("k8_tf32") else tail.split("k16_")
    n = int(n)
    kdim, trans = (8, "") if ty == "tf32" else (16, f", 0, {int(mn)}")
    regs = n // 2
    params = ", ".join(f"float& d{i}" for i in range(regs))
    outs = ", ".join(f'"+f"(d{i})' for i in range(regs))
    dlist = ", ".join(f"%{i}" for i in range(regs))
    emu_t = {"f16": "__half", "bf16": "__nv_bfloat16", "tf32": "float"}[ty]
    ptrs = ", ".join(f"&d{i}" for i in range(regs))
    return (f"__device__ __forceinline__ void {name}(gpudsl_wgmma_desc da, gpudsl_wgmma_desc db, "
            f"{params}) {{\n"
            "#ifdef GPUDSL_WGMMA_PTX\n"
            f'  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 2}, 0;\\n"\n'
            f'               " wgmma.mma_async.sync.aligned.m64n{n}k{kdim}.f32.{ty}.{ty} '
            f'{{{dlist}}}, %{regs}, %{regs + 1}, p, 1, 1{trans};\\n}}\\n"\n'
            f"               : {outs}\n"
            f'               : "l"(da), "l"(db), "r"(1));\n'
            "#else\n"
            f"  float* const d[{regs}] = {{{ptrs}}};\n"
            f"  gpudsl_wgmma_emu<{emu_t}, {'true' if mn else 'false'}>(d, {n}, da, db);\n"
            "#endif\n"
            "}\n")


def _err(msg, loc, hint=None):
    return CompileError(msg, loc, hint)


def is_run(s) -> bool:
    """A wgmma, or a ``seq`` loop of nothing but runs."""
    if isinstance(s, Wgmma):
        return True
    return isinstance(s, For) and s.mapping is None and s.kind == "seq" and bool(s.body) \
        and all(is_run(x) for x in s.body)


def loop_fence(kw, s: For) -> bool:
    """Before a loop that is a run of wgmmas: the fences, once (True: emitted)."""
    if not getattr(kw, "wg_fenced", False) and is_run(s) and not is_run(getattr(kw, "prev", None)):
        _fences(kw, s.loc)
        return True
    return False


def _fences(kw, loc):
    kw.w.line("gpudsl_wgmma_fence();", loc)


def _descriptor(kw, w, s: Wgmma, rows: int) -> str:
    """``gpudsl_wgmma_make_desc(&first element, LBO, SBO)`` of operand window ``w`` (of a
    swizzled tile: ``gpudsl_wgmma_make_desc_swz<W>(&row start, column bytes)``)."""
    info = kw.lookup(w.name, s.loc)
    nbytes = w.ty.bits // 8
    last = int(info.shape[-1]) if info.shape else None
    if w is s.b and s.b_major == "mn":
        return _mn_descriptor(kw, w, s, info, nbytes, last)
    why = operand_problem(w, len(info.shape), last, nbytes, info.swizzle, rows)
    if why is not None or info.pointer:
        raise _err(f"the operand `{w.name}[...]` of wgmma is not a [2, {rows}, "
                   f"{core_of(nbytes)}] window of a plain SHARED tile nor a [{rows}, "
                   f"{k_of(nbytes)}] one of a swizzled tile here: "
                   f"{why or 'it is not a SHARED array'}",
                   s.loc, "pass whole SHARED arrays (or windows of them) to wgmma")
    first = tuple(p.lo if isinstance(p, Interval) else p.pt for p in w.idx)
    if is_swizzled_form(w):
        row0 = first[:-1] + (Const(0),)
        return (f"gpudsl_wgmma_make_desc_swz<{info.swizzle}>(&{kw.access(w.name, row0, s.loc)}, "
                f"(unsigned)({kw.expr(first[-1])}) * {nbytes}u)")
    k0 = intervals(w)[0][0]
    stride = 1
    for d in info.shape[k0 + 1:]:
        stride *= int(d)
    return (f"gpudsl_wgmma_make_desc(&{kw.access(w.name, first, s.loc)}, "
            f"{stride * nbytes}u, {8 * CORE_BYTES}u)")


def _mn_descriptor(kw, w, s: Wgmma, info, nbytes: int, last) -> str:
    """The descriptor of an MN-major B window ``[N // E, 16, E]`` (or ``[16, E]``): its
    first element; LBO the bytes between two k8 row groups (8 rows of 16 bytes) of a plain
    tile, between two blocks of E columns of a swizzled one; SBO the other."""
    why = mn_problem(w, len(info.shape), last, nbytes, info.swizzle, s.n)
    if why is not None or info.pointer:
        raise _err(f"the MN-major B operand `{w.name}[...]` of wgmma is not a window in a "
                   f"layout the hardware reads here: {why or 'it is not a SHARED array'}",
                   s.loc, "pass SHARED tiles (or windows of them) to wgmma")
    first = tuple(p.lo if isinstance(p, Interval) else p.pt for p in w.idx)
    row = int(info.shape[-1]) * nbytes                  # bytes of one row (E elements)
    block = (int(info.shape[-2]) * row) if len(intervals(w)) == 3 else 8 * row * 2
    at = f"&{kw.access(w.name, first, s.loc)}"
    if info.swizzle:
        return f"gpudsl_wgmma_make_desc_mn<{info.swizzle}>({at}, {block}u)"
    return f"gpudsl_wgmma_make_desc({at}, {8 * CORE_BYTES}u, {block}u)"


def _acc_elements(kw, s: Wgmma) -> list:
    (k, iv), = intervals(s.acc)
    out = []
    for i in range(s.n // 2):
        idx = list(p.pt if not isinstance(p, Interval) else p for p in s.acc.idx)
        lo = iv.lo
        idx[k] = Const(i) if isinstance(lo, Const) and lo.val == 0 else \
            _plus(lo, i)
        out.append(kw.access(s.acc.name, tuple(idx), s.loc))
    return out


def _plus(e, i):
    from ..ir.nodes import BinOp
    from ..ir.types import INDEX

    if isinstance(e, Const):
        return Const(e.val + i)
    return BinOp("+", e, Const(i), INDEX) if i else e


def emit_wgmma(kw, s, level: str) -> None:
    """One wgmma statement into the kernel writer ``kw`` (at ``level``)."""
    kw.use_helper("gpudsl_wgmma")
    w = kw.w
    guard = group_guard(kw, level)
    if isinstance(s, WgmmaCommit):
        w.line(f"{guard}gpudsl_wgmma_commit();", s.loc)
        return
    if isinstance(s, WgmmaWait):
        if s.depth:   # groups stay in flight: their registers are not to be touched
            w.line(f"{guard}gpudsl_wgmma_wait<{s.depth}>();", s.loc)
            return
        w.line(f"{guard}{{" if guard else "{", s.loc)
        w.indent += 1
        w.line("gpudsl_wgmma_wait<0>();", s.loc)
        _register_fences(kw, s.loc)
        w.indent -= 1
        w.line("}")
        return
    assert isinstance(s, Wgmma)
    if level != "thread":
        raise _err("wgmma stands outside any @ THREADS loop: the 128 threads of a warpgroup "
                   "issue it", s.loc, "put it inside a THREADS loop of 128 threads")
    name = helper_name(s.n, s.a.ty, s.b_major)
    kw.use_helper(name)
    if not getattr(kw, "wg_fenced", False) and not is_run(getattr(kw, "prev", None)):
        _fences(kw, s.loc)
    da, db = _descriptor(kw, s.a, s, 64), _descriptor(kw, s.b, s, s.n)
    regs = _acc_elements(kw, s)
    w.line(f"{name}({da}, {db},", s.loc)
    for k in range(0, len(regs), 8):
        end = ");" if k + 8 >= len(regs) else ","
        w.line("    " + ", ".join(regs[k:k + 8]) + end)


def _register_fences(kw, loc) -> None:
    for name in sorted(getattr(kw, "wg_accs", ())):
        try:
            info = kw.lookup(name, loc)
        except CompileError:
            continue  # not in scope here (allocated in another thread loop)
        total = 1
        for d in info.shape:
            total *= int(d)
        first = info.cname + "[0]" * len(info.shape)
        kw.w.line("#pragma unroll")
        kw.w.line(f"for (int gpudsl_r = 0; gpudsl_r < {total}; gpudsl_r++) "
                  f"gpudsl_reg_fence((&{first})[gpudsl_r]);")


def scan_kernel(kw, body) -> None:
    """What the fences of a kernel need: its accumulators and the arrays its wgmmas read."""
    wg = [n for n in walk(body) if isinstance(n, Wgmma)]
    kw.wg_accs = {s.acc.name for s in wg}
    kw.wg_operands = {w.name for s in wg for w in (s.a, s.b)}
    # barriers that cp.async copies into wgmma operands complete on: the copies land
    # after the issuing thread's fence, so the waiting threads fence (wait_fence_bars)
    kw.wait_fence_bars = {n.bar for n in walk(body) if isinstance(n, AsyncCopy) and n.bar
                          and n.dst in kw.wg_operands}


def after_copies_fence(kw) -> None:
    """After an ``async_wait`` in a kernel whose wgmmas read SHARED arrays: the copies
    that landed were written through the generic proxy."""
    if getattr(kw, "wg_operands", None):
        kw.w.line("gpudsl_proxy_fence();  // the landed copies, seen by wgmma")


def writer_fence(kw, body) -> None:
    """At the end of a thread loop's body that writes an operand of the kernel's wgmmas."""
    from ..ir.inline import written_names

    ops = getattr(kw, "wg_operands", None)
    if ops and written_names(tuple(body), generic_only=True) & ops:
        kw.use_helper("gpudsl_wgmma")
        kw.w.line("gpudsl_proxy_fence();  // the generic proxy's writes, seen by wgmma")


__all__ = ["WGMMA_COMMON", "PREFIX", "helper_name", "shape_helper", "emit_wgmma",
           "loop_fence", "scan_kernel", "writer_fence", "after_copies_fence", "is_run"]
