"""Fusion (issue 17): pointwise chains and matmul epilogues as one proved kernel each.

Launches are counted on the launch path itself: every step launched from the model's
unit (``Unit.launch``), every proc compiled and called on its own (``Kernel.__call__``:
none), every ``gpudsl.ops`` kernel (none), and every device-kernel launch the backend
performs."""
import importlib.util
import pathlib

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.compiler import compiled_kernel as kernel_mod
from gpudsl.compiler import unit as unit_mod
from gpudsl.graph import fusion
from gpudsl.graph import kernels as fk
from gpudsl.graph import memory_plan as planner
from gpudsl.runtime import launch as launch_mod
from gpudsl.stdlib import array_ops as ops_mod

ROOT = pathlib.Path(__file__).resolve().parents[2]
rng = np.random.default_rng(17)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


class Launches:
    """Counts launches on the launch path: every step the model's unit launches (by
    proc name), every proc compiled and called on its own (none expected: everything
    runs from the unit), every gpudsl.ops kernel, and every device-kernel launch the
    backend performs."""

    def __init__(self, monkeypatch):
        self.procs: list[str] = []
        self.own: list[str] = []
        self.ops = 0
        self.device = 0
        launch, call, run, launch_all = unit_mod.Unit.launch, kernel_mod.Kernel.__call__, \
            ops_mod._run, launch_mod._launch_all

        def counted_launch(u, name, *a, **kw):
            self.procs.append(u._entry(name).ir.name)
            return launch(u, name, *a, **kw)

        def counted_call(k, *a, **kw):
            self.own.append(k.ir.name)
            return call(k, *a, **kw)

        def counted_run(p, **kw):
            self.ops += 1
            return run(p, **kw)

        def counted_launch_all(launch, launches, work):
            self.device += len(launches)
            return launch_all(launch, launches, work)

        monkeypatch.setattr(unit_mod.Unit, "launch", counted_launch)
        monkeypatch.setattr(kernel_mod.Kernel, "__call__", counted_call)
        monkeypatch.setattr(ops_mod, "_run", counted_run)
        monkeypatch.setattr(launch_mod, "_launch_all", counted_launch_all)


def _proved(model):
    for k in model._fused.values():  # every fused proc is in the unit, proved
        assert model.unit.entries[model.unit.name_of(k.proc)].report.ok
        assert k.proc.check().ok
    assert model.unit.proved
    assert model.unfused == []
    assert planner.overlaps(model.plan) == []


def _mnist():
    spec = importlib.util.spec_from_file_location("mnist_mlp", ROOT / "examples/mnist_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mnist_mlp_runs_as_two_fused_kernels(monkeypatch):
    y, reference = _mnist().build(np.random.default_rng(0))
    model = graph.compile(y)
    _proved(model)
    ks = model.kernels
    assert [(k.refs, k.fused) for k in ks] == [(("$4", "$6", "$7"), True),
                                               (("$9", "$11"), True)]
    assert ks[0].ops == ("MatMulNode", "SumNode", "ReLUNode")
    images = f32(128, 28, 28)
    count = Launches(monkeypatch)
    out = model.evaluate({"input": images})
    # two kernels (procs), nothing through gpudsl.ops, nothing for the reshape view
    assert count.procs == [ks[0].name, ks[1].name]
    assert count.own == [] and count.ops == 0
    assert [s.name for s in model.launches.steps] == [k.name for k in ks]
    assert len(model.unit.names) == 2  # the unit holds exactly the two fused procs
    # exactly 2 device launches: the first matmul (1000 columns, not a multiple of the
    # 128 tile) is the stdlib's one-kernel guarded big tile (the cut variant would
    # launch its 104-column edge separately); the second is the guarded variant
    assert ks[0].name.startswith("matmul_tiles") and count.device == 2
    ref = reference(images)
    np.testing.assert_allclose(out, ref, atol=1e-3, rtol=1e-3)
    assert (out.argmax(1) == ref.argmax(1)).all()


# every pattern of a rank-3 broadcast operand ("f": the axis is full, "b": size 1),
# the chain's value in either slot, relu and silu: one chain, one kernel (no two axes
# merge); an odd shape (no float4) and a float4 one, half of the patterns each


@pytest.mark.parametrize("shape, patterns", [((2, 3, 5), ["fff", "bff", "fbb", "bfb"]),
                                             ((3, 5, 8), ["bbb", "ffb", "fbf", "bbf"])])
def test_pointwise_chain_every_broadcast_pattern(shape, patterns, monkeypatch):
    x = graph.InputTensor("x", "float32", shape)
    vals = {"x": f32(*shape)}
    node, ref = x, vals["x"]
    for j, pat in enumerate(patterns):
        s = tuple(d if p == "f" else 1 for d, p in zip(shape, pat))
        vals[f"b{j}"] = f32(*s)
        b = graph.InputTensor(f"b{j}", "float32", s)
        if j % 3 == 0:
            node, ref = node + b, ref + vals[f"b{j}"]
        elif j % 3 == 1:
            node, ref = node * b, ref * vals[f"b{j}"]
        else:  # the chain's value as the second operand: a full-shape operand first
            vals[f"f{j}"] = f32(*shape)
            node = graph.InputTensor(f"f{j}", "float32", shape) + node
            ref = vals[f"f{j}"] + ref
            node, ref = node * b, ref * vals[f"b{j}"]
        if j == 1:
            node, ref = node.relu(), np.maximum(ref, 0)
    node, ref = node.silu(), ref / (1 + np.exp(-ref))
    model = graph.compile(node)
    _proved(model)
    assert len(model.kernels) == 1 and model.kernels[0].fused
    count = Launches(monkeypatch)
    out = model.evaluate(vals)
    assert count.procs == [model.kernels[0].name] and count.own == [] and count.ops == 0
    assert count.device == 1
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa, sb", [((1, 5, 1), (1, 1, 1)), ((7,), (1,)), ((3, 1), (1, 1)),
                                    ((4, 1, 6), (1, 1, 6))])
def test_pointwise_chain_size_one_axes(sa, sb):
    a, b = f32(*sa), f32(*sb)
    x, y = graph.InputTensor("a", "float32", sa), graph.InputTensor("b", "float32", sb)
    model = graph.compile(((x * y).relu() + y).silu())
    _proved(model)
    assert [k.fused for k in model.kernels] == [True]
    s = np.maximum(a * b, 0) + b
    np.testing.assert_allclose(model.evaluate({"a": a, "b": b}), s / (1 + np.exp(-s)),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sa, sb, bias", [
    ((128, 8), (8, 128), (1, 128)),      # the big-tile variant
    ((5,), (5, 7), (7,)),                # vector-matrix
    ((2, 3, 5), (2, 5, 4), (1, 1, 4)),   # batched (guarded)
])
def test_matmul_epilogue_variants(sa, sb, bias):
    a, w, c = f32(*sa), f32(*sb), f32(*bias)
    x = graph.InputTensor("a", "float32", sa)
    y = (x @ graph.ConstantTensor(w)).silu() * graph.ConstantTensor(c)
    model = graph.compile(y)
    _proved(model)
    assert [(k.ops, k.fused) for k in model.kernels] == [
        (("MatMulNode", "SiLUNode", "HadamardProductNode"), True)]
    mm = a @ w
    np.testing.assert_allclose(model.evaluate({"a": a}), mm / (1 + np.exp(-mm)) * c,
                               rtol=1e-4, atol=1e-4)


def test_matmul_variant_is_the_one_matmul_kernel_picks():
    from gpudsl.stdlib import matmul as mm

    for sa, sb, want in [((128, 784), (784, 1000), "matmul_tiles"), ((3, 5), (5, 7), "matmul"),
                         ((128, 8), (8, 128), "matmul_128x128x8"), ((5,), (5, 7), "vecmat"),
                         ((128, 12), (12, 128), "matmul_cut_v4")]:
        variant, vec = fk.matmul_variant(sa, sb, {})
        assert mm.matmul_kernel(sa, sb)[0].name == want
        assert {"cut": "matmul_cut_v4", "guarded": "matmul", "big": "matmul_128x128x8",
                "tiles": "matmul_tiles", "vecmat": "vecmat"}[variant] == want


# ------------------------------------------------------------------ the rules (no kernels)


def _groups(node):
    text, consts = graph.to_script(node)
    g = graph.parse(text)
    return g, fusion.groups(g.nodes, g.result)


def test_no_fusion_through_a_second_consumer_a_view_or_the_result():
    x = graph.InputTensor("x", "float32", [4, 6])
    s = x + x
    g, gs = _groups(s.relu() * s)  # s has two consumers
    assert [k.members for k in gs] == [(2, 3)]  # relu fused into the product only
    g, gs = _groups(s.relu().reshape([24]).silu())  # relu's value is read by a view
    assert [len(k.members) for k in gs] == [2]  # the sum and the relu; not the silu
    r = x.relu()
    g, gs = _groups(r)
    assert gs == []
    y = graph.InputTensor("y", "float32", [1, 6])
    g, gs = _groups(x * (y + y).relu())  # the chain's value would be broadcast
    assert [[g.nodes[i].op for i in k.members] for k in gs] == [["SumNode", "ReLUNode"]]


def test_no_fusion_across_an_in_place_write():
    """relu -> sum with the buffer -> silu -> sum, with the buffer's ReplaceSliceNode
    between the silu and the last sum: fused across it, the sum would read the buffer
    after the write instead of before."""
    buf = graph.BufferTensor("float32", [4, 6])
    x = graph.InputTensor("x", "float32", [4, 6])
    w = buf.replace(graph.InputTensor("r", "float32", [1, 6]), 0, 1)
    out = (x.relu() + buf).silu() + w
    g, gs = _groups(out)
    assert [[g.nodes[i].op for i in k.members] for k in gs] == [
        ["ReLUNode", "SumNode", "SiLUNode"]]
    assert g.nodes[8].op == "ReplaceSliceNode" and gs[0].last == 4
    model = graph.compile(out)
    _proved(model)
    xv, rv = f32(4, 6), f32(1, 6)
    s = np.maximum(xv, 0)  # the buffer is zero before the first write
    after = np.zeros((4, 6), np.float32)
    after[0:1] = rv
    np.testing.assert_allclose(model.evaluate({"x": xv, "r": rv}),
                               s / (1 + np.exp(-s)) + after, rtol=1e-5, atol=1e-6)


def test_fused_group_reads_stay_alive_in_the_plan():
    """The planner sees a group as one node at its last step reading every external
    operand: the output never shares memory with what the kernel reads."""
    x = graph.InputTensor("x", "float32", [64, 64])
    y = graph.InputTensor("y", "float32", [64, 64])
    h = (x + y).relu()  # x, y dead after the sum unfused: the relu could reuse them
    z = (h * h).silu()
    g, gs = _groups(z)
    nodes, result = fusion.planner_view(g.nodes, g.result, gs)
    p = planner.plan(nodes, result)
    assert planner.overlaps(p) == []
    for grp in gs:
        lo, size, *_ = p.roots[grp.last]
        for j in grp.externals:
            kind, key, off = p.storage[j]
            if kind == "arena":
                osize = p.roots[key][1]
                assert off + osize <= lo or lo + size <= off


@pytest.mark.gpu
def test_mnist_mlp_fused_on_the_gpu():
    y, reference = _mnist().build(np.random.default_rng(0))
    model = graph.compile(y, device="cuda")
    _proved(model)
    images = f32(128, 28, 28)
    out = model.evaluate({"input": images})
    np.testing.assert_allclose(out, reference(images), atol=1e-3, rtol=1e-3)
