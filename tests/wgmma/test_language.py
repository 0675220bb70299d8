"""wgmma / wgmma_commit / wgmma_wait (docs/hopper.md): parsed with clear errors, printed and
parsed back equal, run by the interpreter (each thread's share of the fragment, exact on
small integers), held in flight until the completing wait (a premature access is an
error naming both statements), seen by the race detector."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import InterpError, ProcError, proc_from_source
from gpudsl.ir.wgmma_meaning import frag_col, frag_row

from .cases import expected, fragment_table, gemm, operands, twin

WAITS = "                wgmma_commit()\n                wgmma_wait(0)\n"
BLOCK_WAITS = "            wgmma_commit()\n            wgmma_wait(0)\n"


@pytest.mark.parametrize("n, form, dt", [(8, "local", "f16"), (64, "block", "f16"),
                                         (256, "local", "bf16")])
def test_round_trip(n, form, dt):
    p = gemm(n, form, dt)
    assert proc_from_source(str(p)).ir == p.ir


def test_printed_form():
    text = str(gemm(64))
    assert "wgmma(acc[t, 0:32], a_s[0:2, 0:64, 0:8], b_s[0:2, 0:64, 0:8])" in text
    assert "wgmma_commit()" in text and "wgmma_wait(0)" in text


def test_fragment_layout_is_the_ptx_isas():
    """Every element of D 64 x N is held by exactly one (lane, register); a lane's rows
    are those of its warp's 16-row slice, two adjacent columns per pair of registers."""
    for n in (8, 64, 256):
        tab = fragment_table(n)
        seen = {tuple(rc) for rc in tab.reshape(-1, 2)}
        assert len(seen) == 64 * n and seen == {(r, c) for r in range(64) for c in range(n)}
    assert (frag_row(0, 0), frag_col(0, 0)) == (0, 0)
    assert (frag_row(5, 3), frag_col(5, 3)) == (9, 3)      # lane 5: group 1, pair 1
    assert (frag_row(37, 4), frag_col(37, 4)) == (17, 10)  # warp 1, columns 8..15


_HEAD = ("@proc\ndef bad(x: f16[64, 16], y: f32[64, 64]):\n"
         "    for blk in par(0, 1) @ BLOCKS:\n"
         "        acc: f32[128, 32] @ REGISTER\n"
         "        a_s: f16[2, 64, 8] @ SHARED\n"
         "        b_s: f16[2, 64, 8] @ SHARED\n"
         "        g: f16[64, 16] @ SHARED\n"
         "        z: bf16[2, 64, 8] @ SHARED\n"
         "        a3: f16[4, 64, 8] @ SHARED\n"
         "        for t in par(0, 128) @ THREADS:\n")

BAD = [
    ("wgmma(acc[t, 0:32], a_s)", "takes the accumulator and the two SHARED"),
    ("wgmma(acc[t, 0:31], a_s, b_s)", "N = 62 is not a multiple of 8"),
    ("wgmma(acc[t, 0:32], g, b_s)", "the swizzled K-major form: its tile must be"),   # [64, 16]
    ("wgmma(acc[t, 0:32], g[0:64, 0:8], b_s)", "or [64, 16] window in a layout the hardware reads"),
    ("wgmma(acc[t, 0:32], a_s[0:2, 0:64, 0:4], b_s)", "extents [2, 64, 4]"),
    ("wgmma(acc[t, 0:32], a3[0:2, 0:64, 0:8], b_s[0:2, 0:32, 0:8])", "not [2, 64, 8]"),
    ("wgmma(acc[t, 0:32], a_s, z)", "hold one type"),
    ("wgmma(x[0:2, 0:16], a_s, b_s)", "REGISTER array of f32"),
    ("wgmma(acc[t, 0:32], x, b_s)", "SHARED array of f16, bf16 or f32"),
    ("wgmma(acc[t, 0:t], a_s, b_s)", "one range of N // 2"),
    ("wgmma_wait(t)", "integer constant"),
    ("wgmma_commit(1)", "no arguments"),
]


@pytest.mark.parametrize("stmt, msg", BAD)
def test_frontend_errors(stmt, msg):
    with pytest.raises(ProcError, match=msg.replace("(", r"\(").replace("[", r"\[")):
        proc_from_source(_HEAD + f"            {stmt}\n")


def test_a_window_of_a_bigger_tile_is_an_operand():
    p = proc_from_source(_HEAD + "            wgmma(acc[t, 0:32], a3[2:4, 0:64, 0:8], b_s)\n")
    assert "a3[2:4, 0:64, 0:8]" in str(p)


@pytest.mark.parametrize("n, form", [(8, "local"), (64, "local"), (64, "block"),
                                     (256, "local")])
def test_interpreter_equals_numpy(n, form):
    args = operands(n, 32, seed=n)
    gpudsl.interpret(gemm(n, form), **args)
    assert np.array_equal(args["c"], expected(args))


def test_bf16_and_the_race_detector():
    args = operands(16, 48, seed=3, dt=gpudsl.bf16.numpy)
    gpudsl.interpret(gemm(16, "block", "bf16"), detect_races=True, **args)
    assert np.array_equal(args["c"], expected(args))


def test_rounding_is_f32_in_order_of_k():
    """One product at a time in f32 (the meaning; the tensor cores may differ here)."""
    args = operands(8, 16, seed=1)
    args["a"][:] = 0
    args["bt"][:] = 0
    args["a"][0, 0], args["bt"][0, 0] = 2048, 1        # 2**11, then + 1 (rounds away)
    args["a"][0, 1], args["bt"][0, 1] = 1, 1
    args["a"][0, 2], args["bt"][0, 2] = 1, 1
    gpudsl.interpret(gemm(8), **args)
    assert args["c"][0, 0] == np.float32(2050)         # exact: f32 has room for it


def test_read_of_acc_before_the_wait_is_an_error():
    p = twin(gemm(64), WAITS, "                wgmma_commit()\n"
             "                c[0, 0] = acc[t, 0]\n                wgmma_wait(0)\n")
    with pytest.raises(InterpError, match=r"reads acc.*accumulator of the wgmma `wgmma\("):
        gpudsl.interpret(p, **operands(64, 16))


def test_write_of_an_operand_in_flight_is_an_error():
    p = twin(gemm(64, "block"), BLOCK_WAITS, "            wgmma_commit()\n")
    with pytest.raises(InterpError, match=r"writes a_s.*operand of the wgmma"):
        gpudsl.interpret(p, **operands(64, 32))


def test_in_flight_where_the_block_ends():
    p = twin(twin(gemm(8), WAITS, "                wgmma_commit()\n"), "= acc[t, i]", "= 0.0")
    with pytest.raises(InterpError, match="still in flight where the block's code ends"):
        gpudsl.interpret(p, **operands(8, 16))


def test_chained_wgmmas_on_one_accumulator_need_no_wait():
    """Two wgmmas of one shape on one accumulator are ordered by the hardware."""
    p = twin(gemm(8), "                wgmma(acc[t, 0:4], a_s[0:2, 0:64, 0:8], b_s[0:2, 0:8, "
             "0:8])\n", "                wgmma(acc[t, 0:4], a_s[0:2, 0:64, 0:8], b_s[0:2, 0:8, "
             "0:8])\n" * 2)
    args = operands(8, 32)
    gpudsl.interpret(p, detect_races=True, **args)
    assert np.array_equal(args["c"], 2 * expected(args))
    assert p.check(target="sm_90a").ok


@pytest.mark.parametrize("old, new", [
    ("for t in par(0, 128) @ THREADS:\n                wgmma",
     "for t in par(0, 96) @ THREADS:\n                wgmma"),
    ("                wgmma(acc[t, 0:32], a_s[0:2, 0:64, 0:8], b_s[0:2, 0:64, 0:8])\n",
     "                if t < 64:\n"
     "                    wgmma(acc[t, 0:32], a_s[0:2, 0:64, 0:8], b_s[0:2, 0:64, 0:8])\n")])
def test_a_partial_warpgroup_stops_the_interpreter(old, new):
    p = twin(gemm(64), old, new)
    with pytest.raises(InterpError, match="its 128 threads issue it together"):
        gpudsl.interpret(p, **operands(64, 16))


def test_outside_a_thread_loop():
    src = _HEAD.replace("        for t in par(0, 128) @ THREADS:\n",
                        "        wgmma(acc[0, 0:32], a_s, b_s)\n")
    p = proc_from_source(src)
    with pytest.raises(InterpError, match="outside any @ THREADS loop"):
        gpudsl.interpret(p, x=np.zeros((64, 16), np.float16), y=np.zeros((64, 64), np.float32))
    assert any(d.kind == "mapping" for d in p.check(target="sm_90a").diagnostics)


def test_names_mean_nothing_outside_procs():
    with pytest.raises(RuntimeError, match="only inside a @proc"):
        gpudsl.wgmma(1, 2, 3)
