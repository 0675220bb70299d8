"""Issue 14: notebook displays of Proc, Report, Kernel and schedule.diff, asserted on
their HTML (and plain text)."""
from __future__ import annotations

import html
import re

import pytest

from gpudsl.schedule import diff, divide_loop, parallelize_loop
from gpudsl import BLOCKS, THREADS

from .test_provenance import shifted
from .test_safe_compile import stencil, stencil_no_sync


def text_of(h: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", h))


def test_proc_html_is_highlighted_source():
    h = stencil._repr_html_()
    assert 'class="gpudsl-proc"' in h and "<pre" in h
    assert "proc stencil" in text_of(h)
    assert "s[t] = x[32 * b + t]" in text_of(h)
    pytest.importorskip("pygments")
    assert "<span style=" in h  # highlighted


def test_report_html_lists_diagnostics_lines_and_witness_table():
    r = stencil_no_sync.check()
    h = r._repr_html_()
    t = text_of(h)
    assert 'class="gpudsl-report"' in h and "failed" in t
    assert "error[race]" in t and "data race on SHARED array 's'" in t
    assert t.count("test_safe_compile.py:") == 2  # both accesses located
    assert "s[t] = x[32 * b + t]" in t and "y[32 * b + t] = s[31 - t]" in t
    table = re.search(r'<table class="gpudsl-witness".*?</table>', h).group(0)
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    cells = [[text_of(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)] for r in rows]
    assert cells[0] == ["", "b", "t", "blockIdx", "threadIdx", "access"]
    assert cells[1][0] == "thread 1" and cells[2][0] == "thread 2"
    assert {cells[1][5], cells[2][5]} == {"write of s[t]", "read of s[31 - t]"}
    assert "hint:" in t
    ok = stencil.check()._repr_html_()
    assert 'class="gpudsl-ok"' in ok and "gpudsl-diagnostic" not in ok


def test_report_html_names_the_primitive_that_made_a_statement():
    p = divide_loop(shifted, "i", 32, ["b", "t"], tail="perfect")
    p = parallelize_loop(parallelize_loop(p, "b", BLOCKS), "t", THREADS)
    t = text_of(p.check()._repr_html_())
    assert "y[32 * b + t] = x[32 * b + t + 1]" in t
    assert "made by divide_loop at " in t


def test_kernel_html_geometry_target_and_proof():
    k = stencil.compile("emulator")
    h = k._repr_html_()
    t = text_of(h)
    assert "Kernel stencil" in t and "emulator" in t and "proved" in t
    assert "backend emulator target sm_90a" in t   # how it runs, what it was proved for
    assert str(k).startswith("Kernel stencil backend=emulator target=sm_90a proved")
    geo = re.search(r'<table class="gpudsl-geometry".*?</table>', h).group(0)
    assert "stencil_k0" in geo and "(n // 32, 1, 1)" in text_of(geo)
    assert "(32, 1, 1)" in text_of(geo)
    assert "stencil_k0: grid (n // 32, 1, 1), block (32, 1, 1)" in str(k)
    u = stencil_no_sync.compile("emulator", check=False)
    assert "not proved" in text_of(u._repr_html_()) and 'class="gpudsl-fail"' in u._repr_html_()
    assert "NOT proved" in str(u)


def test_diff_side_by_side():
    p = divide_loop(shifted, "i", 32, ["b", "t"], tail="perfect")
    d = diff(shifted, p)
    assert d.changed
    h = d._repr_html_()
    assert 'class="gpudsl-diff"' in h
    rows = re.findall(r"<tr>(.*?)</tr>", h)
    pairs = [[text_of(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows[1:]]
    assert ["    for i in seq(0, n):", "    for b in seq(0, n // 32):"] in pairs
    assert ["        y[i] = x[i + 1]", "        for t in seq(0, 32):"] in pairs or any(
        a == "        y[i] = x[i + 1]" for a, _ in pairs)
    assert 'class="gpudsl-diff-replace"' in h
    assert "-    for i in seq(0, n):" in str(d) and "+    for b in seq(0, n // 32):" in str(d)
    assert not diff(p, p).changed
