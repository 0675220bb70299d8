"""The one-kernel big-tile matmul of any shape (gpudsl/stdlib/matmul.py, schedule_matmul_guarded_tiles; issue 17):
check() proves it symbolically and with bindings, one device launch, equal to numpy on
the emulator for odd shapes, no spills, the report's figures; and the primitives'
moves of a guard (reorder_loops / fission through an ``if``) on small procs."""
import numpy as np
import pytest

import gpudsl
from gpudsl.errors import SchedulingError
from gpudsl.runtime import launch as launch_mod
from gpudsl.schedule import divide_loop, fission, reorder_loops
from gpudsl.stdlib import matmul as ms
from gpudsl.stdlib.matmul import guarded_tiles_kernel, schedule_matmul_guarded_tiles

_K = {}


def _kernel(batched):
    if batched not in _K:
        _K[batched] = guarded_tiles_kernel(batched).compile("emulator")
    return _K[batched]


@pytest.mark.parametrize("batched", [False, True])
def test_proved_symbolically(batched):
    rep = guarded_tiles_kernel(batched).check()
    assert rep.ok, str(rep)


def test_proved_with_bindings():
    p = guarded_tiles_kernel(False)
    for m, n, k in [(128, 784, 1000), (999, 999, 999), (1, 1, 1)]:
        rep = p.check(m=m, n=n, k=k)
        assert rep.ok, str(rep)


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (50, 37, 19), (128, 784, 1000), (130, 12, 129),
                                     (257, 9, 131), (129, 8, 128), (128, 13, 128),
                                     (99, 99, 99)])
def test_against_numpy(m, n, k, monkeypatch):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, n)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    c = np.full((m, k), np.nan, np.float32)
    kern = _kernel(False)
    launches = []
    run = launch_mod._launch_all
    monkeypatch.setattr(launch_mod, "_launch_all",
                        lambda la, ls, w: (launches.append(len(ls)), run(la, ls, w))[1])
    kern(a=a, b=b, c=c)
    assert sum(launches) == 1  # one device kernel, edges included
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_batched_against_numpy():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 133, 11)).astype(np.float32)
    b = rng.standard_normal((2, 11, 140)).astype(np.float32)
    c = np.zeros((2, 133, 140), np.float32)
    _kernel(True)(a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_cube_of_999_at_a_small_tile():
    """999^3 scaled down: 999 is odd for every tile; the same schedule at 16x16x4 tiles
    over 999 x 37 x 61 exercises every guard many blocks over."""
    p = schedule_matmul_guarded_tiles(ms.matmul_algorithm(False), bm=16, bn=16, bk=4, tm=4,
                                      tn=4, vec=4)
    assert p.check().ok
    rng = np.random.default_rng(999)
    a = rng.standard_normal((999, 37)).astype(np.float32)
    b = rng.standard_normal((37, 61)).astype(np.float32)
    c = np.zeros((999, 61), np.float32)
    p.compile("emulator")(a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_no_barrier_under_a_guard():
    """Barriers stay at block level: no sync() inside an if."""
    from gpudsl.ir.nodes import If, Sync
    from gpudsl.ir.visitor import walk

    p = guarded_tiles_kernel(False)
    for s in walk(p.ir.body):
        if isinstance(s, If):
            assert not any(isinstance(x, Sync) for x in walk(s.body))
    assert sum(isinstance(x, Sync) for x in walk(p.ir.body)) == 2


def test_no_spills_and_the_report():
    p = guarded_tiles_kernel(False)
    rep = p.perf("H100", m=128, n=784, k=1000)
    (kp,) = rep.kernels
    if any("ptxas figures unavailable" in n for n in rep.notes):
        pytest.skip("ptxas figures unavailable")
    assert kp.spills == 0 and kp.registers <= 128  # 2 blocks of 256 threads per SM
    by = {(a.buffer, a.memory, a.kind): a for a in kp.accesses if a.memory == "GLOBAL"}
    # the global tile copies at their minimum sectors, every shared access conflict-free
    for key in [("a", "GLOBAL", "read"), ("b", "GLOBAL", "read")]:
        assert by[key].sectors == by[key].min_sectors == 4, by[key]
    shared = [a for a in kp.accesses if a.memory == "SHARED"]
    assert len(shared) == 4 and all(a.bank_conflict == 1 for a in shared), shared
    # the scalar guarded stores of C: 4 float4 groups per warp request (documented)
    assert by[("c", "GLOBAL", "write")].sectors == 16


def test_picked_where_the_cut_would_launch_more_than_once():
    for sa, sb, want in [((128, 784), (784, 1000), "matmul_tiles"),
                         ((130, 8), (8, 128), "matmul_tiles"),
                         ((2, 129, 5), (2, 5, 300), "bmatmul_tiles"),
                         ((128, 12), (12, 256), "matmul_cut_v4"),  # edges empty: one launch
                         ((256, 64), (64, 128), "matmul_128x128x8"),
                         ((100, 64), (64, 384), "matmul")]:
        assert ms.matmul_kernel(sa, sb)[0].name == want, sa


# ------------------------------------------------------------------ the primitives


def _nest():
    return gpudsl.proc_from_source(
        "def f(m: size, k: size, x: f32[m, k], y: f32[m, k]):\n"
        "    for i in seq(0, m):\n"
        "        for j in seq(0, k):\n"
        "            y[i, j] = x[i, j] * 2.0\n"
        "            y[i, j] += 1.0\n", {}, file="<t>")


def test_reorder_through_a_guard():
    p = divide_loop(_nest(), "i", 4, ["io", "ii"], tail="guard")
    q = reorder_loops(p, "ii")  # for ii: if g: for j  ->  for j: for ii: if g
    assert [s.iter for s in [q.find_loop("j").node(), q.find_loop("ii").node()]] == ["j", "ii"]
    assert q.find_loop("j").parent().node().iter == "io"
    x = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    y = np.zeros_like(x)
    gpudsl.interpret(q, m=7, k=3, x=x, y=y)
    np.testing.assert_allclose(y, 2 * x + 1)


def test_reorder_through_a_guard_keeps_the_dependence_rule():
    src = ("def g(m: size, k: size, y: f32[m, k]):\n"
           "    for i in seq(1, m):\n"
           "        for j in seq(0, k - 1):\n"
           "            y[i, j] = y[i - 1, j + 1]\n")
    p = gpudsl.proc_from_source(src, {}, file="<t>")
    p = divide_loop(p, "i", 4, ["io", "ii"], tail="guard")
    with pytest.raises(SchedulingError, match="reverses the order"):
        reorder_loops(p, "ii")


def test_fission_through_a_guard():
    p = divide_loop(_nest(), "j", 4, ["jo", "ji"], tail="guard")
    q = fission(p, p.find("y[_] = _").after(), n_lifts=2)  # the if, then loop ji
    assert len(q.find_loop("jo").node().body) == 2
    x = np.random.default_rng(1).standard_normal((3, 9)).astype(np.float32)
    y = np.zeros_like(x)
    gpudsl.interpret(q, m=3, k=9, x=x, y=y)
    np.testing.assert_allclose(y, 2 * x + 1)
