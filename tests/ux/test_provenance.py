"""Issue 14 / docs/errors.md: a statement made by a primitive remembers its origin; diagnostics
quote the statement as it now reads and name the primitive call (file:line)."""
from __future__ import annotations

import os

from gpudsl import BLOCKS, THREADS, f32, par, proc, proc_from_source, seq, size
from gpudsl.errors import quote
from gpudsl.ir.visitor import walk
from gpudsl.schedule import divide_loop, parallelize_loop


@proc
def shifted(n: size, x: f32[n], y: f32[n]):
    assert n % 32 == 0
    for i in seq(0, n):
        y[i] = x[i + 1]


def _schedule():
    p = divide_loop(shifted, "i", 32, ["b", "t"], tail="perfect")  # LINE-DIVIDE
    p = parallelize_loop(p, "b", BLOCKS)
    return parallelize_loop(p, "t", THREADS)


def _line(tag):
    for n, text in enumerate(open(__file__).read().splitlines(), 1):
        if tag in text and "def _line" not in text and "_line(" not in text:
            return n
    raise AssertionError(tag)


def test_report_quotes_the_statement_as_it_now_reads_and_names_the_call():
    p = _schedule()
    report = p.check()
    assert report.kinds() == {"bounds"}
    text = str(report)
    assert "| y[32 * b + t] = x[32 * b + t + 1]" in text
    assert "| y[i] = x[i + 1]" not in text
    assert f"made by divide_loop at {__file__}:{_line('LINE-DIVIDE')}: " \
           f"p = divide_loop(shifted" in text


def test_statements_keep_their_origin_position_and_equality():
    p = _schedule()
    assign = p.ir.body[0].body[0].body[0]
    assert assign.loc.text == "y[32 * b + t] = x[32 * b + t + 1]"
    assert assign.loc.made_by.startswith("divide_loop at ")
    assert assign.loc.line == shifted.ir.body[0].body[0].loc.line  # still points at the def
    thread_loop = p.ir.body[0].body[0]
    assert thread_loop.loc.made_by.startswith("parallelize_loop at ")
    assert "(made by divide_loop" in quote(assign.loc)
    # locations take no part in equality: a printed proc parses back equal
    assert proc_from_source(str(p)) == p


def test_statements_a_primitive_does_not_change_keep_the_users_line():
    q = divide_loop(shifted, "i", 32, ["b", "t"], tail="perfect")
    r = parallelize_loop(q, "b", BLOCKS)
    assert shifted.ir.body[0].loc.made_by is None
    inner = r.ir.body[0].body[0]  # the loop over t: divide_loop made it, parallelize kept it
    assert inner.loc.made_by.startswith("divide_loop at ")
    assert r.ir.body[0].loc.made_by.startswith("parallelize_loop at ")


def test_equal_procs_from_two_places_are_each_reported_at_their_own_place():
    text = ("def racy(n: size, x: f32[n]):\n"
            "    for i in par(0, n) @ THREADS:\n"
            "        x[0] = x[i]\n")
    ns = {}
    a = proc_from_source(text, ns, file="<cell-a>")
    b = proc_from_source(text, ns, file="<cell-b>")
    assert a == b
    assert "<cell-a>:3" in str(a.check()) and "<cell-b>:3" in str(b.check())
    import pytest

    import gpudsl

    for p, where in ((a, "<cell-a>:3"), (b, "<cell-b>:3")):
        with pytest.raises(gpudsl.CheckError) as e:
            p.compile("emulator")
        assert where in str(e.value)


def test_a_stdlib_kernels_statements_are_made_by_the_stdlibs_lines():
    # a stdlib schedule calls the primitives: its statements were stamped with whatever
    # script first asked for the kernel (and, read back from the derivation cache, shown
    # in another process's messages); they name the stdlib's own lines
    import inspect

    from gpudsl.stdlib import matmul

    p = inspect.unwrap(matmul.cut_kernel)(False, 4)
    made = {n.loc.made_by for n in walk(p.ir) if getattr(n, "loc", None) is not None
            and n.loc.made_by}
    assert made and all(os.sep + os.path.join("gpudsl", "stdlib", "") in m for m in made)
    assert not any(__file__ in m for m in made)
