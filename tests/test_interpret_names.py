"""No parameter name of a proc collides with the API (issue 28): ``interpret(p, ...)``
of a proc with a parameter named ``p`` or ``detect_races`` raised TypeError (multiple
values); the option is then ``_detect_races``, as check()'s ``_timeout``."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import RaceError

NS = vars(gpudsl)

Q = gpudsl.proc_from_source('''
def f(p: index, detect_races: index, self: index, x: f32[8]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            x[0] = f32(p + detect_races + self)
''', namespace=NS)


def test_parameters_named_like_the_api():
    for run in (lambda **k: gpudsl.interpret(Q, **k), Q.interpret):
        x = np.zeros(8, np.float32)
        run(p=1, detect_races=2, self=4, x=x)
        assert x[0] == 7.0
    with pytest.raises(RaceError):
        gpudsl.interpret(Q, p=1, detect_races=2, self=4, x=np.zeros(8, np.float32),
                         _detect_races=True)
    assert gpudsl.check(Q, p=1).ok is False  # the race: every thread writes x[0]
    assert Q.check(p=1).ok is False


def test_detect_races_is_still_the_option_for_other_procs():
    r = gpudsl.proc_from_source('''
def g(x: f32[8]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            x[0] = 1.0
''', namespace=NS)
    gpudsl.interpret(r, x=np.zeros(8, np.float32))
    with pytest.raises(RaceError):
        gpudsl.interpret(r, x=np.zeros(8, np.float32), detect_races=True)
    with pytest.raises(RaceError):
        r.interpret(x=np.zeros(8, np.float32), detect_races=True)
