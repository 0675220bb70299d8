"""The language reference (``docs/reference.md``), one entry per declared construct.

The keys that must have an entry come from the declarations the frontend parses by:
the scalar types (``ir.types.DTYPES``), the memories (``MEMORIES``), the loop mappings
(``MAPPINGS``), the loop functions, the statement and expression node classes of
``ir.nodes``, the builtins (``BUILTINS``) and the atomics (``ATOMIC_OPS``).
:func:`render` refuses to render while one of them has no entry, so a construct added
to the language without its documentation fails ``tests/test_language_reference.py``.
Each entry's example is a complete program (the renderer adds its imports); the page's
python blocks run as tests.

``python -m gpudsl.frontend.reference > docs/reference.md`` regenerates the page.
"""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

from ..ir import nodes as _nodes
from ..ir.nodes import ATOMIC_OPS, ATOMIC_TYPES, BUILTINS
from ..ir.types import DTYPES, MAPPINGS, MEMORIES
from .parser import _LOOP_FUNCS


@dataclass(frozen=True)
class Entry:
    section: str
    key: str
    title: str
    text: str
    example: str


SECTIONS = ("Types", "Memories", "Loops", "Statements", "Expressions", "Builtins",
            "Atomics", "Instructions")


def required_keys() -> dict[str, set[str]]:
    """section -> the keys the declarations of the language demand an entry for."""
    stmts = {c.__name__ for c in vars(_nodes).values()
             if inspect.isclass(c) and issubclass(c, _nodes.Stmt) and c is not _nodes.Stmt}
    exprs = {c.__name__ for c in vars(_nodes).values()
             if inspect.isclass(c) and issubclass(c, _nodes.Expr) and c is not _nodes.Expr}
    return {
        "Types": set(DTYPES) | {"size", "index", "tensor", "window"},
        "Memories": set(MEMORIES),
        "Loops": set(_LOOP_FUNCS) | set(MAPPINGS) | {"unroll", "blocks_per_sm", "group"},
        "Statements": stmts | {"assert", "scalar"},
        "Expressions": exprs | {"cast"},
        "Builtins": set(BUILTINS),
        "Atomics": set(ATOMIC_OPS),
        "Instructions": {"instr"},
    }


_E = Entry
ENTRIES: list[Entry] = [
    # ------------------------------------------------------------------ types
    _E("Types", "f32", "`f32`", "IEEE floats of 32 and 64 bits (`float`, `double`); "
       "numpy `float32` / `float64` arrays.", '''
@proc
def half_of(n: size, x: f64[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = f32(x[i] / 2.0)

x = np.arange(4, dtype=np.float64); y = np.zeros(4, np.float32)
gpudsl.interpret(half_of, x=x, y=y)
assert y.tolist() == [0.0, 0.5, 1.0, 1.5]
'''),
    _E("Types", "f64", "`f64`", "See `f32`: a 64-bit float, numpy `float64`.", '''
@proc
def total(n: size, x: f64[n], s: f64[1]):
    for i in seq(0, n):
        s[0] += x[i]

s = np.zeros(1)
gpudsl.interpret(total, x=np.full(10, 0.1), s=s)
assert abs(s[0] - 1.0) < 1e-12
'''),
    _E("Types", "f16", "`f16`", "A 16-bit IEEE float (`__half`), numpy `float16`. Arithmetic "
       "on it is done as written; mix it with `f32` through casts.", '''
@proc
def widen(n: size, x: f16[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = f32(x[i])

y = np.zeros(3, np.float32)
gpudsl.interpret(widen, x=np.array([1, 2, 3], np.float16), y=y)
assert y.tolist() == [1, 2, 3]
'''),
    _E("Types", "bf16", "`bf16`", "bfloat16 (`__nv_bfloat16`): host arrays are numpy "
       "arrays of `ml_dtypes.bfloat16` (a dependency, as in JAX), device arrays PyTorch's "
       "`torch.bfloat16`. Arithmetic rounds each result to bfloat16 (to nearest even), "
       "like `f16`.", '''
import ml_dtypes

@proc
def to_bf16(n: size, x: f32[n, 32], y: bf16[n, 32]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[b, t] = bf16(x[b, t])

assert to_bf16.check().ok
y = np.zeros((1, 32), ml_dtypes.bfloat16)
gpudsl.interpret(to_bf16, x=np.full((1, 32), 1 + 2 ** -9, np.float32), y=y)
assert float(y[0, 0]) == 1.0
'''),
    _E("Types", "i32", "`i32`", "Signed integers of 32 and 64 bits, numpy `int32` / "
       "`int64`. i32 arithmetic wraps around as in two's complement.", '''
@proc
def count_odd(n: size, x: i32[n], c: i64[1]):
    for i in seq(0, n):
        if x[i] % 2 == 1:
            c[0] += 1

c = np.zeros(1, np.int64)
gpudsl.interpret(count_odd, x=np.arange(7, dtype=np.int32), c=c)
assert c[0] == 3
'''),
    _E("Types", "i64", "`i64`", "See `i32`: a 64-bit signed integer, numpy `int64`.", '''
@proc
def big(x: i64[1]):
    x[0] = x[0] * 65536 * 65536

x = np.ones(1, np.int64)
gpudsl.interpret(big, x=x)
assert x[0] == 2 ** 32
'''),
    _E("Types", "bool", "`bool_` (spelled `bool` in printed procs)", "A truth value, numpy "
       "`bool`; comparisons have this type, and `select`, `if` and `and`/`or`/`not` take it.",
       '''
@proc
def positive(n: size, x: f32[n], pos: bool_[n]):
    for i in seq(0, n):
        pos[i] = x[i] > 0.0

pos = np.zeros(3, bool)
gpudsl.interpret(positive, x=np.array([-1, 0, 2], np.float32), pos=pos)
assert pos.tolist() == [False, False, True]
'''),
    _E("Types", "size", "`size`", "A positive integer known at launch: usable in shapes, "
       "loop bounds, indices and `assert` preconditions. A size used in a shape is taken "
       "from the array when not passed.", '''
@proc
def fill(n: size, x: f32[n]):
    assert n % 4 == 0
    for i in seq(0, n):
        x[i] = 1.0

x = np.zeros(8, np.float32)
gpudsl.interpret(fill, x=x)          # n = 8 from x's shape
assert x.sum() == 8
'''),
    _E("Types", "index", "`index`", "An integer parameter that may be zero or negative "
       "(an offset, a position); integer literals and loop variables have this type too.",
       '''
@proc
def shift(n: size, k: index, x: f32[n], y: f32[n]):
    assert 0 <= k and k < n
    for i in seq(0, n - k):
        y[i] = x[i + k]

y = np.zeros(4, np.float32)
gpudsl.interpret(shift, k=1, x=np.arange(4, dtype=np.float32), y=y)
assert y.tolist() == [1, 2, 3, 0]
'''),
    _E("Types", "tensor", "Tensors `f32[n, m]`", "A row-major array parameter of the given "
       "element type and shape, in `GLOBAL` memory unless annotated `@ CONST`. A tensor a "
       "proc writes never shares memory with another argument (refused at launch).", '''
@proc
def transpose(n: size, m: size, a: f32[n, m], b: f32[m, n]):
    for i in seq(0, n):
        for j in seq(0, m):
            b[j, i] = a[i, j]

a = np.arange(6, dtype=np.float32).reshape(2, 3); b = np.zeros((3, 2), np.float32)
gpudsl.interpret(transpose, a=a, b=b)
assert (b == a.T).all()
'''),
    _E("Types", "window", "Windows `[f32][4]`", "A view of part of a caller's array: a "
       "parameter `x: [f32][4] @ SHARED` accepts a window `s[t, 0:4]` (intervals `lo:hi` "
       "and fixed points); writes through it reach the caller's array.", '''
@proc
def zero4(x: [f32][4]):
    for i in seq(0, 4):
        x[i] = 0.0

@proc
def zero_rows(n: size, a: f32[n, 8]):
    for r in seq(0, n):
        zero4(a[r, 2:6])

a = np.ones((2, 8), np.float32)
gpudsl.interpret(zero_rows, a=a)
assert a.sum() == 8 and a[0, 2:6].sum() == 0
'''),
    # ------------------------------------------------------------------ memories
    _E("Memories", "GLOBAL", "`GLOBAL`", "Device memory, the home of tensor parameters; an "
       "allocation outside every `BLOCKS` loop is `GLOBAL` by default (a temporary of the "
       "launch sequence).", '''
@proc
def two_steps(n: size, x: f32[n], y: f32[n]):
    t: f32[n] @ GLOBAL
    for i in par(0, n) @ BLOCKS:
        t[i] = x[i] * 2.0
    for i in par(0, n) @ BLOCKS:
        y[i] = t[i] + 1.0

y = np.zeros(4, np.float32)
gpudsl.interpret(two_steps, x=np.ones(4, np.float32), y=y)
assert y.tolist() == [3, 3, 3, 3]
'''),
    _E("Memories", "SHARED", "`SHARED`", "One copy per block, shared by its threads; "
       "allocated at block level (inside `BLOCKS`, outside `THREADS` loops). Threads "
       "exchange values through it across a `sync()`.", '''
@proc
def reverse32(x: f32[32], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 32) @ THREADS:
            y[t] = s[31 - t]

y = np.zeros(32, np.float32)
gpudsl.interpret(reverse32, x=np.arange(32, dtype=np.float32), y=y)
assert y[0] == 31
assert reverse32.check().ok
'''),
    _E("Memories", "swizzle", "`SHARED(swizzle=128)`", "A SHARED tile stored swizzled "
       "(32, 64 or 128 bytes: the layout TMA and wgmma read): each 16-byte chunk of a row "
       "moves inside its 32/64/128-byte segment (XOR with the row's 128-byte line index); "
       "`tma_load`/`tma_store` boxes and `wgmma` operands may be swizzled tiles. "
       "Only addresses change, never meaning; rows must be a multiple of the width in "
       "bytes. The performance report shows the bank conflicts it removes. See "
       "[Hopper](hopper.md#swizzled-shared-tiles).", '''
@proc
def transpose32(x: f32[32, 32], y: f32[32, 32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32, 32] @ SHARED(swizzle=128)
        for t in par(0, 32) @ THREADS:
            for j in seq(0, 32):
                s[t, j] = x[j, t]               # a column of the tile per warp step
        sync()
        for t in par(0, 32) @ THREADS:
            for j in seq(0, 32):
                y[j, t] = s[j, t]

assert transpose32.check().ok
x = np.arange(1024, dtype=np.float32).reshape(32, 32)
y = np.zeros_like(x)
transpose32.compile("emulator")(x=x, y=y)
assert (y == x.T).all()
'''),
    _E("Memories", "REGISTER", "`REGISTER`", "Private to one thread (the default inside a "
       "`BLOCKS` loop). A register array allocated at block level has one element row per "
       "thread: each thread indexes it by its own thread variable.", '''
@proc
def square(n: size, x: f32[n], y: f32[n]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            r: f32[1] @ REGISTER
            r[0] = x[32 * b + t]
            y[32 * b + t] = r[0] * r[0]

y = np.zeros(64, np.float32)
gpudsl.interpret(square, x=np.full(64, 3, np.float32), y=y)
assert (y == 9).all() and square.check().ok
'''),
    _E("Memories", "CONST", "`CONST`", "A read-only tensor parameter (`x: f32[n] @ CONST`, "
       "emitted `const __restrict__`); a write to it is refused. Read-only arguments may "
       "alias each other.", '''
@proc
def scale(n: size, w: f32[n] @ CONST, x: f32[n]):
    for i in par(0, n) @ BLOCKS:
        x[i] = w[i] * x[i]

x = np.ones(4, np.float32)
gpudsl.interpret(scale, w=np.arange(4, dtype=np.float32), x=x)
assert x.tolist() == [0, 1, 2, 3]
'''),
    # ------------------------------------------------------------------ loops
    _E("Loops", "seq", "`seq(lo, hi)`, `seq(hi)`", "A sequential loop over `lo <= i < hi` "
       "(`seq(hi)` starts at 0). Inside a kernel each thread runs it.", '''
@proc
def prefix_sum(n: size, x: f32[n]):
    for i in seq(1, n):
        x[i] += x[i - 1]

x = np.ones(5, np.float32)
gpudsl.interpret(prefix_sum, x=x)
assert x.tolist() == [1, 2, 3, 4, 5]
'''),
    _E("Loops", "range", "`range(lo, hi)`, `range(hi)`", "The same as `seq`.", '''
@proc
def iota(n: size, x: i32[n]):
    for i in range(n):
        x[i] = i32(i)

x = np.zeros(4, np.int32)
gpudsl.interpret(iota, x=x)
assert x.tolist() == [0, 1, 2, 3]
'''),
    _E("Loops", "par", "`par(lo, hi)`", "A loop whose iterations may run at the same "
       "time; `check()` proves that they are independent. Unmapped, it is interpreted "
       "and checked but must be mapped (`@ BLOCKS` / `@ THREADS`, or the "
       "`parallelize_loop` primitive) before code generation.", '''
@proc
def double(n: size, x: f32[n]):
    for i in par(0, n):
        x[i] = 2.0 * x[i]

x = np.ones(3, np.float32)
gpudsl.interpret(double, x=x)
assert x.tolist() == [2, 2, 2] and double.check().ok
'''),
    _E("Loops", "BLOCKS", "`par(lo, hi) @ BLOCKS`", "Iterations are thread blocks. Each "
       "outermost `BLOCKS` nest is one kernel launch; up to three nested `BLOCKS` loops map "
       "to `blockIdx.z/y/x` (the innermost to `x`).", '''
@proc
def add_rows(n: size, a: f32[n, 64], b: f32[n, 64]):
    for r in par(0, n) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            b[r, t] = a[r, t] + b[r, t]

assert add_rows.check().ok
print(add_rows.cuda_source(n=4))
'''),
    _E("Loops", "THREADS", "`par(lo, hi) @ THREADS`", "Iterations are the threads of a "
       "block (`threadIdx`, up to three nested loops as for `BLOCKS`). Between a `BLOCKS` "
       "loop and its `THREADS` loops (\"block level\") stand only allocations, `sync()`, "
       "uniform `seq` loops and `if`s.", '''
@proc
def tile(n: size, x: f32[n, 16, 8]):
    for b in par(0, n) @ BLOCKS:
        for ty in par(0, 16) @ THREADS:
            for tx in par(0, 8) @ THREADS:   # threadIdx.x; ty is threadIdx.y
                x[b, ty, tx] = 1.0

assert tile.check().ok
'''),
    _E("Loops", "CLUSTERS", "`par(0, c) @ CLUSTERS`", "The innermost loop of a kernel's "
       "`BLOCKS` nest, `c` a constant from 1 to 8: its iterations are the `c` blocks of one "
       "thread block cluster (the loop variable is the block's rank in it; the `BLOCKS` loops "
       "around count clusters). Without `sync_cluster()` it means what `@ BLOCKS` means. It "
       "is the grid's `x` dimension, the kernel is declared `__cluster_dims__(c, 1, 1)`; the "
       "`parallelize_loop` primitive maps a loop to `CLUSTERS`. "
       "`check()` needs a target with clusters (`target=\"sm_90a\"`; kind `target` "
       "elsewhere). See [Hopper](hopper.md#clusters).", '''
@proc
def pairs(x: f32[512], y: f32[512]):
    for b in par(0, 2) @ BLOCKS:              # 2 clusters
        for r in par(0, 2) @ CLUSTERS:        # of 2 blocks each
            for t in par(0, 128) @ THREADS:
                y[b * 256 + r * 128 + t] = x[b * 256 + r * 128 + t] + 1.0

assert pairs.check(target="sm_90a").ok
assert pairs.check().kinds() == {"target"}    # gpudsl's sm_90 has no clusters
assert "__cluster_dims__(2, 1, 1)" in pairs.cuda_source()
'''),
    _E("Loops", "unroll", "`seq(lo, hi, unroll=True)`", "Asks code generation for "
       "`#pragma unroll` (the `set_unroll` primitive sets it on an existing loop). It "
       "does not change the meaning.", '''
@proc
def dot4(a: f32[4], b: f32[4], c: f32[1]):
    for i in seq(0, 4, unroll=True):
        c[0] += a[i] * b[i]

c = np.zeros(1, np.float32)
gpudsl.interpret(dot4, a=np.ones(4, np.float32), b=np.full(4, 2, np.float32), c=c)
assert c[0] == 8
'''),
    _E("Loops", "blocks_per_sm", "`par(lo, hi, blocks_per_sm=k) @ BLOCKS`", "On the "
       "outermost `BLOCKS` loop of a kernel: asks for `k` resident blocks per "
       "multiprocessor (`__launch_bounds__(threads, k)`, which limits registers). The "
       "`set_blocks_per_sm` primitive sets it.", '''
@proc
def copy(n: size, x: f32[n, 128], y: f32[n, 128]):
    for b in par(0, n, blocks_per_sm=4) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            y[b, t] = x[b, t]

assert "__launch_bounds__(128, 4)" in copy.cuda_source(n=2)
'''),
    _E("Loops", "group", "`par(lo, hi, group=G) @ BLOCKS`", "On a `BLOCKS` loop whose "
       "only statement is a `BLOCKS` loop: the two share one linear block index "
       "(`blockIdx.x`), walked in groups of `G` of the outer loop's iterations (rows of "
       "tiles), column by column, so that the blocks running together share operand tiles "
       "in L2 (Triton's `GROUP_SIZE_M`). It does not change the meaning (`par` iterations "
       "are order-free). The `set_block_order` primitive sets it.", '''
@proc
def fill(m: size, n: size, x: f32[m, n, 32]):
    for bi in par(0, m, group=8) @ BLOCKS:
        for bj in par(0, n) @ BLOCKS:
            for t in par(0, 32) @ THREADS:
                x[bi, bj, t] = 1.0

assert "grouped block order" in fill.cuda_source(m=20, n=3)
assert fill.check().ok
'''),
    # ------------------------------------------------------------------ statements
    _E("Statements", "Assign", "Assignment `x[i] = e`", "Stores one element (a scalar "
       "local is assigned by name: `acc = e`). The value is converted to the element type "
       "where that loses nothing (an integer literal into a float); otherwise cast it.", '''
@proc
def put(x: f32[2]):
    x[0] = 1
    x[1] = x[0] + 0.5

x = np.zeros(2, np.float32)
gpudsl.interpret(put, x=x)
assert x.tolist() == [1, 1.5]
'''),
    _E("Statements", "Reduce", "Reduction `x[i] += e` (`-=`, `*=`)", "Read, combine, "
       "write. Different iterations of a `par` loop may not reduce into the same element "
       "(a race; use an atomic or a tree, see the [how-to pages](howto.md)).", '''
@proc
def row_sums(n: size, a: f32[n, 4], s: f32[n]):
    for i in par(0, n):
        s[i] = 0.0
        for j in seq(0, 4):
            s[i] += a[i, j]

s = np.zeros(2, np.float32)
gpudsl.interpret(row_sums, a=np.ones((2, 4), np.float32), s=s)
assert s.tolist() == [4, 4] and row_sums.check().ok
'''),
    _E("Statements", "Alloc", "Allocation `s: f32[4, 4] @ SHARED`", "A local array "
       "(`GLOBAL`, `SHARED` or `REGISTER`; the default is `REGISTER` inside a `BLOCKS` loop "
       "and `GLOBAL` outside). Its contents start undefined: read only what was written.",
       '''
@proc
def via_temp(x: f32[4], y: f32[4]):
    t: f32[4]
    for i in seq(0, 4):
        t[i] = x[i] + 1.0
    for i in seq(0, 4):
        y[i] = t[3 - i]

y = np.zeros(4, np.float32)
gpudsl.interpret(via_temp, x=np.arange(4, dtype=np.float32), y=y)
assert y.tolist() == [4, 3, 2, 1]
'''),
    _E("Statements", "scalar", "Scalar locals `acc: f32 = 0.0`", "A local scalar, with an "
       "optional initialiser; inside a kernel it is the thread's own (a register). It is "
       "read and assigned by name.", '''
@proc
def norm2(n: size, x: f32[n], out: f32[1]):
    acc: f32 = 0.0
    for i in seq(0, n):
        acc += x[i] * x[i]
    out[0] = sqrt(acc)

out = np.zeros(1, np.float32)
gpudsl.interpret(norm2, x=np.array([3, 4], np.float32), out=out)
assert out[0] == 5
'''),
    _E("Statements", "For", "Loops", "`for i in seq(...)`, `range(...)`, `par(...)`, "
       "`par(...) @ BLOCKS / THREADS`: see [Loops](#loops). A loop's bounds are integer "
       "expressions of sizes, indices and enclosing loop variables.", '''
@proc
def lower(n: size, a: f32[n, n]):
    for i in seq(0, n):
        for j in seq(0, i + 1):
            a[i, j] = 1.0

a = np.zeros((3, 3), np.float32)
gpudsl.interpret(lower, a=a)
assert a.sum() == 6
'''),
    _E("Statements", "If", "`if` / `elif` / `else`", "A condition of type `bool_`. Inside "
       "a kernel, a condition that differs between the threads of a block must not "
       "enclose a `sync()` (check() proves the barrier uniform).", '''
@proc
def clamp(n: size, x: f32[n]):
    for i in par(0, n):
        if x[i] < 0.0:
            x[i] = 0.0
        elif x[i] > 1.0:
            x[i] = 1.0
        else:
            pass

x = np.array([-1, 0.5, 2], np.float32)
gpudsl.interpret(clamp, x=x)
assert x.tolist() == [0, 0.5, 1]
'''),
    _E("Statements", "Sync", "`sync()`, `sync(lo, hi)`", "The block barrier "
       "(`__syncthreads()`): every thread of the block reaches it before any goes on. It "
       "stands at block level only, and all the block's threads must reach it. "
       "`sync(lo, hi)` (constants, multiples of 32) is a barrier of the threads whose flat "
       "index lies in `[lo, hi)` only (a named barrier, `bar.sync id, hi - lo`); the others "
       "pass it. See [synchronization](language.md#synchronization-beyond-the-block-barrier).",
       '''
@proc
def rotate(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[(t + 1) % 64]

assert rotate.check().ok

@proc
def handoff(x: f32[32], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:         # warp 0 writes
            s[t] = x[t]
        sync(0, 64)                             # warps 0 and 1 only
        for t in par(32, 64) @ THREADS:        # warp 1 reads
            y[t - 32] = s[63 - t]

assert handoff.check().ok
'''),
    _E("Statements", "Arrive", "`arrive(bar, lo, hi)`", "A split barrier's arrive: the "
       "threads `lo <= t < hi` signal the mbarrier `bar` (of the type `barrier`: `bar: barrier @ SHARED` "
       "at block level) and go on without waiting. Every arrive on one barrier names the "
       "same range (and the same `count=`); each completes one phase. "
       "`arrive(bar, lo, hi, count=c)`: each thread of the range stands for `c` arrivals "
       "(a constant, 1 to 2^20 - 1; the phase expects `(hi - lo) * c`), e.g. one elected "
       "thread arriving for its warp, `arrive(bar, 0, 1, count=32)`; its arrive orders only "
       "its own accesses. See [Hopper](hopper.md#copies-and-arrivals-on-a-barrier).", '''
@proc
def early(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        bar: barrier @ SHARED
        for i in seq(0, n):
            for t in par(0, 64) @ THREADS:
                s[i % 2, t] = x[i, t]
            arrive(bar, 0, 64)
            wait(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[i % 2, 63 - t]

assert early.check().ok
'''),
    _E("Statements", "Wait", "`wait(bar, lo, hi)`", "A split barrier's wait: a thread "
       "of `[lo, hi)` blocks until the phase of its next wait has completed (its k-th wait "
       "waits for phase k); accesses made before the arrives of that phase are then "
       "ordered before its accesses after the wait. A wait for a phase nobody completes "
       "is refused by `check()` (divergence).", '''
@proc
def late(n: size, x: f32[n, 64], y: f32[n, 64], z: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        bar: barrier @ SHARED
        for i in seq(0, n):
            for t in par(0, 64) @ THREADS:
                s[i % 2, t] = x[i, t]
            arrive(bar, 0, 64)
            for t in par(0, 64) @ THREADS:      # work between arrive and wait
                z[i, t] = x[i, t] * 2.0
            wait(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[i % 2, t]

assert late.check().ok
'''),
    _E("Statements", "BarrierRing", "`full: barrier[k] @ SHARED`, `arrive(full[e], lo, hi)`",
       "A ring of `k` split barriers (a constant, 1 to 32), allocated at block level; "
       "`arrive(full[e], lo, hi)` and `wait(full[e], lo, hi)` name one element with an "
       "index expression over sizes and loop variables (typically `i % k`), which `check()` "
       "proves in the ring. Each element keeps its own phases. See "
       "[barrier rings](hopper.md#barrier-rings).", '''
@proc
def ring(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[4, 32] @ SHARED
        full: barrier[4] @ SHARED
        empty: barrier[4] @ SHARED
        for j in seq(0, 4):
            arrive(empty[j], 32, 64)
        for i in seq(0, n):
            wait(empty[i % 4], 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 4, t] = x[i, t]
            arrive(full[i % 4], 0, 32)
            wait(full[i % 4], 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 4, t - 32] * 2.0
            arrive(empty[i % 4], 32, 64)

assert ring.check().ok
'''),
    _E("Statements", "AsyncCopy", "`async_copy(dst, src)`", "Inside a `@ THREADS` loop: "
       "the thread starts a copy of 4, 8 or 16 bytes (one element, or a window "
       "`s[i, j:j + n]` whose last index is a range of constant length) from a GLOBAL array "
       "to a SHARED array, and goes on. The copy lands at the `async_wait` that completes "
       "its group: until then its destination must not be read or written, nor its source "
       "written (an error in the interpreter, a race in `check()`), and other threads read "
       "it after a barrier that follows that wait. Both windows start at a multiple of the "
       "copy's length. `cp.async` on sm_80+, a plain copy elsewhere. See "
       "[asynchronous copies](async_copies.md). `async_copy(dst, src, bar=b)` (`b` a split "
       "barrier or ring element `b[e]`) joins no group: it lands, as a `tma_load` does, with "
       "the phase of `b` that the issuing thread's next arrive on `b` completes "
       "(`cp.async.mbarrier.arrive` after the copy); see "
       "[Hopper](hopper.md#copies-and-arrivals-on-a-barrier).", '''
@proc
def stage(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 16) @ THREADS:
            async_copy(s[4 * t:4 * t + 4], x[b, 4 * t:4 * t + 4])   # 16 bytes
        async_commit()
        async_wait(0)
        sync()
        for t in par(0, 64) @ THREADS:
            y[b, t] = s[63 - t]

assert stage.check().ok
x = np.arange(128, dtype=np.float32).reshape(2, 64)
y = np.zeros_like(x)
gpudsl.interpret(stage, x=x, y=y)
assert (y == x[:, ::-1]).all()
'''),
    _E("Statements", "AsyncCommit", "`async_commit()`", "Closes the thread's current group "
       "of async copies (at block level: every thread's). Groups are numbered in commit "
       "order; a copy after the last commit belongs to no group yet and no wait completes "
       "it.", '''
@proc
def two_groups(x: f32[2, 64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[0, t], x[0, t])
        async_commit()                          # group 0
        for t in par(0, 64) @ THREADS:
            async_copy(s[1, t], x[1, t])
        async_commit()                          # group 1
        async_wait(0)
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[0, t] + s[1, 63 - t]

assert two_groups.check().ok
'''),
    _E("Statements", "AsyncWait", "`async_wait(n)`", "The thread waits until at most `n` "
       "(a constant) of its committed groups are still in flight; the copies of every other "
       "group have landed. At block level every thread waits for its own copies: other "
       "threads' copies are visible after a `sync()` that follows. `async_wait(1)` leaves "
       "the most recent group in flight (double buffering).", '''
@proc
def rows(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[0, t], x[0, t])
        async_commit()
        for i in seq(0, n):
            if i + 1 < n:                       # the next row, into the other buffer
                for t in par(0, 64) @ THREADS:
                    async_copy(s[(i + 1) % 2, t], x[i + 1, t])
            async_commit()
            async_wait(1)                       # row i has landed, row i + 1 may not
            sync()
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[i % 2, 63 - t]
            sync()

assert rows.check().ok
'''),
    _E("Statements", "SetMaxNReg", "`setmaxnreg(n, lo, hi)`", "At block level: the "
       "warpgroups of the threads `[lo, hi)` (128 threads each, `lo` and `hi` multiples of "
       "128) own `n` registers per thread from here on (24 to 256, a multiple of 8): a "
       "producer warpgroup gives registers to the consumers. It places registers, never "
       "changes meaning. `check()` needs a target with the feature (`target=\"sm_90a\"`; "
       "kind `target` elsewhere) and proves the warpgroups' registers fit the block's. "
       "See [Hopper](hopper.md#setmaxnreg).", '''
@proc
def roles(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[256] @ SHARED
        setmaxnreg(40, 0, 128)                  # warpgroup 0: fewer registers
        setmaxnreg(232, 128, 384)               # warpgroups 1 and 2: more
        for t in par(0, 128) @ THREADS:
            s[t] = x[t]
            s[t + 128] = x[t + 128]
        sync()
        for t in par(128, 384) @ THREADS:
            y[t - 128] = s[383 - t] * 2.0

assert roles.check(target="sm_90a").ok
assert roles.check().kinds() == {"target"}    # sm_90 has no setmaxnreg
y = np.zeros(256, np.float32)
gpudsl.interpret(roles, x=np.arange(256, dtype=np.float32), y=y)
assert y[0] == 510.0
'''),
    _E("Statements", "SyncCluster", "`sync_cluster()`", "At block level inside a "
       "`@ CLUSTERS` loop: a barrier of every thread of every block of the cluster, which "
       "orders their accesses across it (GLOBAL memory included: a block reads what another "
       "block of its cluster wrote before the barrier). It is also a block barrier "
       "(`sync()`). Every block of a cluster must reach the same `sync_cluster()`s: "
       "`check()` proves the ifs and seq loops around it uniform over the cluster or "
       "refuses (kind `divergence`, with two ranks as witness). See "
       "[Hopper](hopper.md#clusters).", '''
@proc
def swap(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            for t in par(0, 128) @ THREADS:
                x[r * 128 + t] = 1.0 * r
            sync_cluster()                      # the partner's half is written
            for t in par(0, 128) @ THREADS:
                y[r * 128 + t] = x[(1 - r) * 128 + t]

assert swap.check(target="sm_90a").ok
y = np.zeros(256, np.float32)
gpudsl.interpret(swap, x=np.zeros(256, np.float32), y=y)
assert y[0] == 1.0 and y[128] == 0.0
'''),
    _E("Statements", "ClusterArrive", "`arrive(bar, lo, hi, cluster=True)`", "At block "
       "level inside a `@ CLUSTERS` loop: each thread of `[lo, hi)` arrives on `bar` (the "
       "same element of a ring) of every block of its cluster, its own included; a phase of "
       "each block's barrier then takes the arrivals of all `c` blocks, and a thread that "
       "waited for it (on its own block's barrier) is ordered after what every block's "
       "arriving threads did before their arrive (GLOBAL memory included). Every arrive on "
       "the barrier has `cluster=True`; every block makes the same arrives (`check()` proves "
       "the ifs and seq loops around them uniform); two consecutive arrives on one element "
       "need a `sync_cluster()` between them for `check()` to prove that no block arrives "
       "for the next phase before every block arrived for this one (`unknown` otherwise). "
       "Code: `mapa` and `mbarrier.arrive.release.cluster.shared::cluster`. See "
       "[Hopper](hopper.md#remote-arrives).", '''
@proc
def handoff(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            done: barrier @ SHARED
            for t in par(0, 128) @ THREADS:
                x[r * 128 + t] = 1.0 * r
            arrive(done, 0, 128, cluster=True)  # on both blocks' `done`
            wait(done, 0, 128)                  # both blocks have arrived
            for t in par(0, 128) @ THREADS:
                y[r * 128 + t] = x[(1 - r) * 128 + t]

assert handoff.check(target="sm_90a").ok
y = np.zeros(256, np.float32)
gpudsl.interpret(handoff, x=np.zeros(256, np.float32), y=y)
assert y[0] == 1.0 and y[128] == 0.0
'''),
    _E("Statements", "Wgmma", "`wgmma(acc, a, b)`", "Warpgroup MMA (sm_90a): inside a "
       "`@ THREADS` loop whose warpgroups (128 consecutive threads from a multiple of 128) "
       "issue it together, `acc += A @ B` for A 64 x 16 and B 16 x N (f16 or bf16, summed in "
       "f32; N a multiple of 8 up to 256). `acc` is the thread's N / 2 elements of the 64 x N "
       "accumulator, a window of one range of a REGISTER f32 array: element `i` of lane `l = "
       "t % 128` is D[16 (l // 32) + l % 32 // 4 + 8 (i // 2 % 2), 8 (i // 4) + 2 (l % 4) + "
       "i % 2], the PTX ISA's fragment. `a` is a SHARED `[2, 64, 8]` window with `a[h, m, j]` "
       "= A[m, 8 h + j], `b` a `[2, N, 8]` one with `b[h, n, j]` = B[8 h + j, n] (B stored N x "
       "K); or, from tiles `@ SHARED(swizzle=W)` with rows of exactly W bytes, `a` a `[64, 16]` "
       "window (`a_s[r0:r0 + 64, c0:c0 + 16]`, `a[m, kk]` = A[m, kk]) and `b` an `[N, 16]` one "
       "(`b[n, kk]` = B[kk, n]), `r0` at the swizzle's period and `c0` a multiple of 16 "
       "(proved). `wgmma(acc, a, b, b_major=\"mn\")` takes B stored K x N (N contiguous, the "
       "PTX ISA's transposed B): `b` a `[N // E, 16, E]` window (`b[c, kk, j]` = B[kk, E c + j]; "
       "`[16, N]` when N = E) whose last range is a whole row of E elements, 8 of a plain tile "
       "or W / 2 of a swizzled one, its rows at the swizzle's period (proved). f32 operands "
       "make the TF32 wgmma (m64nNk8, K-major only: windows `[2, rows, 4]` or `[rows, 8]`), "
       "each operand read as tf32 (its low 13 mantissa bits dropped). Asynchronous: "
       "the accumulator may not be touched, nor the operands written, until "
       "the `wgmma_wait` that completes its group. See [Hopper](hopper.md#warpgroup-mma-wgmma).",
       '''
@proc
def mma(a: f16[64, 16], bt: f16[8, 16], c: f32[64, 8]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 4] @ REGISTER
        a_s: f16[2, 64, 8] @ SHARED
        b_s: f16[2, 8, 8] @ SHARED
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 4):
                acc[t, i] = 0.0
            for j in seq(0, 8):
                a_s[t % 2, t // 2, j] = a[t // 2, 8 * (t % 2) + j]
            if t < 16:
                for j in seq(0, 8):
                    b_s[t % 2, t // 2, j] = bt[t // 2, 8 * (t % 2) + j]
        sync()
        for t in par(0, 128) @ THREADS:
            wgmma(acc[t, 0:4], a_s, b_s)
            wgmma_commit()
            wgmma_wait(0)
            for i in seq(0, 4):
                c[16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]

assert mma.check(target="sm_90a").ok
a = np.arange(64 * 16).reshape(64, 16) % 5; bt = np.arange(8 * 16).reshape(8, 16) % 3
c = np.zeros((64, 8), np.float32)
gpudsl.interpret(mma, a=a.astype(np.float16), bt=bt.astype(np.float16), c=c)
assert (c == a @ bt.T).all()
'''),
    _E("Statements", "WgmmaCommit", "`wgmma_commit()`", "Closes the current group of "
       "wgmmas (`wgmma.commit_group`); in the warpgroup's thread loop or at block level "
       "(every thread's). See `wgmma`.", '''
@proc
def two(a: f16[2, 64, 8], b: f16[2, 8, 8], c: f32[128, 4]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 4] @ REGISTER
        a_s: f16[2, 64, 8] @ SHARED
        b_s: f16[2, 8, 8] @ SHARED
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 4):
                acc[t, i] = 0.0
            for j in seq(0, 8):
                a_s[t % 2, t // 2, j] = a[t % 2, t // 2, j]
            if t < 16:
                for j in seq(0, 8):
                    b_s[t % 2, t // 2, j] = b[t % 2, t // 2, j]
        sync()
        for t in par(0, 128) @ THREADS:
            wgmma(acc[t, 0:4], a_s, b_s)
            wgmma(acc[t, 0:4], a_s, b_s)      # the same accumulator: no wait between
        wgmma_commit()                        # one group of two
        wgmma_wait(0)
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 4):
                c[t, i] = acc[t, i]

assert two.check(target="sm_90a").ok
'''),
    _E("Statements", "WgmmaWait", "`wgmma_wait(n)`", "Waits until at most `n` (a constant) "
       "committed wgmma groups are pending (`wgmma.wait_group n`); the others have landed. "
       "Reading the accumulator before the wait that completes its group is a race "
       "(`check()`) and an error (the interpreter).", '''
@proc
def early(a: f16[2, 64, 8], b: f16[2, 8, 8], c: f32[128, 4]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 4] @ REGISTER
        a_s: f16[2, 64, 8] @ SHARED
        b_s: f16[2, 8, 8] @ SHARED
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 4):
                acc[t, i] = 0.0
            for j in seq(0, 8):
                a_s[t % 2, t // 2, j] = a[t % 2, t // 2, j]
            if t < 16:
                for j in seq(0, 8):
                    b_s[t % 2, t // 2, j] = b[t % 2, t // 2, j]
        sync()
        for t in par(0, 128) @ THREADS:
            wgmma(acc[t, 0:4], a_s, b_s)
            wgmma_commit()
            c[t, 0] = acc[t, 0]               # before the wait: a race
            wgmma_wait(0)

d = early.check(target="sm_90a").diagnostics[0]
assert d.kind == "race" and "before the wgmma_wait" in d.message
'''),
    _E("Statements", "TmaLoad", "`tma_load(dst, src, bar=b)`", "Bulk tensor copy (TMA, "
       "sm_90a): inside a `@ THREADS` loop, the running thread starts a copy of the box `src` "
       "(a window of a GLOBAL array parameter naming every dimension: points and ranges of "
       "constant extent, at most 5 ranges of at most 256, the last range a multiple of 16 "
       "bytes; f16, bf16, f32, f64, i32 or i64) into `dst` (a contiguous SHARED window with "
       "the same extents). It completes on "
       "the split barrier `b` (or ring element `b[e]`): the copy lands when the phase that the "
       "issuing thread's next arrive on `b` completes has completed; a wait for that phase sees "
       "it. Box elements outside `src` land as zeros (clipped edges). Until it lands the "
       "destination may not be touched nor the source written (`check()`: race; the "
       "interpreter: error). `check()` also proves the issuer arrives after it, the source's "
       "rows are 16 bytes apart and the destination starts at a multiple of 128 bytes. A "
       "swizzled tile (`@ SHARED(swizzle=W)`) gets the tensor map's swizzle mode: the box's "
       "rows at most W bytes, the tile's side at a multiple of 8 W bytes. "
       "Lowered to `cp.async.bulk.tensor` with a tensor map the launch builds. See "
       "[Hopper](hopper.md#tma-loads).", '''
@proc
def tile(m: size, n: size, a: f16[m, n], y: f16[m, n]):
    assert n % 8 == 0
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        s: f16[16, 64] @ SHARED
        bar: barrier @ SHARED
        for t in par(0, 1) @ THREADS:
            tma_load(s[0:16, 0:64], a[16 * b:16 * b + 16, 0:64], bar=bar)
        arrive(bar, 0, 1)                    # the issuer's arrive: the copy lands with it
        wait(bar, 0, 64)
        for t in par(0, 64) @ THREADS:
            for r in seq(0, 16):
                if 16 * b + r < m and t < n:
                    y[16 * b + r, t] = s[r, t]

assert tile.check(target="sm_90a").ok
a = (np.arange(37 * 40).reshape(37, 40) % 50).astype(np.float16)
y = np.zeros_like(a)
gpudsl.interpret(tile, a=a, y=y)             # rows 37.. and columns 40.. clipped
assert (y == a).all()
'''),
    _E("Statements", "TmaStore", "`tma_store(dst, src)`", "Bulk tensor store (TMA, sm_90a): "
       "inside a `@ THREADS` loop, the running thread starts a copy of the contiguous SHARED "
       "tile `src` to the box `dst` of a GLOBAL array parameter (the box rules of `tma_load`); "
       "box elements outside the array are not written. The store joins the thread's open "
       "group (`tma_commit()` closes it) and lands at the `tma_wait(n)` that completes its "
       "group; until then its destination may not be touched nor its source written. The "
       "threads that wrote the tile fence it for the async proxy (codegen does), and a "
       "barrier orders their writes before the store. See [Hopper](hopper.md#tma-stores).", '''
@proc
def scale(m: size, x: f32[m, 32], y: f32[m, 32]):
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        s: f32[16, 32] @ SHARED
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                if 16 * b + r < m:
                    s[r, t] = 2.0 * x[16 * b + r, t]
        sync()
        for t in par(0, 1) @ THREADS:
            tma_store(y[16 * b:16 * b + 16, 0:32], s[0:16, 0:32])   # rows past m: not written
            tma_commit()
            tma_wait(0)

assert scale.check(target="sm_90a").ok
x = np.arange(37 * 32, dtype=np.float32).reshape(37, 32)
y = np.zeros_like(x)
gpudsl.interpret(scale, x=x, y=y)
assert (y == 2 * x).all()
'''),
    _E("Statements", "TmaCommit", "`tma_commit()`", "Closes the thread's open group of bulk "
       "tensor stores (`cp.async.bulk.commit_group`). See `tma_store`.", '''
@proc
def two(x: f32[16, 32], y: f32[32, 32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16, 32] @ SHARED
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                s[r, t] = x[r, t]
        sync()
        for t in par(0, 1) @ THREADS:
            tma_store(y[0:16, 0:32], s[0:16, 0:32])
            tma_store(y[16:32, 0:32], s[0:16, 0:32])
            tma_commit()                 # one group of two
            tma_wait(0)

assert two.check(target="sm_90a").ok
'''),
    _E("Statements", "TmaWait", "`tma_wait(n)`", "Waits until at most `n` (a constant) "
       "committed groups of bulk tensor stores are pending (`cp.async.bulk.wait_group n`); "
       "the others have landed. Writing a store's tile before the wait that completes its "
       "group is a race (`check()`) and an error (the interpreter).", '''
@proc
def early(x: f32[16, 32], y: f32[16, 32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16, 32] @ SHARED
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                s[r, t] = x[r, t]
        sync()
        for t in par(0, 1) @ THREADS:
            tma_store(y[0:16, 0:32], s[0:16, 0:32])
            tma_commit()
            s[0, 0] = 0.0                # the store may still read it: a race
            tma_wait(0)

assert "race" in early.check(target="sm_90a").kinds()
'''),
    _E("Statements", "Pass", "`pass`", "Does nothing. A string on its own line (or `...`) "
       "is a comment.", '''
@proc
def nothing(x: f32[1]):
    "a comment"
    pass

gpudsl.interpret(nothing, x=np.zeros(1, np.float32))
'''),
    _E("Statements", "Call", "Calls `f(n, x[0:4])`", "Calls a proc or an `@instr` with "
       "scalar expressions and windows of arrays. A call means its callee's body with the "
       "arguments substituted (the `inline` primitive makes that explicit).", '''
@proc
def axpy(n: size, a: f32, x: [f32][n], y: [f32][n]):
    for i in seq(0, n):
        y[i] += a * x[i]

@proc
def two_halves(x: f32[8], y: f32[8]):
    axpy(4, 2.0, x[0:4], y[0:4])
    axpy(4, 3.0, x[4:8], y[4:8])

y = np.zeros(8, np.float32)
gpudsl.interpret(two_halves, x=np.ones(8, np.float32), y=y)
assert y.tolist() == [2] * 4 + [3] * 4
'''),
    _E("Statements", "Atomic", "Atomics `atomic_add(x[i], e)`, `old = atomic_add(x[i], e)`",
       "One indivisible read-modify-write of an element of a `GLOBAL` or `SHARED` array; "
       "threads may update the same element at once. Assigned to a local scalar of the "
       "element's type, it also gives the old value. All ten are listed under "
       "[Atomics](#atomics).", '''
@proc
def take_ticket(n: size, counter: i32[1], ticket: i32[n]):
    assert n <= 256
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, n) @ THREADS:
            old: i32
            old = atomic_add(counter[0], 1)
            ticket[t] = old

counter = np.zeros(1, np.int32); ticket = np.zeros(4, np.int32)
gpudsl.interpret(take_ticket, counter=counter, ticket=ticket)
assert counter[0] == 4 and sorted(ticket) == [0, 1, 2, 3]
assert take_ticket.check().ok
'''),
    _E("Statements", "assert", "Preconditions `assert n % 32 == 0`", "At the top of a proc: "
       "facts about sizes and index parameters that `check()` assumes and every launch "
       "verifies (a launch that breaks one is a `LaunchError`).", '''
@proc
def blocks_of_32(n: size, x: f32[n]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            x[32 * b + t] = 0.0

assert blocks_of_32.check().ok
try:
    gpudsl.interpret(blocks_of_32, x=np.ones(33, np.float32))
except gpudsl.Error as e:
    print(e)
else:
    raise AssertionError("n = 33 accepted")
'''),
    # ------------------------------------------------------------------ expressions
    _E("Expressions", "Const", "Literals", "`1`, `-3` (integers: `index`, converted where "
       "needed), `0.5`, `1e-5` (floats: the type they meet), `True`, `False`.", '''
@proc
def lit(x: f32[2], k: i32[1], b: bool_[1]):
    x[0] = 0.5
    x[1] = 1e-3 * 2
    k[0] = -3
    b[0] = True

x = np.zeros(2, np.float32); k = np.zeros(1, np.int32); b = np.zeros(1, bool)
gpudsl.interpret(lit, x=x, k=k, b=b)
assert k[0] == -3 and b[0]
'''),
    _E("Expressions", "constexpr", "Python constants and generic procs",
       "A Python number, bool or dtype declared `constexpr` (`BLOCK = constexpr(256)` or "
       "`BLOCK: constexpr = 256`), or a variable of an enclosing function, may be named in a "
       "proc: it is the value it has when `@proc` runs, as if written in place (Triton's "
       "`tl.constexpr`). A plain module global is refused with a hint to declare it, so a typo "
       "never picks up an unrelated value. A dtype held so makes a proc generic: `x: T[n]`, "
       "`a: T`, `T(...)`. `inf` and `nan` are such constants (procs print infinities and "
       "NaNs with them).", '''
BLOCK = constexpr(64)
FLOOR: constexpr = -inf

@proc
def clamp(n: size, x: f32[n]):
    assert n % BLOCK == 0
    for b in par(0, n // BLOCK) @ BLOCKS:
        for t in par(0, BLOCK) @ THREADS:
            x[BLOCK * b + t] = max(x[BLOCK * b + t], FLOOR)

def scaled(T):                 # one proc per dtype, built by a factory
    @proc
    def scale(n: size, a: T, x: T[n]):
        for i in seq(0, n):
            x[i] = a * x[i] + T(1.0)
    return scale

x = np.array([np.nan, 1.0] * 64, np.float32)
gpudsl.interpret(clamp, x=x)
assert clamp.check().ok and x[1] == 1.0
h = np.ones(8, np.float16)
gpudsl.interpret(scaled(f16), a=2.0, x=h)
assert (h == 3).all() and "f16[n]" in str(scaled(f16))
'''),
    _E("Expressions", "Var", "Names", "A size, index or scalar parameter, a loop variable "
       "or a scalar local.", '''
@proc
def names(n: size, a: f32, x: f32[n]):
    s: f32 = a
    for i in seq(0, n):
        x[i] = s + f32(i)

x = np.zeros(3, np.float32)
gpudsl.interpret(names, a=1.0, x=x)
assert x.tolist() == [1, 2, 3]
'''),
    _E("Expressions", "Read", "Reads `x[i, j]`", "An element of an array; indices are "
       "integer expressions, and may read integer tensors (`x[begin[0] + i]`).", '''
@proc
def window_of(begin: i64[1], x: f32[8], y: f32[2]):
    for i in seq(0, 2):
        y[i] = x[begin[0] + i]

y = np.zeros(2, np.float32)
gpudsl.interpret(window_of, begin=np.array([5]), x=np.arange(8, dtype=np.float32), y=y)
assert y.tolist() == [5, 6]
'''),
    _E("Expressions", "BinOp", "Operators", "`+ - * /`; on integers floor division `//` "
       "and `%` (Python's meaning: rounded towards minus infinity), and the bitwise "
       "`& | ^ << >>` on non-negative integers; comparisons `< <= > >= == !=` (also "
       "chained); `and`, `or` on `bool_`. A shift amount outside `[0, width)` acts as "
       "the width, as on the GPU: `<<` gives 0 and `>>` the sign (-1 or 0), for "
       "`i32` (width 32) and `i64` (64); `index` shifts are exact, so there only a "
       "negative amount is such an edge.", '''
@proc
def ops(n: size, x: i32[n], y: i32[n], z: bool_[n], s: i32[n]):
    for i in seq(0, n):
        y[i] = (x[i] // 4) * 10 + (x[i] % 4) + ((x[i] & 1) << 8)
        z[i] = 0 < x[i] and x[i] <= 5
        s[i] = (x[i] << (x[i] - 40)) + (-x[i] >> 40)

x = np.array([5, 6], np.int32); y = np.zeros(2, np.int32); z = np.zeros(2, bool)
s = np.zeros(2, np.int32)
gpudsl.interpret(ops, x=x, y=y, z=z, s=s)
assert y.tolist() == [267, 12] and z.tolist() == [True, False]
assert s.tolist() == [-1, -1]  # << by a negative amount: 0; >> by 40: the sign
'''),
    _E("Expressions", "UnOp", "`-e`, `not c`", "Negation of a number, negation of a "
       "`bool_`.", '''
@proc
def neg(x: f32[1], b: bool_[1]):
    x[0] = -x[0]
    b[0] = not b[0]

x = np.ones(1, np.float32); b = np.zeros(1, bool)
gpudsl.interpret(neg, x=x, b=b)
assert x[0] == -1 and b[0]
'''),
    _E("Expressions", "Builtin", "Builtin calls", "`min`, `max`, `abs`, `exp`, `log`, "
       "`sqrt`, `tanh`, `select` and the casts: see [Builtins](#builtins). Only these "
       "can be called inside an expression (calls of procs are statements).", '''
@proc
def softplus(n: size, x: f32[n]):
    for i in seq(0, n):
        x[i] = log(1.0 + exp(x[i]))

x = np.zeros(1, np.float32)
gpudsl.interpret(softplus, x=x)
assert abs(x[0] - np.log(2)) < 1e-6
'''),
    _E("Expressions", "cast", "Casts `f32(m)`", "A scalar type called on one value converts "
       "it: `f32(i)`, `i32(x[i])`, `f16(...)`, `bf16(...)`, `f64(...)`, `i64(...)`. "
       "A float converts to `i32`/`i64` as on the GPU (`cvt.rzi`): towards zero, "
       "saturating at the type's limits (infinities too), NaN gives 0; a wider integer "
       "wraps. Mixing types otherwise is refused with the cast to write as hint.", '''
@proc
def mean(n: size, x: f32[n], m: f32[1], k: i32[4]):
    acc: f32 = 0.0
    for i in seq(0, n):
        acc += x[i]
    m[0] = acc / f32(n)
    for j in seq(0, 4):
        k[j] = i32(acc * f32(j - 1) * 1e9)

m = np.zeros(1, np.float32); k = np.zeros(4, np.int32)
gpudsl.interpret(mean, x=np.arange(5, dtype=np.float32), m=m, k=k)
assert m[0] == 2
assert k.tolist() == [-2 ** 31, 0, 2 ** 31 - 1, 2 ** 31 - 1]  # 10e9 saturates
'''),
    _E("Expressions", "Collective", "Warp collectives `warp_sum(v)`", "Inside a thread loop "
       "that covers whole warps, the 32 lanes of a warp evaluate the expression together, "
       "each on its own value: `shfl(v, lane)`, `shfl_xor(v, m)`, `shfl_down(v, d)`, "
       "`shfl_up(v, d)`, `ballot(c)` (an `i64` mask), `any_lanes(c)`, `all_lanes(c)`, "
       "`warp_sum(v)`, `warp_max(v)`, `warp_min(v)` (`__shfl*_sync`, `__ballot_sync`, "
       "`__reduce_*_sync` or a shuffle butterfly). `check()` refuses one under a "
       "lane-dependent condition. See [warp collectives](language.md#warp-collectives).",
       '''
@proc
def sums(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[b, t] = warp_sum(x[b, t]) + shfl_xor(x[b, t], 1) * 0.0

x = np.ones((2, 32), np.float32)
y = np.zeros_like(x)
gpudsl.interpret(sums, x=x, y=y)
assert (y == 32).all() and sums.check().ok
'''),
    _E("Expressions", "WindowArg", "Windows as arguments `x[r, 0:4]`", "In a call only: an "
       "array by name, or a window of it with points and intervals `lo:hi`; see Windows under "
       "[Types](#types).", '''
@proc
def set_row(m: size, row: [f32][m], v: f32):
    for j in seq(0, m):
        row[j] = v

@proc
def diag_rows(n: size, a: f32[n, n]):
    for i in seq(0, n):
        set_row(n, a[i, 0:n], f32(i))

a = np.zeros((3, 3), np.float32)
gpudsl.interpret(diag_rows, a=a)
assert a[:, 0].tolist() == [0, 1, 2]
'''),
    # ------------------------------------------------------------------ builtins
    _E("Builtins", "min", "`min(a, b)`", "The smaller of two numbers "
       "of one type (literals convert). On floats as the GPU's `min`: a NaN operand is "
       "ignored (two NaNs give NaN) and -0.0 < +0.0, whatever the order: "
       "`max(-0.0, 0.0)` is +0.0. A NaN's payload bits are not part of a result's "
       "meaning: in f16 and bf16 the GPU gives the canonical NaN (0x7fff), numpy keeps "
       "its operand's.", '''
@proc
def clip(n: size, x: f32[n]):
    for i in seq(0, n):
        x[i] = min(max(x[i], -1.0), 1.0)

x = np.array([-3, 0.5, 3], np.float32)
gpudsl.interpret(clip, x=x)
assert x.tolist() == [-1, 0.5, 1]
'''),
    _E("Builtins", "max", "`max(a, b)`", "See `min`.", '''
@proc
def relu(n: size, x: f32[n]):
    for i in par(0, n):
        x[i] = max(x[i], 0.0)

x = np.array([-1, 2, -0.0], np.float32)
gpudsl.interpret(relu, x=x)
assert x.tolist() == [0, 2, 0] and not np.signbit(x[2])  # max(-0.0, 0.0) is +0.0
'''),
    _E("Builtins", "abs", "`abs(a)`", "The absolute value, of the argument's type.", '''
@proc
def dist(a: i32[2], d: i32[1]):
    d[0] = abs(a[0] - a[1])

d = np.zeros(1, np.int32)
gpudsl.interpret(dist, a=np.array([2, 9], np.int32), d=d)
assert d[0] == 7
'''),
    _E("Builtins", "exp", "`exp(a)`", "On floats (`f16`, "
       "`bf16`, `f32`, `f64`; a literal becomes `f32`): `expf` in f32 (and `log`, `sqrt`, "
       "`tanh` alike). An integer argument is refused: cast it first (`sqrt(f32(n))`).", '''
@proc
def sigmoid(n: size, x: f32[n]):
    for i in seq(0, n):
        x[i] = 1.0 / (1.0 + exp(-x[i]))

x = np.array([0.0, 100.0], np.float32)
gpudsl.interpret(sigmoid, x=x)
assert x.tolist() == [0.5, 1.0]
'''),
    _E("Builtins", "log", "`log(a)`", "The natural logarithm; see `exp`.", '''
@proc
def logs(x: f32[1]):
    x[0] = log(x[0])

x = np.array([np.e], np.float32)
gpudsl.interpret(logs, x=x)
assert abs(x[0] - 1) < 1e-6
'''),
    _E("Builtins", "sqrt", "`sqrt(a)`", "The square root; see `exp`.", '''
@proc
def hyp(x: f32[2], h: f32[1]):
    h[0] = sqrt(x[0] * x[0] + x[1] * x[1])

h = np.zeros(1, np.float32)
gpudsl.interpret(hyp, x=np.array([6, 8], np.float32), h=h)
assert h[0] == 10
'''),
    _E("Builtins", "tanh", "`tanh(a)`", "The hyperbolic tangent; see `exp`.", '''
@proc
def squash(x: f32[1]):
    x[0] = tanh(x[0])   # GELU's tanh form: 0.5 * x * (1 + tanh(0.79788456 * (x + 0.044715 * x^3)))

x = np.array([100], np.float32)
gpudsl.interpret(squash, x=x)
assert x[0] == 1
'''),
    _E("Builtins", "sin", "`sin(a)`", "The sine of a float in radians (C's `sinf` in f32, "
       "`sin` in f64, halves through f32; CUDA's is within 2 ulp over its range, the "
       "interpreter computes numpy's). RoPE without host tables:", '''
@proc
def rope(n: size, x: f32[n, 2], pos: f32[n]):
    for i in seq(0, n):
        c: f32 = cos(pos[i])
        s: f32 = sin(pos[i])
        a: f32 = x[i, 0]
        x[i, 0] = a * c - x[i, 1] * s
        x[i, 1] = a * s + x[i, 1] * c

x = np.array([[1, 0], [1, 0]], np.float32)
gpudsl.interpret(rope, x=x, pos=np.array([0, np.pi / 2], np.float32))
assert np.allclose(x, [[1, 0], [0, 1]], atol=1e-6)
'''),
    _E("Builtins", "cos", "`cos(a)`", "The cosine; see `sin`.", '''
@proc
def cosines(x: f32[2]):
    x[0] = cos(x[0])
    x[1] = cos(x[1])

x = np.array([0, np.pi], np.float32)
gpudsl.interpret(cosines, x=x)
assert np.allclose(x, [1, -1])
'''),
    _E("Builtins", "erf", "`erf(a)`", "The error function (C's `erff`/`erf`; within 2 ulp "
       "on the GPU, the interpreter's is exact and rounded): GELU's exact form.", '''
@proc
def gelu(n: size, x: f32[n]):
    for i in seq(0, n):
        x[i] = 0.5 * x[i] * (1.0 + erf(x[i] * 0.70710678))

x = np.array([0, 10, -10], np.float32)
gpudsl.interpret(gelu, x=x)
assert x.tolist() == [0, 10, 0]
'''),
    _E("Builtins", "rsqrt", "`rsqrt(a)`", "`1 / sqrt(a)` (CUDA's `rsqrtf`, within 2 ulp; "
       "`rsqrt(0.0)` is `inf`, of a negative number NaN).", '''
@proc
def normalize(n: size, x: f32[n], ss: f32[1]):
    for i in seq(0, n):
        x[i] = x[i] * rsqrt(ss[0] + 1e-6)

x = np.array([3, 4], np.float32)
gpudsl.interpret(normalize, x=x, ss=np.array([25], np.float32))
assert np.allclose(x, [0.6, 0.8])
'''),
    _E("Builtins", "tf32", "`tf32(a)`", "An f32 read as TF32, as the tensor cores read a "
       "tf32 MMA's operand: its low 13 mantissa bits cleared (sign, exponent and 10 mantissa "
       "bits kept; a NaN stays a NaN, quieted; `gpudsl.ir.wgmma_meaning.tf32_truncate`). "
       "f32 to f32; a literal converts. "
       "`acc += tf32(a[..]) * tf32(b[..])` nests over f32 SHARED tiles are what `make_wgmma` "
       "turns into the TF32 wgmma (docs/hopper.md).", '''
@proc
def to_tf32(x: f32[2]):
    x[0] = tf32(x[0])
    x[1] = tf32(x[1])

x = np.array([1 + 2 ** -10, 1 + 2 ** -11], np.float32)
gpudsl.interpret(to_tf32, x=x)
assert x.tolist() == [1 + 2 ** -10, 1.0]
'''),
    _E("Builtins", "pow", "`a ** b`, `pow(a, b)`", "C's `pow` of floats (`powf` in f32; a "
       "literal converts; NaN for a negative base and a fractional power, `a ** 0.0 == 1`). "
       "Integer powers are refused: write the product.", '''
@proc
def powers(x: f32[3]):
    x[0] = x[0] ** 2.0
    x[1] = pow(x[1], 0.5)
    x[2] = 2.0 ** x[2]

x = np.array([3, 16, 10], np.float32)
gpudsl.interpret(powers, x=x)
assert x.tolist() == [9, 4, 1024]
'''),
    _E("Builtins", "select", "`select(c, a, b)`", "`a` where the condition `c` holds, else "
       "`b` (both evaluated; C's `c ? a : b`). Python's `a if c else b` is refused with "
       "this as hint.", '''
@proc
def sign(n: size, x: f32[n], s: f32[n]):
    for i in seq(0, n):
        s[i] = select(x[i] < 0.0, -1.0, 1.0)

s = np.zeros(2, np.float32)
gpudsl.interpret(sign, x=np.array([-2, 3], np.float32), s=s)
assert s.tolist() == [-1, 1]
'''),
]


def _atomic_entry(op: str, new: str, call: str, init: str, want: str, ty: str) -> Entry:
    types = ", ".join(f"`{t}`" for t in ATOMIC_TYPES[op])
    npty = {"i32": "np.int32", "f32": "np.float32"}[ty]
    example = f'''
@proc
def hit(n: size, x: {ty}[1], old_of_last: {ty}[1]):
    assert n <= 256
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, n) @ THREADS:
            old: {ty}
            old = {call}
            if t == n - 1:
                old_of_last[0] = old

x = np.array([{init}], {npty}); last = np.zeros(1, {npty})
gpudsl.interpret(hit, n=4, x=x, old_of_last=last)
assert x[0] == {want}, x
assert hit.check().ok
'''
    return Entry("Atomics", op, f"`atomic_{op}`",
                 f"New value: {new}. Element types: {types}.", example)


ENTRIES += [
    _atomic_entry("add", "`old + e`", "atomic_add(x[0], 2)", "0", "8", "i32"),
    _atomic_entry("sub", "`old - e`", "atomic_sub(x[0], 1.5)", "10", "4", "f32"),
    _atomic_entry("min", "`min(old, e)`", "atomic_min(x[0], 5 - i32(t))", "9", "2", "i32"),
    _atomic_entry("max", "`max(old, e)`", "atomic_max(x[0], i32(t) * 3)", "0", "9", "i32"),
    _atomic_entry("exch", "`e` (the old value is returned)", "atomic_exch(x[0], 7)", "1",
                  "7", "i32"),
    _atomic_entry("cas", "`e` where `old == compare`, else `old` "
                  "(`atomic_cas(x[i], compare, e)`)", "atomic_cas(x[0], i32(t), i32(t) + 1)",
                  "0", "4", "i32"),
    _atomic_entry("and", "`old & e`", "atomic_and(x[0], 14)", "7", "6", "i32"),
    _atomic_entry("or", "`old | e`", "atomic_or(x[0], 1 << t)", "0", "15", "i32"),
    _atomic_entry("xor", "`old ^ e`", "atomic_xor(x[0], 1)", "5", "5", "i32"),
    _atomic_entry("inc", "`0` where `old >= e`, else `old + 1` (CUDA's `atomicInc`, a "
                  "wrapping counter)", "atomic_inc(x[0], 2)", "0", "1", "i32"),
    Entry("Instructions", "instr", "`@instr(\"CUDA C template\")`",
          "A proc whose body is its meaning for the interpreter and the checker, and "
          "whose template code generation emits in place of a call (vector loads, "
          "intrinsics, inline PTX). It enters a schedule through the `replace` primitive "
          "or a direct call. Holes in the template: `{a}` a scalar argument's value; for an "
          "array or window argument `x`, `{x}` its first element (an lvalue), "
          "`{x_data}` that element's address and `{x_stride_k}` the stride of its k-th "
          "interval. `{{` and `}}` are braces.\n\n"
          "**The template is trusted.** `check()` proves the program as if the body ran, "
          "and the interpreter runs the body; the kernel runs the template. `check()`'s "
          "report names the templates a proc rests on (`report.trusted`), and "
          "`gpudsl.check_instr(instr)` runs template and body on the emulator on random "
          "inputs and compares them; test a warp-wide template on the GPU too.", '''
@instr("*(float4*){dst_data} = *(const float4*){src_data};")
def copy4(dst: [f32][4] @ GLOBAL, src: [f32][4] @ GLOBAL):
    for i in seq(0, 4):
        dst[i] = src[i]

@proc
def vec_copy(n: size, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            copy4(y[256 * b + 4 * t:256 * b + 4 * t + 4], x[256 * b + 4 * t:256 * b + 4 * t + 4])

y = np.zeros(256, np.float32)
gpudsl.interpret(vec_copy, x=np.arange(256, dtype=np.float32), y=y)   # runs the body
assert y[255] == 255 and vec_copy.check().ok
assert "*(float4*)&y[" in vec_copy.cuda_source(n=256)
assert gpudsl.check_instr(copy4).ok and vec_copy.check().trusted == ["copy4"]
'''),
]


def _imports(example: str) -> str:
    from ..language import __all__ as language_names

    public = set(language_names) | {"proc", "instr"}
    names = {n.id for n in ast.walk(ast.parse(example)) if isinstance(n, ast.Name)}
    used = sorted(names & public)
    lines = ["from __future__ import annotations", "import numpy as np", "import gpudsl"]
    if used:
        lines.append("from gpudsl import " + ", ".join(used))
    return "\n".join(lines)


def missing() -> list[str]:
    """``section: key`` of every declared construct without an entry."""
    have = {(e.section, e.key) for e in ENTRIES}
    return [f"{s}: {k}" for s, keys in required_keys().items() for k in sorted(keys)
            if (s, k) not in have]


def render() -> str:
    """``docs/reference.md``; refuses while a declared construct has no entry."""
    gaps = missing()
    if gaps:
        raise ValueError("the language reference has no entry for " + ", ".join(gaps) +
                         " (add one to ENTRIES in gpudsl/frontend/reference.py)")
    out = ["# Language reference", "",
           "<!-- generated by `python -m gpudsl.frontend.reference > docs/reference.md`;",
           "     do not edit: edit ENTRIES in gpudsl/frontend/reference.py -->", "",
           "Every type, memory, loop form, statement, expression, builtin and atomic of "
           "the language, each with a complete example (they run as tests). "
           "[The language](language.md) explains what a proc means; the "
           "[how-to pages](howto.md) show whole kernels.", ""]
    for section in SECTIONS:
        out += [f"## {section}", ""]
        seen = set()
        for e in ENTRIES:
            if e.section != section or e.title in seen:
                continue
            seen.add(e.title)
            example = e.example.strip("\n")
            out += [f"### {e.title}", "", e.text, "", "```python", _imports(example), "",
                    example, "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
