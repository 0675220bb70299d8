"""Stream compaction: ``k = atomic_add(c[0], 1); out[k] = ...`` (issue 28).  The old
values of a counter that only grows are distinct between executions of one launch, so
check() proves the writes race-free; every variant that breaks the argument stays a
race, with the detector as referee where it can see one."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl

NS = vars(gpudsl)


def _compact(assume="n < 1073741824", counter="i32", pre="", inc="1", idx="0",
             extra="", inner=""):
    return gpudsl.proc_from_source(f'''
def compact(n: size, x: f32[n], out: f32[n], c: {counter}[2]):
    assert n % 64 == 0 and {assume}
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
{pre}
            if x[64 * b + t] > 0.0:
                k: {counter}
                k = atomic_add(c[{idx}], {inc})
{extra}
                if k >= 0 and k < n:
{inner or "                    out[k] = x[64 * b + t]"}
''', namespace=NS)


def _run(p, n=128, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    c = np.zeros(2, np.int32 if "i32" in str(p) else np.int64)
    gpudsl.interpret(p, detect_races=True, n=n, x=x, out=out, c=c)
    return x, out, c


def test_stream_compaction_is_proved_and_compacts():
    p = _compact()
    rep = p.check()
    assert rep.ok, str(rep)
    assert p.check(n=128).ok
    x, out, c = _run(p)
    kept = np.sort(x[x > 0])
    assert c[0] == len(kept)
    np.testing.assert_array_equal(np.sort(out[:c[0]]), kept)
    y = np.zeros(128, np.float32)
    p.compile("emulator")(x=x, out=y, c=np.zeros(2, np.int32))
    np.testing.assert_array_equal(np.sort(y[:c[0]]), kept)


def test_i64_counter_needs_no_size_bound_below_2_to_the_63():
    assert _compact(assume="n < 4611686018427387904", counter="i64").check().ok


def test_a_counter_that_may_wrap_is_a_race_with_the_sizes_that_wrap_it():
    rep = _compact(assume="n > 0").check()
    races = rep.of_kind("race")
    assert races and races[0].witness["sizes"]["n"] >= 2 ** 32


@pytest.mark.parametrize("kw", [
    dict(pre="            c[0] = 0"),                         # a plain write of the counter
    dict(pre="            atomic_sub(c[0], 1)"),              # the counter may go down
    dict(inc="0"),                                            # no progress
    dict(idx="t % 2", extra=""),                              # two counters
    dict(extra="                k = k + 0"),                  # the local written twice
])
def test_variants_that_break_the_argument_stay_races(kw):
    rep = _compact(**kw).check()
    assert "race" in rep.kinds() or "unknown" in rep.kinds(), str(rep)


def test_two_counter_elements_really_race():
    # c[t % 2]: two threads of different counters get the same ticket
    p = _compact(idx="t % 2")
    with pytest.raises(gpudsl.RaceError):
        _run(p)
    assert "race" in p.check().kinds()


def test_one_ticket_shared_by_the_iterations_of_a_par_loop_races():
    p = _compact(inner="""                    for j in par(0, 2):
                        out[k] = x[64 * b + t] + j""")
    assert "race" in p.check().kinds()
