"""``ops.matmul(a, w.T)`` (a linear layer: ``w`` contiguous ``[n, k]``) on an sm_90a
GPU takes the derived TN wgmma kernel with ``bt = w`` as it lies (no copy of the
weight), after its first run on the device equals numpy; elsewhere, and where the TN
kernel does not serve the shape, ``b`` is made contiguous and the NN path runs."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import ops
from gpudsl.stdlib import array_ops as ops_mod
from gpudsl.stdlib.matmul_sm90 import plan_matmul_sm90
from gpudsl.stdlib.op_arguments import transpose_if_contiguous


def test_transpose_if_contiguous():
    w = np.zeros((4, 6), np.float16)
    assert transpose_if_contiguous(w.T) is not None and transpose_if_contiguous(w.T).base is w
    assert transpose_if_contiguous(w) is None                 # contiguous already
    assert transpose_if_contiguous(w[:, ::2]) is None          # neither way
    assert transpose_if_contiguous(np.zeros((2, 3, 4)).transpose(0, 2, 1)) is None   # 3-D
    torch = pytest.importorskip("torch")
    t = torch.zeros(4, 6)
    assert transpose_if_contiguous(t.T) is None   # a host tensor: ops sees it as numpy


def test_linear_layer_takes_the_tn_kernel_on_sm90a(h100):
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (70, 64)).astype(np.float16)
    w = rng.integers(-3, 4, (40, 64)).astype(np.float16)   # [out, in], as torch keeps it
    tn, _ = plan_matmul_sm90((70, 64), (40, 64), "f16")
    c = ops.matmul(a, w.T)
    assert (tn, "cuda") in ops_mod._compiled                 # the TN kernel ran
    want = (a.astype(np.float32) @ w.astype(np.float32).T).astype(np.float16)
    assert c.shape == (70, 40) and np.array_equal(c, want)
    from gpudsl.stdlib import first_run   # its first run was checked, once
    assert [ok for (q, ok) in first_run._RESULTS.values() if q is tn] == [True]


def test_elsewhere_b_is_made_contiguous(monkeypatch):
    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (16, 32)).astype(np.float16)
    w = rng.integers(-3, 4, (24, 32)).astype(np.float16)
    want = (a.astype(np.float32) @ w.astype(np.float32).T).astype(np.float16)
    assert np.array_equal(ops.matmul(a, w.T), want)


@pytest.mark.gpu
def test_linear_layer_on_an_h100():
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    torch = pytest.importorskip("torch")
    x = torch.randint(-3, 4, (300, 512), device="cuda").half()
    w = torch.randint(-3, 4, (264, 512), device="cuda").half()
    c = ops.matmul(x, w.T)
    assert torch.equal(c, (x.float() @ w.float().T).half())


def test_the_shared_fake_h100_is_all_of_an_h100(h100):
    """tests/conftest.py's ``h100``: the device's architecture, ops' backend and a fresh
    first-run record and kernel cache (without the backend a shared copy of the fixture
    sent ops to the emulator: the TN test above failed)."""
    from gpudsl.runtime.driver import device_arch
    from gpudsl.stdlib import first_run

    assert device_arch() == "sm_90a" and ops.backend() == "cuda"
    assert first_run._RESULTS == {} and ops_mod._compiled == {}
