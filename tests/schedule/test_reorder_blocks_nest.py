"""``reorder_loops`` may put a ``seq`` loop between a kernel's BLOCKS loops (the
primitive keeps the meaning: ``par`` iterations are order-free).  What then happens,
pinned (session 15, docs/decisions.md): nothing accepts the result and means something
else: check() refuses it (a mapping error at the inner BLOCKS loop), code generation
refuses it, the emulator does not compile it unproved, the interpreter (the reference
meaning) runs it to the original's result, and it prints and parses back."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import CheckError, CompileError
from gpudsl.proc import proc_from_source
from gpudsl.schedule import reorder_loops

NS = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
SRC = """
def k(out: f32[4, 4, 3]):
    for bi in par(0, 4) @ BLOCKS:
        for bj in par(0, 4) @ BLOCKS:
            for s in seq(0, 3):
                for t in par(0, 1) @ THREADS:
                    out[bi, bj, s] += f32(bi * 12 + bj * 3 + s)
"""


@pytest.fixture(scope="module")
def both():
    p = proc_from_source(SRC.strip() + "\n", NS)
    q = reorder_loops(p, "bj")
    assert "for s in seq(0, 3):\n            for bj in par(0, 4) @ BLOCKS:" in str(q)
    return p, q


def test_check_and_codegen_refuse_it(both):
    _, q = both
    r = q.check()
    assert not r.ok and [d.kind for d in r.diagnostics] == ["mapping"]
    assert "directly nested in another @ BLOCKS loop" in r.diagnostics[0].message
    with pytest.raises(CompileError, match="not an outermost BLOCKS nest"):
        q.cuda_source()
    with pytest.raises(CheckError):
        q.compile("emulator")


def test_the_interpreter_gives_the_original_meaning_and_it_parses_back(both):
    p, q = both
    want, got = np.zeros((4, 4, 3), np.float32), np.zeros((4, 4, 3), np.float32)
    gpudsl.interpret(p, out=want)
    gpudsl.interpret(q, out=got)
    assert (got == want).all() and (want == np.arange(48).reshape(4, 4, 3)).all()
    assert proc_from_source(str(q), NS) == q
