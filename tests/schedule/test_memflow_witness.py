"""Coverage questions of the memory primitives decided without a quantifier (issue 28):
``expand_dim`` of a staged tile asks whether each read of the tile is covered by the
copy's write of the same element.  With the copy's iteration under an existential, z3
4.12-4.16 answered "unknown" and the TF32 matmul's double buffer was refused; the copy's
iteration is now given explicitly (a mixed-radix inverse of its index) and the question
is quantifier-free."""
import types

import z3

from gpudsl.schedule import memflow
from gpudsl.ir.nodes import BinOp, Const, For, Var
from gpudsl.ir.types import INDEX
from gpudsl.ir.printer import print_expr
from gpudsl.ir.stmt_effects import RegionAccess


def _no_exists(monkeypatch):
    calls = []

    def refuse(*a, **k):
        calls.append(a)
        raise AssertionError("a coverage question was asked with an existential")

    fake = types.SimpleNamespace(**{n: getattr(z3, n) for n in dir(z3) if not n.startswith("__")})
    fake.Exists = refuse
    monkeypatch.setattr(memflow, "z3", fake)
    return calls


def test_tf32_double_buffer_is_proved_without_an_existential(monkeypatch):
    from gpudsl.stdlib.matmul_parts import matmul_algorithm
    from gpudsl.stdlib.matmul_tf32 import schedule_matmul_tf32

    calls = _no_exists(monkeypatch)
    p = schedule_matmul_tf32(matmul_algorithm(False, (128, 128, 16)), bm=128, bn=128,
                             bk=16, wm=64, wn=64, double_buffer=True)
    assert "As" in str(p) and not calls


def test_mixed_radix_shape():
    def B(op, a, b):
        return BinOp(op, a, b, INDEX)

    v, u, n = Var("v"), Var("u"), Var("n")
    e = B("+", B("*", Const(32), v), B("+", B("*", Const(2), B("//", u, Const(2))),
                                          B("+", B("%", u, Const(2)), n)))
    terms, rest = memflow._mixed_radix(e, {"v", "u"})
    assert [(c, a if isinstance(a, str) else (a[0], a[1].name, a[2]))
            for c, a in sorted(terms, key=lambda t: t[0])] == [
        (1, ("%", "u", 2)), (2, ("//", "u", 2)), (32, "v")]
    assert rest == [(1, n)]
    # a product of two loop variables, or a negative coefficient, is not that shape
    assert memflow._mixed_radix(B("*", v, u), {"v", "u"}) is None
    assert memflow._mixed_radix(B("-", n, v), {"v"}) is None


def test_flattened_copy_index_is_inverted(monkeypatch):
    # the copy of the fp32 matmul writes As[4 * (L % 2) + i1v, L // 2] with
    # L = 32 * ias + 8 * iay + iax: refused by lift_alloc on z3 4.15 before
    from gpudsl.stdlib import matmul
    from gpudsl.stdlib.matmul import matmul_kernel

    getattr(matmul.big_kernel, "cache_clear", lambda: None)()  # built afresh here
    calls = _no_exists(monkeypatch)
    p = matmul_kernel((32, 32), (32, 32), bm=32, bn=32, bk=8, tm=8, tn=4, stages=1,
                      async_stages=0)[0]
    assert "As" in str(p) and not calls


def test_wgmma_epilogue_staging_is_proved_without_an_existential(monkeypatch):
    # the sm_90a GEMM stages its output tile: each thread writes Cs[16 * (t // 4 // 8) +
    # 8 * ((32 ch + cf) // 2 % 2) + t // 4 % 8, 8 * ((32 ch + cf) // 2 // 2) + 2 * (t % 4)
    # + (32 ch + cf) % 2 - 64 ch] (the wgmma accumulator's layout); `32 ch + cf` gets
    # its quotient only once `(32 ch + cf) // 2` is read off. The inverse was given up
    # when an X's halves came in the other order, the existential was asked, and on z3
    # 4.13-4.16 the window was thought read: a copy in, then warp_specialize refused
    # the derivation (a race on Cs) under .ci/oldest
    from gpudsl.stdlib import matmul_sm90

    matmul_sm90._sm90_kernel.cache_clear()
    calls = _no_exists(monkeypatch)
    p = matmul_sm90.sm90_kernel("f16", bn=64, wgs=1, bk=32, stages=2)
    matmul_sm90._sm90_kernel.cache_clear()
    assert "Cs[" in str(p) and "= c[" not in str(p) and not calls


def test_a_vector_copy_is_one_write_in_the_coverage_question(monkeypatch):
    # the sm_80 half GEMM's tiles are copied 8 halves at a time (one statement, eight
    # write effects): asked as eight alternatives, each with its own `(v - j) // 8`,
    # the explicit question of the pipelined B tile took 21 s and timed out on z3 4.x
    from gpudsl.stdlib import matmul_sm80

    asked = []
    orig = memflow._covered_by

    def spy(pdef, addr, r, writes, split):
        asked.append((len(writes), len({id(w.leaf) for w in writes})))
        return orig(pdef, addr, r, writes, split)

    monkeypatch.setattr(memflow, "_covered_by", spy)
    matmul_sm80._sm80_kernel.cache_clear()
    try:
        p = matmul_sm80._sm80_kernel("f16", 64, 64, 32, 32, 32, 2, False)
    finally:
        matmul_sm80._sm80_kernel.cache_clear()
    assert "Bs" in str(p) and asked
    assert all(n == statements for n, statements in asked), asked


def _site(idx, leaf, loops=()):
    acc = RegionAccess("s", "w", tuple(idx), loops, (), leaf)
    return memflow._Site(acc, (0,), (), leaf)


def test_merge_lanes_only_merges_a_whole_run_of_offsets():
    from gpudsl.schedule.memflow_lanes import merge_lanes

    def B(op, a, b):
        return BinOp(op, a, b, INDEX)

    t, leaf = Var("t"), object()
    base = B("*", Const(8), t)

    def run(offsets, other=leaf):
        return [_site((Var("r"), B("+", base, Const(c)) if c else base),
                      leaf if c != 3 else other) for c in offsets]

    whole = merge_lanes(run(range(8)), memflow._Site)
    assert len(whole) == 1
    (m,) = whole
    assert m.acc.loops[-1].iter == "_lane" and m.acc.loops[-1].hi == Const(8)
    assert "_lane" in print_expr(m.acc.idx[1])
    # a lane missing (7 of 8) or a gap: the writes stay as they are
    assert len(merge_lanes(run([0, 1, 2, 3, 4, 5, 7]), memflow._Site)) == 7
    # writes of different statements are never one write
    assert len(merge_lanes(run(range(8), other=object()), memflow._Site)) == 8
    # a loop of the write already named _lane: the lane takes another name
    own = For("_lane", Const(0), Const(2), ())
    (m2,) = merge_lanes([_site((Var("_lane"), B("+", base, Const(c)) if c else base), leaf,
                               (own,)) for c in range(8)], memflow._Site)
    assert m2.acc.loops[-1].iter not in ("_lane", "t")
    assert m2.acc.loops[-1].iter in print_expr(m2.acc.idx[1])
    # two indices differing: not a vector copy
    odd = [_site((B("+", Var("r"), Const(c)), B("+", base, Const(c)) if c else base), leaf)
           for c in range(4)]
    assert len(merge_lanes(odd, memflow._Site)) == 4
