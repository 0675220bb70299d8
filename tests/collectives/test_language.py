"""Warp collectives as expressions: typed, parsed with locations, printed so that they
parse back, refused with a reason where they do not fit."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import ProcError, proc_from_source
from gpudsl.ir.collective_meaning import COLLECTIVES
from gpudsl.ir.nodes import Collective
from gpudsl.ir.visitor import walk

from . import procs as P

ALL = P.GOOD + [P.lane_if, P.part_warp, P.lane_out, P.lane_loop, P.nested_bad, P.racy]


def test_the_table_names_every_collective():
    assert set(COLLECTIVES) == {"shfl", "shfl_xor", "shfl_down", "shfl_up", "ballot",
                                "any_lanes", "all_lanes", "warp_sum", "warp_max", "warp_min"}
    for name in COLLECTIVES:
        assert hasattr(gpudsl, name)


@pytest.mark.parametrize("p", ALL, ids=lambda p: p.name)
def test_round_trip(p):
    q = proc_from_source(str(p), vars(gpudsl))
    assert q == p
    assert str(q) == str(p)


def test_types_and_locations():
    seen = {}
    for p in ALL:
        for n in walk(p.ir):
            if isinstance(n, Collective):
                assert n.loc is not None and n.loc.line > 0
                seen.setdefault(n.name, set()).add((n.args[0].ty.name, n.ty.name))
    assert seen["ballot"] == {("bool", "i64")}
    assert ("bool", "bool") in seen["any_lanes"]
    assert ("f32", "f32") in seen["warp_sum"] and ("i32", "i32") in seen["warp_sum"]
    assert ("i64", "i64") in seen["warp_sum"]  # warp_sum(t): an index value taken as i64
    assert set(seen) == set(COLLECTIVES)


@pytest.mark.parametrize("expr, msg", [
    ("shfl(x[t])", "takes 2 argument"),
    ("warp_sum(x[t], 1)", "takes 1 argument"),
    ("ballot(x[t])", "must be a condition"),
    ("warp_sum(x[t] > 0.0)", "takes an f32, f64, i32 or i64 value"),
    ("shfl(x[t], 1.0)", "must be an integer"),
])
def test_refusals(expr, msg):
    src = (f"def f(x: f32[32], y: f32[32]):\n    for b in par(0, 1) @ BLOCKS:\n"
           f"        for t in par(0, 32) @ THREADS:\n            y[t] = f32({expr})\n")
    with pytest.raises(ProcError, match=msg):
        proc_from_source(src, vars(gpudsl))


def test_outside_procs():
    with pytest.raises(RuntimeError, match="only inside a @proc"):
        gpudsl.warp_sum(1.0)


def test_the_docs_example_runs(tmp_path):
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "language.md").read_text()
    section = text.split("## Warp collectives", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    script = tmp_path / "warp_doc.py"
    script.write_text(snippet)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": str(root)},
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert "check(row_sums): ok" in r.stdout and "sums equal" in r.stdout
