"""replace_slice's run-time guard against i64 wrap-around (found merging the integer
meaning of check() with index-only normalisation): ``end[0] - begin[0] == m`` is i64
arithmetic, which wraps in C and now in check(); with ``end`` near -2^63 it equals a
huge ``m`` while ``begin + i`` leaves ``x``.  The guard now asks ``begin <= end`` first."""
from __future__ import annotations

import gpudsl
from gpudsl.stdlib.slices import replace_slice_kernel


def test_replace_slice_kernels_are_proved():
    for vec in (1, 4):
        assert replace_slice_kernel(vec, 64).check().ok


def test_the_old_guard_is_refused_with_a_wrapping_witness():
    p = replace_slice_kernel(1, 64)
    old = gpudsl.proc_from_source(str(p).replace("begin[0] <= end[0] and ", ""))
    report = old.check()
    assert not report.ok and report.kinds() == {"bounds"}
    assert report.diagnostics[0].witness["sizes"]["m"] > 2 ** 62
