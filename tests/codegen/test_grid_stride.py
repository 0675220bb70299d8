"""BLOCKS loops on blockIdx.y / .z are grid-stride loops: CUDA allows 65535 blocks
there, so the launch asks for at most that many and each block walks its share of
the rest; kernels with SHARED arrays end each iteration with a barrier."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, SHARED, THREADS, par, proc, sync
from gpudsl.targets import EMULATED_TARGET, target


def _grid(dims):
    """The emulator's target with the grid limits ``dims`` (the limits are the target's)."""
    from dataclasses import replace

    return replace(target(EMULATED_TARGET), name="sm_grid", max_grid_dims=dims)


@proc
def reverse_rows(n: size, m: size, x: f32[n, m, 32], y: f32[n, m, 32]):
    for r in par(0, n) @ BLOCKS:
        for s in par(0, m) @ BLOCKS:
            for c in par(0, 1) @ BLOCKS:
                t: f32[32] @ SHARED
                for i in par(0, 32) @ THREADS:
                    t[i] = x[r, s, i]
                sync()
                for i in par(0, 32) @ THREADS:
                    y[r, s, i] = t[31 - i]


@proc
def scale_rows(n: size, x: f32[n, 64], y: f32[n, 64]):
    for r in par(0, n) @ BLOCKS:
        for c in par(0, 1) @ BLOCKS:
            for i in par(0, 64) @ THREADS:
                y[r, i] = 2.0 * x[r, i]


def test_y_and_z_loops_stride_by_the_grid():
    src = reverse_rows.cuda_source()
    assert "r += gridDim.z" in src and "s += gridDim.y" in src
    assert "blockIdx.x" in src and "gridDim.x" not in src
    # a barrier closes each iteration, after the reads of the SHARED tile
    body = src[src.index("y[") :]
    assert "__syncthreads();" in body
    assert "__syncthreads" not in scale_rows.cuda_source()


@pytest.mark.parametrize("n, m", [(10, 7), (3, 3), (1, 1)])
def test_more_rows_than_the_limit_run_correctly(n, m):
    """With the limits lowered to 3 blocks in y and z, blocks walk several rows each;
    without the closing barrier a fast thread would overwrite the tile that a slow
    one still reads (the emulator runs threads one after another between barriers)."""
    small = _grid((2 ** 31 - 1, 3, 3))
    x = np.random.default_rng(n).standard_normal((n, m, 32)).astype(np.float32)
    y = np.zeros_like(x)
    reverse_rows.compile("emulator", target=small)(x=x, y=y)
    np.testing.assert_array_equal(y, x[:, :, ::-1])
    x2 = x[:, 0, :].repeat(2, axis=1)
    y2 = np.zeros_like(x2)
    scale_rows.compile("emulator", target=small)(x=x2, y=y2)
    np.testing.assert_array_equal(y2, 2 * x2)


def test_grid_x_limit_is_still_refused():
    @proc
    def wide(n: size, x: f32[n]):
        for b in par(0, n) @ BLOCKS:
            for i in par(0, 1) @ THREADS:
                x[b] = 1.0

    k = wide.compile("emulator", target=_grid((4, 65535, 65535)))
    with pytest.raises(gpudsl.LaunchError, match="gridDim.x"):
        k(x=np.zeros(5, np.float32))
    wide.compile("emulator")(x=np.zeros(5, np.float32))   # the emulator's own limits


@proc
def rows_70000(x: f32[70000, 4], y: f32[70000, 4]):
    for r in par(0, 70000) @ BLOCKS:
        for c in par(0, 1) @ BLOCKS:
            for i in par(0, 4) @ THREADS:
                y[r, i] = x[r, i] + 1.0


def test_a_constant_y_extent_over_65535_is_proved_compiled_and_runs():
    """check() allows what code generation grid-strides: a y (or z) extent beyond 65535
    blocks is no resource error (it was, while codegen and the launch handled it)."""
    r = rows_70000.check()
    assert r.ok, r
    assert not [d for d in r.diagnostics if d.kind == "resource"]
    assert "r += gridDim.y" in rows_70000.cuda_source()
    x = np.random.default_rng(0).standard_normal((70000, 4)).astype(np.float32)
    y = np.zeros_like(x)
    rows_70000.compile("emulator")(x=x, y=y)
    np.testing.assert_array_equal(y, x + 1.0)


def test_a_constant_x_extent_over_the_limit_is_still_a_resource_error():
    @proc
    def wide(x: f32[8]):
        for b in par(0, 2147483648) @ BLOCKS:
            for i in par(0, 1) @ THREADS:
                if b < 8:
                    x[b] = 1.0

    r = wide.check()
    assert not r.ok
    assert [d for d in r.diagnostics if d.kind == "resource" and "x <=" in d.message]
