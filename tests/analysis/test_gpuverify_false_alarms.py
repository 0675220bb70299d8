"""GPUVerify's false alarms (issue 39): kernels of GPUVerify's test suite marked
``//pass`` that check() used to refuse, ported to gpudsl, each with a broken twin
that stays refused and whose race the detector (the interpreter) replays.

Sources: https://github.com/mc-imperial/gpuverify (commit 49219770, folder
``testsuite/``).  GPUVerify checks races and barrier divergence, not array bounds, so a
port that must also be in bounds says so where it adds a guard or an assert.  The
rules each rests on are in docs/decisions.md, "Issue 39: GPUVerify's false alarms"."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl

NS = vars(gpudsl)


def _p(src: str):
    return gpudsl.proc_from_source(src, namespace=NS)


def _race(p, **args):
    with pytest.raises(gpudsl.RaceError) as e:
        gpudsl.interpret(p, detect_races=True, **args)
    return e.value


def _refused(p, kind="race"):
    rep = p.check()
    assert kind in rep.kinds(), str(rep)
    return rep.of_kind(kind)[0]


# --------------------------------------------------------------------------------
# testsuite/CUDA/pointertests/test13/kernel.cu  (--blockDim=64 --gridDim=1)
#   int a; int* p; a = 0; p = &a; *p = threadIdx.x; glob[*p] = threadIdx.x;
# gpudsl has no pointers: ``*p = ...`` writes ``a``, so ``a`` is assigned twice.

PTR_TEST13 = '''
def ptr_test13(glob: i32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            a: i32
            a = {first}
            {second}
            glob[a] = t
'''


def test_ptr_test13_is_proved():
    p = _p(PTR_TEST13.format(first="0", second="a = t"))
    assert p.check().ok, str(p.check())
    glob = np.zeros(64, np.int32)
    gpudsl.interpret(p, detect_races=True, glob=glob)
    assert glob.tolist() == list(range(64))


@pytest.mark.parametrize("first, second", [
    ("t", "a = 0"),                    # the last assignment is in force: all write glob[0]
    ("t", "if t > 0:\n                a = 0"),   # a write nested in an if: unknown
])
def test_ptr_test13_twins_race(first, second):
    p = _p(PTR_TEST13.format(first=first, second=second))
    d = _refused(p)
    assert d.witness["array"] == "glob"
    _race(p, glob=np.zeros(64, np.int32))


# --------------------------------------------------------------------------------
# testsuite/CUDA/transitiveclosure/kernel.cu  (--blockDim=[8,8] --gridDim=[1,1])
# testsuite/OpenCL/transitiveclosuresimplified2/kernel.cl  (--local_size=[8,8])
# Thread (y, x) writes buf[y][x] in step k only when buf[y][x] == 0 and
# buf[y][k] != 0: for x == k those are one location, read twice with nothing
# between, so thread (y, k) never writes buf[y][k] (which the others read) in step k.

TC_CUDA = '''
def transitive_closure_stage1(passnum: index, graph: i32[64, 64]):
    assert passnum >= 0 and passnum < 8      # num_vertices / BLOCK_DIM (bounds)
    for b in par(0, 1) @ BLOCKS:
        buf: i32[8, 8] @ SHARED
        for ty in par(0, 8) @ THREADS:
            for tx in par(0, 8) @ THREADS:
                buf[ty, tx] = graph[passnum * 8 + ty, passnum * 8 + tx]
        sync()
        for k in seq(0, 8):
            for ty in par(0, 8) @ THREADS:
                for tx in par(0, 8) @ THREADS:
{body}
            {barrier}
        for ty in par(0, 8) @ THREADS:
            for tx in par(0, 8) @ THREADS:
                graph[passnum * 8 + ty, passnum * 8 + tx] = buf[ty, tx]
'''
TC_BODY = '''                    if buf[ty, tx] == 0:
                        if buf[ty, k] != 0 and buf[k, tx] != 0:
                            buf[ty, tx] = passnum * 8 + k + 2'''

# the flat form of the OpenCL kernel: _2D_ACCESS(A, y, x, 64) = A[y * 64 + x], and
# __requires(passnum >= 0); __requires(passnum < (1 << 12))
TC_SIMPLIFIED2 = '''
def transitive_closure_stage1(m: size, passnum: index, graph: i32[m]):
    assert passnum >= 0 and passnum < 4096
    assert m > (passnum * 8 + 7) * 64 + passnum * 8 + 7      # bounds
    for b in par(0, 1) @ BLOCKS:
        buf: i32[64] @ SHARED
        for ty in par(0, 8) @ THREADS:
            for tx in par(0, 8) @ THREADS:
                buf[ty * 8 + tx] = graph[(passnum * 8 + ty) * 64 + passnum * 8 + tx]
        sync()
        for k in seq(0, 8):
            for ty in par(0, 8) @ THREADS:
                for tx in par(0, 8) @ THREADS:
                    if buf[ty * 8 + tx] == 0:
                        if buf[ty * 8 + k] != 0 and buf[k * 8 + tx] != 0:
                            buf[ty * 8 + tx] = passnum * 8 + k + 2
            {barrier}
        for ty in par(0, 8) @ THREADS:
            for tx in par(0, 8) @ THREADS:
                graph[(passnum * 8 + ty) * 64 + passnum * 8 + tx] = buf[ty * 8 + tx]
'''


def _closure_reference(block, passnum):
    buf = block.copy()
    for k in range(8):
        hit = (buf == 0) & (buf[:, k:k + 1] != 0) & (buf[k:k + 1, :] != 0)
        buf[hit] = passnum * 8 + k + 2
    return buf


def _graph(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(size=(64, 64)) < 0.3).astype(np.int32)


def test_transitiveclosure_is_proved_and_computes_stage1():
    p = _p(TC_CUDA.format(body=TC_BODY, barrier="sync()"))
    assert p.check().ok, str(p.check())
    g = _graph()
    want = g.copy()
    want[16:24, 16:24] = _closure_reference(g[16:24, 16:24], 2)
    gpudsl.interpret(p, detect_races=True, passnum=2, graph=g)
    np.testing.assert_array_equal(g, want)


def test_transitiveclosuresimplified2_is_proved():
    p = _p(TC_SIMPLIFIED2.format(barrier="sync()"))
    assert p.check().ok, str(p.check())
    g = _graph(1)
    flat = g.reshape(-1).copy()
    gpudsl.interpret(p, detect_races=True, m=64 * 64, passnum=3, graph=flat)
    want = g.copy()
    want[24:32, 24:32] = _closure_reference(g[24:32, 24:32], 3)
    np.testing.assert_array_equal(flat.reshape(64, 64), want)


def test_transitiveclosure_without_the_zero_test_races():
    # thread (y, k) then writes buf[y][k] in step k while the others read it
    p = _p(TC_CUDA.format(body=TC_BODY.replace("buf[ty, tx] == 0", "ty >= 0"),
                          barrier="sync()"))
    d = _refused(p)
    assert d.witness["array"] == "buf"
    _race(p, passnum=0, graph=np.ones((64, 64), np.int32))


def test_transitiveclosuresimplified2_without_its_loop_barrier_races():
    p = _p(TC_SIMPLIFIED2.format(barrier="pass"))
    _refused(p)
    # step k + 1 reads what step k writes: a graph with zeros and ones shows it
    _race(p, m=64 * 64, passnum=0, graph=_graph(2).reshape(-1).copy())


# The rule the transitive closure rests on, and what breaks it: the two reads of
# s[t] are one value only when no write of the thread (nor a loop's other
# iterations) stands between them.

ONE_VALUE = '''
def one_value(x: i32[64], out: i32[1]):
    for b in par(0, 1) @ BLOCKS:
        s: i32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
            if s[t] == 0:
{between}
                if s[t] != 0:
                    out[0] = t
'''


def test_reads_with_nothing_between_are_one_value():
    p = _p(ONE_VALUE.format(between="                pass"))
    assert p.check().ok, str(p.check())


@pytest.mark.parametrize("between", [
    "                s[t] = 1",                                  # the thread's own write
    "                s[t] = 1\n                pass",
])
def test_a_write_between_the_reads_parts_them(between):
    p = _p(ONE_VALUE.format(between=between))
    d = _refused(p)
    assert d.witness["array"] == "out"
    _race(p, x=np.zeros(64, np.int32), out=np.zeros(1, np.int32))


def test_a_loop_between_the_reads_parts_them():
    p = _p('''
def one_value(x: i32[64], out: i32[1]):
    for b in par(0, 1) @ BLOCKS:
        s: i32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
            if s[t] == 0:
                for i in seq(0, 2):
                    if s[t] != 0:
                        out[0] = t
                    s[t] = 1
''')
    d = _refused(p)
    assert d.witness["array"] == "out"
    _race(p, x=np.zeros(64, np.int32), out=np.zeros(1, np.int32))


# --------------------------------------------------------------------------------
# testsuite/OpenCL/atomics/counter/kernel.cl  (--local_size=1024 --num_groups=1)
#   local int count; if (get_local_id(0) == 0) count = 0; barrier(...);
#   A[atomic_inc(&count)] = get_local_id(0);
# OpenCL's atomic_inc adds 1 (gpudsl's atomic_inc is CUDA's wrapping one). A is an
# unsized pointer there; here i32[1024] and the write guarded by the ticket's range.

COUNTER = '''
def counter(A: i32[{size}]):
    for b in par(0, {blocks}) @ BLOCKS:
        count: i32[1] @ SHARED
        for t in par(0, 1024) @ THREADS:
            if t == 0:
                count[0] = 0
        {barrier}
        for t in par(0, 1024) @ THREADS:
            k: i32
            k = atomic_add(count[0], 1)
            if k >= 0 and k < {size}:
                A[k] = t
'''


def test_gpuverify_counter_is_proved():
    p = _p(COUNTER.format(size=1024, blocks=1, barrier="sync()"))
    assert p.check().ok, str(p.check())
    A = np.full(1024, -1, np.int32)
    gpudsl.interpret(p, detect_races=True, A=A)
    assert sorted(A.tolist()) == list(range(1024))


def test_counter_reset_without_a_barrier_races():
    p = _p(COUNTER.format(size=1024, blocks=1, barrier="pass"))
    d = _refused(p)
    assert d.witness["array"] == "count"
    _race(p, A=np.zeros(1024, np.int32))


def test_a_shared_counter_is_one_per_block():
    # two blocks, each with its own counter from 0: their tickets collide in A
    # (check() proved this kernel race-free before issue 39)
    p = _p(COUNTER.format(size=2048, blocks=2, barrier="sync()"))
    d = _refused(p)
    assert d.witness["array"] == "A" and d.witness["between"] == "blocks"
    _race(p, A=np.zeros(2048, np.int32))


def test_an_uninitialised_shared_counter_per_block_still_races():
    p = _p('''
def per_block(out: f32[64]):
    for b in par(0, 2) @ BLOCKS:
        c: i32[1] @ SHARED
        for t in par(0, 32) @ THREADS:
            k: i32
            k = atomic_add(c[0], 1)
            if k >= 0 and k < 64:
                out[k] = f32(b)
''')
    _refused(p)
    _race(p, out=np.zeros(64, np.float32))


# --------------------------------------------------------------------------------
# Stream compaction with its counter zeroed by the proc itself: a first kernel
# writes c[0] = 0, the second takes tickets (the counter's plain write runs in
# another launch, never between two tickets).

COMPACT = '''
def compact(n: size, x: f32[n], out: f32[n], c: i32[1]):
    assert n % 64 == 0 and n < 1073741824
{zero}
    for b in par(0, n // 64) @ BLOCKS:
{inside}
        for t in par(0, 64) @ THREADS:
            if x[64 * b + t] > 0.0:
                k: i32
                k = atomic_add(c[0], 1)
                if k >= 0 and k < n:
                    out[k] = x[64 * b + t]
'''
ZERO_KERNEL = '''    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            c[0] = 0'''
ZERO_INSIDE = '''        for t in par(0, 64) @ THREADS:
            if b == 0 and t == 0:
                c[0] = 0
        sync()'''


def test_compaction_that_zeroes_its_counter_first_is_proved():
    p = _p(COMPACT.format(zero=ZERO_KERNEL, inside=""))
    assert p.check().ok, str(p.check())
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, 256).astype(np.float32)
    out = np.zeros(256, np.float32)
    c = np.full(1, 77, np.int32)
    gpudsl.interpret(p, detect_races=True, x=x, out=out, c=c)
    kept = np.sort(x[x > 0])
    assert c[0] == len(kept)
    np.testing.assert_array_equal(np.sort(out[:c[0]]), kept)


def test_zeroing_a_global_counter_inside_the_kernel_races():
    # block 0 zeroes c while other blocks take tickets: barriers do not order blocks
    p = _p(COMPACT.format(zero="", inside=ZERO_INSIDE))
    d = _refused(p)
    assert d.witness["between"] == "blocks"
    x = np.ones(128, np.float32)
    _race(p, x=x, out=np.zeros(128, np.float32), c=np.zeros(1, np.int32))


def test_compaction_without_the_range_guard_stays_a_bounds_refusal():
    # the ticket's range (counter zeroed, at most n increments) is not tracked
    p = _p(COMPACT.format(zero=ZERO_KERNEL, inside="").replace(
        "if k >= 0 and k < n:\n                    out[k]", "out[k]"))
    assert {str(k) for k in p.check().kinds()} == {"bounds"}


# --------------------------------------------------------------------------------
# testsuite/OpenCL/barrier_invariants/wrap_around/kernel.cl and .../ternary/kernel.cl
# (--local_size=8 --num_groups=1).  GPUVerify proves them with the user's
# __barrier_invariant_2(A[tid] == f(tid), tid, (tid+1)%N); check() infers it: A's one
# write A[t] = f(t), once per thread, before the barrier (gpudsl/analysis/summaries.py).
# The __assert(B[...] == tid) are checked by running the kernel.

WRAP_AROUND = '''
def wrap_around(out: i32[8]):
    for b in par(0, 1) @ BLOCKS:
        A: i32[8] @ SHARED
        B: i32[8] @ SHARED
        for t in par(0, 8) @ THREADS:
            A[t] = {value}
{extra}
        sync()
        for t in par(0, 8) @ THREADS:
            B[A[(t + 1) % 8]] = t
        sync()
        for t in par(0, 8) @ THREADS:
            out[t] = B[{where}]
'''
WRAP = dict(value="t", where="(t + 1) % 8", extra="")
TERNARY = dict(value="select(t % 2 == 0, (t + 2) % 8, t)",
               where="(t + select(t % 2 == 0, 1, 3)) % 8", extra="")


@pytest.mark.parametrize("kw", [WRAP, TERNARY], ids=["wrap_around", "ternary"])
def test_barrier_invariant_kernels_are_proved(kw):
    p = _p(WRAP_AROUND.format(**kw))
    assert p.check().ok, str(p.check())
    out = np.zeros(8, np.int32)
    gpudsl.interpret(p, detect_races=True, out=out)
    assert out.tolist() == list(range(8))    # GPUVerify's __assert(B[...] == tid)


@pytest.mark.parametrize("kw", [
    dict(WRAP, value="t % 4"),            # not a permutation: the summary shows it
    dict(WRAP, value="(t + 1) % 8 // 2"),
    dict(WRAP, extra="        sync()\n        for t in par(0, 8) @ THREADS:\n"
                     "            if t == 0:\n                A[5] = 0"),   # a second write
], ids=["mod4", "halves", "second-write"])
def test_barrier_invariant_twins_race(kw):
    p = _p(WRAP_AROUND.format(**kw))
    d = _refused(p)
    assert d.witness["array"] == "B"
    _race(p, out=np.zeros(8, np.int32))


def test_a_write_in_a_loop_gives_no_summary():
    # the last of several writes is in force: A[t] = 0 for all, every thread writes B[0]
    p = _p(WRAP_AROUND.format(**dict(WRAP, value="0")).replace(
        "            A[t] = 0", "            for i in seq(0, 2):\n"
        "                A[t] = select(i == 0, t, 0)"))
    _refused(p)
    _race(p, out=np.zeros(8, np.int32))


def test_reads_before_the_barrier_get_no_summary():
    # the same write and read with no barrier between: a race on A itself
    p = _p(WRAP_AROUND.format(**WRAP).replace("            A[t] = t\n\n        sync()",
                                                "            A[t] = t"))
    d = _refused(p)
    assert d.witness["array"] == "A"
    _race(p, out=np.zeros(8, np.int32))


def test_a_read_before_the_write_gets_no_summary():
    # each thread reads its A[t] before writing it (fresh memory: all read 0)
    p = _p(WRAP_AROUND.format(**WRAP).replace(
        "            A[t] = t\n", "            B[A[t]] = t\n            A[t] = t\n"))
    d = _refused(p)
    assert d.witness["array"] == "B"
    _race(p, out=np.zeros(8, np.int32))
