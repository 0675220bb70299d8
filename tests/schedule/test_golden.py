"""Golden prints of procs after schedules (one file per test in golden/).

Refresh with ``pytest tests/schedule --update-goldens``; a missing golden fails.
"""
from __future__ import annotations

from gpudsl import BLOCKS, REGISTER, SHARED, THREADS
from gpudsl.schedule import (divide_loop, fission, inline, parallelize_loop, replace,
                             simplify, stage_mem, unroll_loop, vectorize)

from . import procs as P


def test_golden_saxpy_blocks_threads(golden):
    p = divide_loop(P.saxpy, "i", 16, ["b", "t"], tail="perfect")
    p = parallelize_loop(p, "b", BLOCKS)
    p = parallelize_loop(p, "t", THREADS)
    golden("saxpy_blocks_threads", p)


def test_golden_divide_guard(golden):
    golden("divide_guard", divide_loop(P.axpy_any, "i", 32, ["io", "ii"]))


def test_golden_divide_cut_nonzero_lo(golden):
    golden("divide_cut_nonzero_lo", divide_loop(P.prefix, "i", 4, ["io", "ii"], tail="cut"))


def test_golden_rowsum_register(golden):
    p = stage_mem(P.rowsum, P.rowsum.find_loop("i").body(), "s[i]", "acc", REGISTER)
    p = divide_loop(p, "j", 4, ["jo", "ji"], tail="guard")
    golden("rowsum_register", simplify(p))


def test_golden_fission_unroll(golden):
    p = fission(P.rowsum, P.rowsum.find("s[_] = _").after())
    p = divide_loop(p, "j", 2, ["jo", "ji"], tail="cut")
    golden("fission_unroll", unroll_loop(p, "ji"))


def test_golden_stage_row_shared(golden):
    golden("stage_row_shared",
           stage_mem(P.transpose, P.transpose.find_loop("j"), "x[i, 0:m]", "row", SHARED))


def test_golden_vectorize(golden):
    golden("vectorize", vectorize(P.tiled_copy, "v", 4))


def test_golden_inline_replace(golden):
    p = inline(P.add_rows, "vadd(_)")
    q = divide_loop(P.saxpy, "i", 4, ["io", "ii"], tail="perfect")
    golden("inline_replace", str(p) + "\n" + str(replace(q, "ii", P.axpy4)))


def test_golden_transpose_derivation(golden):
    from examples.transpose_schedule import derive

    _, log = derive(verify=False)
    golden("transpose_derivation", "\n".join(f"# --- {n}\n{q}" for n, q in log))


def test_golden_matmul_derivation(golden):
    from examples.matmul_schedule import derive

    _, log = derive(check=False, interp=False)
    golden("matmul_derivation", "\n".join(f"# --- {n}\n{q}" for n, q in log))
