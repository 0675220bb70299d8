"""Issue 40: ``ConstantTensor`` refuses what HamKaas's own tests expect refused (a 0-d
tensor, an int32 one) and never converts a tensor's dtype silently (float64 was made
float32, int32 int64, a 0-d tensor one of shape [1])."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph


@pytest.mark.parametrize("value, words", [
    (np.float32(1.0), "0-d"),
    (np.array(2.0, np.float32), "0-d"),
    (np.ones(3, np.float64), "float64 tensor"),
    (np.ones(3, np.int32), "int32 tensor"),
    (np.ones(3, np.uint8), "uint8 tensor"),
    (np.ones(3, bool), "bool tensor"),
])
def test_refused(value, words):
    with pytest.raises(gpudsl.Error, match="ConstantTensor") as e:
        graph.ConstantTensor(value)
    assert words in str(e.value) and isinstance(e.value, graph.GraphError)


def test_the_hint_says_how_to_convert():
    with pytest.raises(graph.GraphError) as e:
        graph.ConstantTensor(np.ones(3, np.float64))
    assert "astype(np.float32)" in e.value.hint
    with pytest.raises(graph.GraphError) as e:
        graph.ConstantTensor(np.ones(3, np.int32))
    assert "astype(np.int64)" in e.value.hint


def test_torch_tensors_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(graph.GraphError, match="0-d"):
        graph.ConstantTensor(torch.tensor(1.0))
    with pytest.raises(graph.GraphError, match="int32"):
        graph.ConstantTensor(torch.tensor([1], dtype=torch.int32))
    with pytest.raises(graph.GraphError, match="float64"):
        graph.ConstantTensor(torch.ones(2, dtype=torch.float64))
    assert graph.ConstantTensor(torch.ones(2)).dtype == "float32"


def test_accepted_dtypes_and_lists():
    for dt in (np.float32, np.float16, np.int64):
        assert graph.ConstantTensor(np.ones(2, dt)).dtype == np.dtype(dt).name
    assert graph.ConstantTensor([1.5, 2.0]).dtype == "float32"   # a list has no dtype
    assert graph.ConstantTensor([[1, 2]]).dtype == "int64"


def test_python_numbers_in_expressions_still_broadcast():
    x = graph.InputTensor("x", "float32", [2, 3])
    m = graph.compile((x + 1.0) * 2, device="emulator")
    got = m.evaluate({"x": np.zeros((2, 3), np.float32)})
    assert (got == 2).all()
