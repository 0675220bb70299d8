"""``gpudsl cuda`` and the GPU-only tests (numerics on the device, PyTorch tensors in and
out without copies).  The ``gpu`` tests are skipped where there is no driver."""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

import gpudsl

from .procs import CORPUS

HERE = os.path.dirname(os.path.abspath(__file__))
PROCS = os.path.join(HERE, "procs.py")


def test_cli_prints_cuda(capsys):
    from gpudsl.cli.cuda_command import run_cuda

    assert run_cuda(f"{PROCS}::saxpy", {"n": 4096}) == 0
    out = capsys.readouterr().out
    assert 'extern "C" __global__ void __launch_bounds__(256)' in out
    assert "constexpr int n = 4096;" in out


def test_cli_through_main(capsys):
    from gpudsl.cli import main

    assert main(["cuda", f"{PROCS}::rowsum"]) == 0
    assert "__syncthreads();" in capsys.readouterr().out
    assert main(["cuda", f"{PROCS}::nosuch"]) == 1
    assert "has no proc named 'nosuch'" in capsys.readouterr().err
    assert main(["cuda", PROCS]) == 1
    assert "name one" in capsys.readouterr().err


@functools.lru_cache(maxsize=None)
def cuda_kernel(name):
    p, bindings, _ = CORPUS[name]
    return p.compile("cuda", **bindings)


def test_cuda_target_compiles_without_gpu():
    k = cuda_kernel("matmul_tiled")
    assert set(k.resources) == {"matmul_tiled_k0"}
    assert k.resources["matmul_tiled_k0"].shared_bytes == 2 * 16 * 16 * 4
    assert "__shared__ __align__(16) float ta[16][16];" in k.source


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CORPUS))
def test_gpu_matches_interpreter(name):
    p, _, make = CORPUS[name]
    args = make(np.random.default_rng(11))
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    gpudsl.interpret(p, **want)
    cuda_kernel(name)(**args)
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            if v.dtype.kind == "f":
                np.testing.assert_allclose(args[k], v, rtol=1e-4, atol=1e-4, err_msg=k)
            else:
                np.testing.assert_array_equal(args[k], v, err_msg=k)


@pytest.mark.gpu
def test_gpu_saxpy_against_numpy_large():
    n = 1 << 22
    rng = np.random.default_rng(5)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    want = 2.0 * x + y
    cuda_kernel("saxpy")(a=2.0, x=x, y=y)
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.gpu
def test_torch_tensors_zero_copy():
    torch = pytest.importorskip("torch")
    a = torch.randn(64, 32, device="cuda")
    b = torch.randn(32, 48, device="cuda")
    c = torch.zeros(64, 48, device="cuda")
    ptr = c.data_ptr()
    cuda_kernel("matmul_tiled")(a=a, b=b, c=c)
    torch.cuda.synchronize()
    assert c.data_ptr() == ptr
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    x = torch.randn(1024, device="cuda")
    y = torch.randn(1024, device="cuda")
    want = 3 * x + y
    cuda_kernel("saxpy")(a=3.0, x=x, y=y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, want)


@pytest.mark.gpu
def test_torch_aliasing_and_dtype_refused_on_device():
    torch = pytest.importorskip("torch")
    buf = torch.zeros(1024, device="cuda")
    with pytest.raises(gpudsl.LaunchError, match="overlap"):
        cuda_kernel("saxpy")(a=1.0, x=buf[:512], y=buf[256:768])
    with pytest.raises(gpudsl.LaunchError, match="holds f32"):
        cuda_kernel("saxpy")(a=1.0, x=torch.zeros(512, device="cuda", dtype=torch.float64),
                             y=buf[:512])
