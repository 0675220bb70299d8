"""Deep nests end in a gpudsl error with a location, never Python's own (issue 28):
``interpret`` of 21 nested loops raised SyntaxError from Python's compiler, and 250
nested proc calls RecursionError from interpret and check()."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import Error, InterpError


def test_21_nested_loops():
    src = "def f(x: f32[2]):\n"
    for k in range(21):
        src += "    " * (k + 1) + f"for i{k} in seq(0, 1):\n"
    src += "    " * 22 + "x[0] += 1.0\n"
    p = gpudsl.proc_from_source(src, namespace=vars(gpudsl))
    with pytest.raises(InterpError, match="20 nested blocks") as e:
        gpudsl.interpret(p, x=np.zeros(2, np.float32))
    assert e.value.loc is not None


def test_250_nested_calls():
    ns = dict(vars(gpudsl))
    p = ns["g0"] = gpudsl.proc_from_source("def g0(x: f32[2]):\n    x[0] += 1.0\n",
                                           namespace=ns)
    for k in range(1, 250):
        p = ns[f"g{k}"] = gpudsl.proc_from_source(
            f"def g{k}(x: f32[2]):\n    g{k - 1}(x)\n", namespace=ns)
    with pytest.raises(InterpError, match="too deeply"):
        gpudsl.interpret(p, x=np.zeros(2, np.float32))
    with pytest.raises(Error, match="too deeply"):
        gpudsl.check(p)
