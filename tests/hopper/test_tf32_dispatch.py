"""``ops.matmul(a, b, precision="tf32")`` and graph matmul nodes of precision tf32 on an
sm_90a "cuda" device (faked: its kernels run on the emulator): B transposed by the
permute kernel into a scratch array, then the derived TN TF32 wgmma kernel, used only
after its first run equals numpy (gpudsl/stdlib/first_run.py); 2-D, ``[n] @ [n, k]`` and
batched.  Elsewhere (the emulator, sm_80) the mma.sync TF32 kernels serve, unchanged."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.stdlib.matmul_sm90_tf32 import launch_on_device, sm90_tf32_kernel
from gpudsl.stdlib.node_table import _launch_permute

ops_mod = importlib.import_module("gpudsl.stdlib.array_ops")


def _exact(lead, m, n, k, seed=0):
    """``a[.., m, n] @ b[.., n, k]`` of small integers with bits below tf32's mantissa:
    the TF32 product is the integers' (exact), a plain f32 product is not."""
    rng = np.random.default_rng(seed)
    ai = rng.integers(-3, 4, lead + (m, n)).astype(np.float32)
    bi = rng.integers(-3, 4, lead + (n, k)).astype(np.float32)
    return ai * np.float32(1 + 2.0 ** -13), bi * np.float32(1 + 2.0 ** -12), ai @ bi


@pytest.fixture
def cuda_ops(h100):
    """ops on the faked sm_90a device; the names of the procs each call runs."""
    from gpudsl.stdlib import node_table
    h100.setattr(ops_mod, "backend", lambda: "cuda")
    h100.setattr(ops_mod, "_compiled", {})
    h100.setattr(node_table, "_PLANS", {})
    ran, real = [], ops_mod._run
    h100.setattr(ops_mod, "_run", lambda p, **a: (ran.append(p.name), real(p, **a)))
    return ran


@pytest.mark.parametrize("lead,shape", [((), (128, 64, 128)), ((), (70, 48, 40)),
                                        ((2,), (64, 32, 64)), ((3,), (5, 32, 20))],
                         ids=["2d", "2d-clipped", "batched", "batched-clipped"])
def test_ops_matmul_tf32_runs_the_wgmma_kernel_on_sm90a(cuda_ops, lead, shape):
    a, b, want = _exact(lead, *shape, seed=sum(shape))
    got = ops.matmul(a, b, precision="tf32")
    assert got.shape == want.shape and (got == want).all()
    assert not (a @ b == want).all()               # the product was read as tf32
    transpose, gemm = cuda_ops                     # two steps: b transposed, the TN kernel
    assert gemm.startswith("bmatmul_nt_tf32" if lead else "matmul_nt_tf32")
    assert transpose.startswith("permute")
    from gpudsl.stdlib import first_run           # after its first run equalled numpy
    assert [(p.name, ok) for p, ok in first_run._RESULTS.values()] == [(gemm, True)]
    again = ops.matmul(a, b, precision="tf32")     # checked once per process and device
    assert (again == want).all() and cuda_ops[2:] == [transpose, gemm]
    assert len(first_run._RESULTS) == 1


def test_a_vector_times_a_matrix_and_shapes_it_does_not_serve(cuda_ops):
    a, b, want = _exact((), 1, 32, 24, seed=4)
    got = ops.matmul(a[0], b, precision="tf32")
    assert got.shape == (24,) and (got == want[0]).all() and "matmul_nt_tf32" in cuda_ops[-1]
    # a reduction no k tile divides: the mma.sync kernel's refusal, as before
    with pytest.raises(gpudsl.Error):
        ops.matmul(*_exact((), 128, 40, 128)[:2], precision="tf32")
    assert launch_on_device((128, 40), (40, 128), "cuda", _launch_permute) is None
    assert launch_on_device((128, 64), (64, 128), "emulator", _launch_permute) is None


@pytest.mark.parametrize("m", [70, None], ids=["2d", "vector"])
def test_a_linear_layer_runs_the_tn_kernel_on_w_with_no_transpose(cuda_ops, m):
    """``a @ w.T`` (``w`` contiguous ``[k, n]``, a ``Linear`` weight): one launch, the
    TN TF32 kernel reading ``w`` as it lies (before: a permute launch into scratch,
    then the TN kernel), after its first run equalled numpy."""
    a, wt, want = _exact((), m or 1, 48, 40, seed=5)
    w = np.ascontiguousarray(wt.T)                    # [k, n], contiguous
    got = ops.matmul(a if m else a[0], w.T, precision="tf32")
    assert got.shape == (want.shape if m else want.shape[1:])
    assert (got == (want if m else want[0])).all()
    (gemm,) = cuda_ops                                # no permute launch
    assert gemm.startswith("matmul_nt_tf32"), cuda_ops
    from gpudsl.stdlib import first_run
    assert [(p.name, ok) for p, ok in first_run._RESULTS.values()] == [(gemm, True)]


def test_a_linear_layer_the_tn_kernel_does_not_serve_takes_the_launch(cuda_ops):
    """A reduction no k tile divides (40): ``b`` made contiguous, the mma.sync kernel's
    path, as before (and its refusal of the shape)."""
    a, wt, _ = _exact((), 128, 40, 128, seed=6)
    with pytest.raises(gpudsl.Error):
        ops.matmul(a, np.ascontiguousarray(wt.T).T, precision="tf32")
    assert not [x for x in cuda_ops if "nt_tf32" in x]


def test_the_launch_is_a_transpose_into_scratch_then_the_tn_kernel(h100):
    ln = launch_on_device((2, 64, 96), (2, 96, 40), "cuda", _launch_permute)
    (first,) = ln.before
    assert ln.proc is sm90_tf32_kernel(bn=256, wgs=2, bk=32, stages=4, clip=True, batched=True)
    assert ln.scratch == (("bt", (2, 40, 96)),) and ln.out == (2, 64, 40)
    assert [s for _, s in first.args][0][:2] == ("in", 1)        # b in, bt out
    assert [s for _, s in first.args][1][:2] == ("scratch", "bt")
    assert dict(ln.args)["bt"] == ("scratch", "bt", None)
    assert {k: v for k, v in ln.args if v[0] == "value"} == {
        "m": ("value", 64), "n": ("value", 40), "k": ("value", 96), "nb": ("value", 2)}


def test_elsewhere_the_mma_sync_kernel_serves_unchanged(monkeypatch):
    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")
    ran, real = [], ops_mod._run
    monkeypatch.setattr(ops_mod, "_run", lambda p, **a: (ran.append(p.name), real(p, **a)))
    a, b, _ = _exact((), 128, 32, 128, seed=2)
    ops.matmul(a, b, precision="tf32")
    assert len(ran) == 1 and "nt_tf32" not in ran[0] and "tf32" in ran[0]


def test_a_graph_launch_list_runs_the_transpose_then_the_tn_kernel_on_sm90a(h100):
    """A matmul node of precision tf32 (``MatMulNode(x, b, precision="tf32")``; here the
    attribute set after compiling, as the plan of a float32 matmul) makes two steps on sm_90a, the scratch ``bt`` a temporary of the
    list, run by the host executor."""
    from gpudsl import graph
    from gpudsl.compiler.unit import compile_unit
    from gpudsl.graph.executors import HostExecutor
    from gpudsl.graph.launches import launch_list
    a, b, want = _exact((2,), 64, 32, 72, seed=9)
    x = graph.InputTensor("x", "float32", [2, 64, 32])
    y = x @ graph.ConstantTensor(b)
    model = graph.compile(y)   # the faked H100: "cuda"
    (mm,) = [n for n in model.graph.nodes if n.op == "MatMulNode"]
    mm.attrs["precision"] = "tf32"
    ll = launch_list(model)
    names = [s.proc.name for s in ll.steps]
    assert names[0].startswith("permute") and names[1].startswith("bmatmul_nt_tf32"), names
    assert ll.temps[f"bt{model.graph.nodes.index(mm)}"].shape == (2, 72, 32)
    got = HostExecutor(model, ll, compile_unit(ll.procs, "emulator")).run({"x": a})
    assert (got == want).all()


@pytest.mark.gpu
@pytest.mark.parametrize("lead,shape", [((), (512, 256, 1024)), ((3,), (130, 96, 72))],
                         ids=["2d", "batched-clipped"])
def test_on_the_gpu_through_ops(lead, shape):
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    a, b, want = _exact(lead, *shape, seed=11)
    got = np.asarray(ops.matmul(a, b, precision="tf32"))
    assert (got == want).all()
