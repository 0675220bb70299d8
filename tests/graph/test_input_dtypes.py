"""``InputTensor`` takes every dtype spelling numpy and torch users write (issue 28:
``graph.InputTensor("x", np.float32, ...)`` was refused)."""
import numpy as np
import pytest

import gpudsl
from gpudsl import GraphError, graph


class _TorchDtype:
    """Stands for a torch dtype (torch is not a test dependency): its module is torch
    and it prints as ``torch.<name>``."""

    __module__ = "torch"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


def _id(dtype) -> str:
    """The test id: the same in every process (pytest-xdist compares them), so never
    the default repr with an address."""
    return f"<{dtype}>" if isinstance(dtype, _TorchDtype) else repr(dtype)


FLOAT32 = [np.float32, np.dtype("float32"), "float32", "f4", "<f4", "single",
           "torch.float32", "torch.float", _TorchDtype("float32"), gpudsl.f32, "f32"]
INT64 = [np.int64, np.dtype("int64"), "int64", "i8", "torch.int64", "torch.long",
         _TorchDtype("int64"), gpudsl.i64, "i64"]


@pytest.mark.parametrize("dtype", FLOAT32, ids=_id)
def test_float32_spellings(dtype):
    x = graph.InputTensor("x", dtype, [3])
    assert x.attrs["dtype"] == "float32"


@pytest.mark.parametrize("dtype", INT64, ids=_id)
def test_int64_spellings(dtype):
    assert graph.InputTensor("i", dtype, [3]).attrs["dtype"] == "int64"


@pytest.mark.parametrize("dtype", [np.float64, "float64", float, "bogus", None,
                                   _TorchDtype("float64"), gpudsl.f64, gpudsl.i32], ids=_id)
def test_other_dtypes_are_refused(dtype):
    with pytest.raises(GraphError, match="not supported; graphs hold float32, float16, "
                       "bfloat16 or int64"):
        graph.InputTensor("x", dtype, [3])


def test_a_numpy_typed_input_evaluates():
    x = graph.InputTensor("x", np.float32, [4])
    m = graph.compile(graph.SumNode(x, x))
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(m.evaluate({"x": a}), 2 * a)


def test_a_bfloat16_device_input_is_taken_as_bfloat16():
    """On an H200, ``Model.evaluate`` of a bfloat16 CUDA tensor was refused ("input 'x'
    is uint16; the graph declares bfloat16"): the device view holds bfloat16 as uint16
    (no numpy bfloat16 in the array interface) and the check read that stand-in's name.
    A device view with its bfloat16 flag is checked without a GPU (nothing is read
    from its address)."""
    from gpudsl.graph.executors import check_device_inputs
    from gpudsl.runtime.interop import DeviceArray

    x = graph.InputTensor("x", "bfloat16", (8, 32))
    m = graph.compile(graph.ReLUNode(x))
    view = DeviceArray(0x10000, (8, 32), np.dtype(np.uint16), bfloat16=True)
    values, host = check_device_inputs(m, {"x": view})
    assert values["x"] is view and host == {}
    plain = DeviceArray(0x10000, (8, 32), np.dtype(np.uint16))   # a real uint16 array
    with pytest.raises(GraphError, match="input 'x' is uint16"):
        check_device_inputs(m, {"x": plain})
