"""The emulator target runs hand-written CUDA C kernels on the CPU and matches numpy."""
import numpy as np
import pytest

from gpudsl.errors import CompileError, LaunchError
from gpudsl.runtime.artifact_cache import Cache
from gpudsl.runtime.emulator import build_emulator_module
from gpudsl.runtime.signature import KernelSig

from .kernels import SIGS, SOURCE

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return Cache(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def mod(cache):
    return build_emulator_module(SOURCE, SIGS, cache=cache, workers=2)


def test_saxpy_2d_grid(mod):
    n = 5000
    x = RNG.random(n, dtype=np.float32)
    y = RNG.random(n, dtype=np.float32)
    expect = 2.5 * x + y
    blocks = -(-n // 256)
    mod.launch("saxpy2d", (-(-blocks // 4), 4), (256,), [np.int32(n), np.float32(2.5), x, y])
    np.testing.assert_allclose(y, expect, rtol=1e-6)


@pytest.mark.parametrize("workers", [1, 2])
def test_shared_memory_tree_reduction(mod, workers):
    n = (1 << 16) + 77
    x = RNG.random(n, dtype=np.float32)
    nb = -(-n // 256)
    out = np.zeros(nb, np.float32)
    mod.workers = workers
    mod.launch("reduce256", nb, 256, [x, out, n])
    padded = np.zeros(nb * 256, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(out, padded.reshape(nb, 256).sum(1), rtol=1e-5)


def test_tiled_matmul_two_barriers_per_step(mod):
    M, N, K = 70, 45, 83          # not multiples of 16: exercises the guards
    A = RNG.random((M, K), dtype=np.float32)
    B = RNG.random((K, N), dtype=np.float32)
    C = np.zeros((M, N), np.float32)
    mod.launch("matmul16", (-(-N // 16), -(-M // 16)), (16, 16), [A, B, C, M, N, K])
    np.testing.assert_allclose(C, A @ B, rtol=1e-4)


def test_atomics_from_every_thread(mod):
    blocks, threads = 8, 128
    total = blocks * threads
    counter = np.zeros(1, np.int32)
    fsum = np.zeros(1, np.float32)
    dsum = np.zeros(1, np.float64)
    lsum = np.zeros(1, np.uint64)
    imax = np.full(1, -5, np.int32)
    umin = np.full(1, 1 << 30, np.uint32)
    winner = np.full(1, -1, np.int32)
    fexch = np.full(1, -1.0, np.float32)
    mod.launch("atomics", blocks, threads, [counter, fsum, dsum, lsum, imax, umin, winner, fexch])
    ids = np.arange(total)
    assert counter[0] == total
    assert fsum[0] == 0.5 * total
    assert dsum[0] == ids.sum()
    assert lsum[0] == ids.sum() * 1_000_000_000
    assert imax[0] == total - 1
    assert umin[0] == 7
    assert 0 <= winner[0] < total and fexch[0] == float(winner[0])


def test_divergent_barrier_is_an_error_not_a_hang(mod):
    x = np.zeros(64, np.float32)
    with pytest.raises(LaunchError) as e:
        mod.launch("divergent", 1, 64, [x])
    msg = str(e.value)
    assert "barrier divergence" in msg and "mykernels.py:" in msg and "exited" in msg


def test_barriers_at_different_sites_are_divergence(mod):
    with pytest.raises(LaunchError, match="different|at the one at"):
        mod.launch("two_sites", 1, 32, [np.zeros(32, np.float32)])


def test_module_still_works_after_an_error(mod):
    mod.workers = 2  # 200 blocks x 64 threads: big enough to run on two OS threads
    with pytest.raises(LaunchError, match="barrier divergence"):
        mod.launch("divergent", 200, 64, [np.zeros(64, np.float32)])
    out = np.zeros(1, np.float32)
    mod.launch("reduce256", 1, 256, [np.ones(256, np.float32), out, 256])
    assert out[0] == 256


def test_warp_shuffle_and_ballot(mod):
    x = RNG.random(256, dtype=np.float32) + 0.1
    out = np.zeros(8, np.float32)
    mod.launch("warp_sum", 2, 128, [x, out])
    np.testing.assert_allclose(out, x.reshape(8, 32).sum(1), rtol=1e-5)


def test_syncthreads_count_and_dynamic_shared_memory(mod):
    flags = (np.arange(64) % 3 == 0).astype(np.int32)
    out = np.zeros(64, np.int32)
    mod.launch("count_and_dyn", 1, 64, [flags, out], shared_bytes=64 * 4)
    np.testing.assert_array_equal(out, flags.sum() + (63 - np.arange(64)))


def test_trap_reports_the_thread(mod):
    with pytest.raises(LaunchError, match=r"thread \(3,0,0\).*__trap"):
        mod.launch("trapper", 1, 8, [np.zeros(8, np.float32)])


def test_math_functions(mod):
    n = 300
    x = RNG.random(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    z = np.zeros(n, np.float64)
    mod.launch("mathy", 2, 256, [x, y, z, n])
    i = np.arange(n)
    expect = (np.tanh(x) + np.exp(-x) + np.sqrt(x) + 1 / np.sqrt(x + 1) + np.minimum(x, 0.5)
              + np.maximum(x, 0.25) + x + np.log(x + 1) + np.exp(x) + np.minimum(x, 1)
              + np.maximum(i, 3) + x + 2 * x)
    np.testing.assert_allclose(y, expect, rtol=1e-5)
    np.testing.assert_allclose(z, np.exp(x.astype(np.float64)) + np.minimum(2.0, x), rtol=1e-12)


def test_argument_mismatches_raise_launch_error(mod):
    x = np.zeros(256, np.float32)
    y = np.zeros(256, np.float32)
    good = [np.int32(256), np.float32(1), x, y]
    mod.launch("saxpy2d", 1, 256, good)
    bad = [
        ([np.int32(256), np.float64(1), x, y], "float32"),           # numpy scalar of wrong type
        ([np.int64(256), np.float32(1), x, y], "int32"),
        ([np.int32(256), np.float32(1), x.astype(np.float64), y], "float32 elements"),
        ([np.int32(256), np.float32(1), x, y[::2]], "contiguous"),
        ([np.int32(256), np.float32(1), x], "takes 4 arguments"),
        ([2**40, np.float32(1), x, y], "out of range"),
        ([np.int32(256), np.float32(1), [1.0], y], "numpy array"),
        ([np.int32(256), 1.5, x, y.view()], None),                   # Python float is fine
    ]
    for args, pat in bad:
        if pat is None:
            mod.launch("saxpy2d", 1, 256, args)
            continue
        with pytest.raises(LaunchError, match=pat):
            mod.launch("saxpy2d", 1, 256, args)
    ro = y.copy()
    ro.flags.writeable = False
    with pytest.raises(LaunchError, match="read-only"):
        mod.launch("saxpy2d", 1, 256, [np.int32(256), np.float32(1), x, ro])
    with pytest.raises(LaunchError, match="no kernel named"):
        mod.launch("nope", 1, 1, [])
    with pytest.raises(LaunchError, match="block"):
        mod.launch("saxpy2d", 1, 2048, good)
    with pytest.raises(LaunchError, match="grid"):
        mod.launch("saxpy2d", (0, 1), 32, good)


def test_signature_mismatch_with_compiled_kernel(cache):
    src = 'extern "C" __global__ void k(float* x, int n) { x[0] = n; }'
    with pytest.raises(CompileError, match="does not match"):
        build_emulator_module(src, [KernelSig("k", ["float*", "long long"])], cache=cache)


def test_cxx_error_points_at_python_line(cache):
    src = '#line 12 "user_proc.py"\nextern "C" __global__ void k(float* x) { x[0] = nosuch; }'
    with pytest.raises(CompileError, match=r"user_proc\.py:12"):
        build_emulator_module(src, [KernelSig("k", ["float*"])], cache=cache)


def test_shared_object_is_cached(cache):
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.0f; }'
    sig = [KernelSig("k", ["float*"])]
    first = build_emulator_module(src, sig, cache=cache)
    second = build_emulator_module(src, sig, cache=cache)
    assert not first.cached and second.cached and first.path == second.path
    x = np.zeros(4, np.float32)
    second.launch("k", 1, 4, [x])
    assert (x == 1).all()


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/maps"), reason="Linux only")
def test_launches_leave_no_thread_stacks_mapped(cache):
    """Each worker maps its fibers' stacks (with a guard page each) for one launch only:
    a process that loads hundreds of modules must stay far below the kernel's limit on
    memory mappings (65530 by default)."""
    def maps():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    fresh = build_emulator_module(SOURCE + "\n// a module of its own\n", SIGS, cache=cache,
                                  workers=2)
    n = 1 << 12
    x = RNG.random(n, dtype=np.float32)
    out = np.zeros(n // 256, np.float32)
    before = maps()
    for _ in range(3):
        fresh.launch("reduce256", (n // 256,), (256,), [x, out, np.int32(n)])
    assert maps() - before < 16
    np.testing.assert_allclose(out, x.reshape(-1, 256).sum(1), rtol=1e-5)
