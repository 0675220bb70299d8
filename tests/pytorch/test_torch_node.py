"""gpudsl.torch.node: a node of the node table (here the toy node a user declares,
tests/stdlib/toy_node.py) as a torch operator whose fake is the node's shape rule."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.stdlib.node_registry import Node, register, unregister
from tests.stdlib import toy_node

torch = pytest.importorskip("torch")
gt = pytest.importorskip("gpudsl.torch")


@pytest.fixture(scope="module")
def square_add():
    register(Node("square_add", toy_node.shape, toy_node.launch,
                  lambda a, b: a.astype(np.float64) ** 2 + b, operands=("a", "b")))
    yield gt.node("square_add", "gpudsl_test::square_add")
    unregister("square_add")


def test_a_users_node_as_an_operator(square_add):
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(square_add(a, b), a * a + b)
    torch.library.opcheck(square_add, (a, b))
    f = torch.compile(lambda a, b: square_add(a, b) * 2, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(a, b), (a * a + b) * 2)


def test_the_shape_rule_refuses_while_tracing(square_add):
    f = torch.compile(lambda a, b: square_add(a, b), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="must be equal"):
        f(torch.randn(4, 8), torch.randn(4, 9))


def test_a_built_in_node_with_an_attribute():
    op = gt.node("sliced_softmax", "gpudsl_test::sliced", operands=("x",),
                 attrs={"prefix": "int"})
    x = torch.randn(4, 8)
    want = x.clone()
    want[:, :3] = torch.softmax(x[:, :3], -1)
    torch.testing.assert_close(op(x, prefix=3), want)
    torch.library.opcheck(op, (x,), {"prefix": 3})


def test_refusals():
    with pytest.raises(gpudsl.Error, match="no node 'nope'"):
        gt.node("nope")
    with pytest.raises(gpudsl.Error, match="attribute types"):
        gt.node("sliced_softmax", operands=("x",), attrs={"prefix": "tensor"})
