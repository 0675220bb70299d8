"""The MNIST MLP vs numpy, and every memory plan free of overlaps (with the figures)."""
import importlib.util
import pathlib

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.graph import memory_plan as planner

ROOT = pathlib.Path(__file__).resolve().parents[2]
MNIST_SCRIPT = """$1 = InputTensor(input, float32, [128, 28, 28]);
$2 = ReshapeNode($1, [128, 784]);
$3 = ConstantTensor(constant_0, float32, [784, 1000]);
$4 = MatMulNode($2, $3);
$5 = ConstantTensor(constant_1, float32, [1, 1000]);
$6 = SumNode($4, $5);
$7 = ReLUNode($6);
$8 = ConstantTensor(constant_2, float32, [1000, 10]);
$9 = MatMulNode($7, $8);
$10 = ConstantTensor(constant_3, float32, [1, 10]);
$11 = SumNode($9, $10);
result = $11;
"""


def _example():
    spec = importlib.util.spec_from_file_location("mnist_mlp", ROOT / "examples/mnist_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mnist_mlp_matches_numpy():
    mod = _example()
    y, reference = mod.build(np.random.default_rng(0))
    text, consts = graph.to_script(y)
    assert text == MNIST_SCRIPT  # HamKaas's script, line for line
    model = graph.compile(text, constants=consts)
    images = np.random.default_rng(1).standard_normal((128, 28, 28)).astype(np.float32)
    out = model.evaluate({"input": images})
    ref = reference(images)
    np.testing.assert_allclose(out, ref, atol=1e-3, rtol=1e-3)
    assert (out.argmax(1) == ref.argmax(1)).all()
    assert not planner.overlaps(model.plan)
    # the reshape is a view, the sum and relu are fused into the first matmul (no
    # memory of their own): the input and the 128x1000 hidden layer at once
    assert model.memory.arena_bytes == model.memory.lower_bound_bytes == 401408 + 512000


def test_mnist_example_runs():
    assert _example().main() == 0


def _check(nodes, result):
    p = planner.plan(nodes, result)
    assert planner.overlaps(p) == []
    assert p.arena_bytes >= p.lower_bound_bytes
    assert all(off % planner.ALIGN == 0 for off, *_ in p.roots.values())
    return p


def test_overlap_checker_finds_a_bad_plan():
    g = graph.parse(MNIST_SCRIPT)
    p = planner.plan(g.nodes, g.result)
    k = sorted(p.roots)
    # move the sum's output onto the matmul's that it reads
    mm, s = k[1], k[2]
    p.roots[s] = (p.roots[mm][0],) + p.roots[s][1:]
    assert planner.overlaps(p)


def test_random_dag_plans_never_overlap_and_stay_near_the_bound():
    ratios = []
    for seed in range(60):
        nodes, result = planner.random_dag(np.random.default_rng(seed),
                                           n=int(np.random.default_rng(seed).integers(5, 60)))
        p = _check(nodes, result)
        ratios.append(p.arena_bytes / p.lower_bound_bytes)
    print(f"random DAGs: arena / lower bound: mean {np.mean(ratios):.3f}, "
          f"max {np.max(ratios):.3f}")
    assert np.mean(ratios) <= 1.10


def test_views_extend_their_roots_life():
    x = graph.InputTensor("x", "float32", [4, 4])
    v = x.reshape([16])
    h = (x + x).relu()
    out = h.reshape([16]) + v  # reads the view of x at the end
    g = graph.parse(graph.to_script(out).script)
    p = _check(g.nodes, g.result)
    first, last = p.roots[0][2:]
    assert (first, last) == (0, len(g.nodes) - 1)
