"""Adversarial Hopper kernels (SPEC 2.9): each twin in hopper_unsafe_cases.MUTANTS has one
deliberate bug an expert could make (a ring slot read before its wait, a TMA landing on
the wrong barrier, a wgmma group left in flight, a cluster barrier on the rank, registers
over the file, ...).  check() proves every base and refuses every twin with the right
kind and, where the kind has one, a witness; the interpreter's race detector, run at the
witness's sizes, stops on every race twin it can run.  The slow twins (a GEMM's ring
proved for every m, n, k: 3-9 s each) are marked slow."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ProcError, proc_from_source

from .helpers import make_args, sample_sizes
from .hopper_unsafe_cases import BASES, MUTANTS, PARSE_REFUSED

NS = vars(gpudsl)
SLOW_BASES = {"gemm_tma", "gemm_swz"}
#  refused without a witness (the kinds' messages name the statements only)
NO_WITNESS = {"ring_prime_other_range", "copy_count_mismatch", "copy_arrive_other_thread"}
#  races the interpreter does not see at the witness's sizes, and why
NOT_DYNAMIC: dict = {}


def _marks(base):
    return [pytest.mark.slow] if base in SLOW_BASES else []


def _twin(m):
    name, base, old, new, kind, count = m
    src = BASES[base]
    assert src.count(old) == count, f"{name}: the pattern no longer matches its base"
    return src.replace(old, new)


@pytest.mark.parametrize("base", [pytest.param(b, marks=_marks(b)) for b in BASES])
def test_base_proves(base):
    assert proc_from_source(BASES[base], NS).check(target="sm_90a").ok


def _race_sizes(p, d):
    sizes = dict(d.witness.get("sizes") or {})
    return sample_sizes(p, sizes) if any(q.kind == "size" and q.name not in sizes
                                         for q in p.ir.params) else sizes


@pytest.mark.parametrize("m", [pytest.param(m, id=m[0], marks=_marks(m[1])) for m in MUTANTS])
def test_twin_refused(m):
    name, kind = m[0], m[4]
    p = proc_from_source(_twin(m), NS, file=f"<{name}>")
    rep = p.check(target="sm_90a")
    assert not rep.ok and kind in rep.kinds(), f"{name}: {rep}"
    ds = rep.of_kind(kind)
    if kind != "unknown" and name not in NO_WITNESS:
        assert any(d.witness for d in ds), f"{name}: no witness\n{rep}"
    if kind != "race" or name in NOT_DYNAMIC:
        return
    d = next(d for d in ds if d.witness)
    args = make_args(p, _race_sizes(p, d))
    with pytest.raises((gpudsl.RaceError, gpudsl.InterpError)):
        gpudsl.interpret(p, detect_races=True, **args)


@pytest.mark.parametrize("m", [pytest.param(m, id=m[0]) for m in PARSE_REFUSED])
def test_twin_refused_when_read(m):
    """Twins the language refuses as it reads them, before check()."""
    with pytest.raises(ProcError, match=m[4]):
        proc_from_source(_twin(m), NS)
