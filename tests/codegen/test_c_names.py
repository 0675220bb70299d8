"""Issue 39: C names of proc identifiers are one-to-one, so a proved kernel computes what
check() proved (a user's ``printf_`` and the escaped ``printf`` were one C name)."""
from __future__ import annotations

import keyword
import random
import shutil
import string

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, f32, index, par, proc, proc_from_source, seq
from gpudsl.codegen.cexpr import RESERVED, cname
from gpudsl.errors import ProcError
from gpudsl.runtime.nvrtc import compile_cubin

NS = {k: getattr(gpudsl, k) for k in dir(gpudsl) if not k.startswith("_")}
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@proc
def shadowed(printf: index, y: f32[64], z: f32[32, 60]):
    assert printf >= 0 and printf < 2
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            for printf_ in seq(0, 60):
                z[t, printf_] = 1.0
                y[32 * printf + t] = f32(printf_)


@needs_gxx
def test_an_escaped_name_and_a_user_name_stay_apart():
    assert shadowed.check().ok
    want, got = (np.zeros(64 + 4096, np.float32) for _ in range(2))
    z = np.zeros((32, 60), np.float32)
    shadowed.interpret(printf=0, y=want[:64], z=z)
    shadowed.compile("emulator")(printf=0, y=got[:64], z=z)
    assert want[0] == 59 and np.array_equal(got, want)
    assert not got[64:].any()                    # nothing written past y


def _escapes(name: str) -> list[str]:
    return [name, name + "_", name + "__", name + "___"]


def _names() -> list[str]:
    rng = random.Random(39)
    rand = ["".join(rng.choice(string.ascii_letters + "_") for _ in range(rng.randint(1, 4)))
            for _ in range(3000)]
    base = sorted(RESERVED) + ["x", "M_PI", "EOF", "SIGINT", "gpudsl_h0", "gpudsl", "_A",
                               "__x", "_", "k_k0", "i", "données"] + rand
    return sorted({e for n in base for e in _escapes(n)})


def test_cname_is_one_to_one_over_reserved_words_and_their_escapes():
    names = _names()
    out = {}
    for n in names:
        c = cname(n)
        assert c not in RESERVED, (n, c)
        assert c.isascii() and c.isidentifier(), (n, c)
        assert out.setdefault(c, n) == n, f"{n!r} and {out[c]!r} are both {c!r} in C"
    assert len(out) == len(names)


def _accepted(names):
    """Those of ``names`` a proc may use as a parameter (the frontend refuses its own
    builtins and Python refuses its keywords)."""
    ok = []
    for n in names:
        if keyword.iskeyword(n) or not n.isidentifier():
            continue
        try:
            proc_from_source(f"def p({n}: index, y: f32[1]):\n    y[0] = f32({n})\n", NS)
        except ProcError:
            continue
        ok.append(n)
    return ok


def _many_names_proc(names):
    params = ", ".join(f"{n}: index" for n in names)
    body = "\n".join(f"            y[{i}] = f32({n})" for i, n in enumerate(names))
    src = f"""
def many({params}, y: f32[{len(names)}]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
{body}
"""
    return proc_from_source(src, NS)


@pytest.fixture(scope="module")
def reserved_params():
    base = sorted(RESERVED | {"gpudsl_h0", "M_PI", "SIGINT", "EOF", "k_k0", "many_k0"})
    return _accepted([e for n in base for e in _escapes(n)])


@needs_gxx
def test_reserved_words_and_their_escapes_as_arguments_run_apart(reserved_params):
    names = reserved_params
    assert len(names) > 600 and "int" in names and "int_" in names and "printf_" in names
    p = _many_names_proc(names)
    args = {n: i + 1 for i, n in enumerate(names)}
    want = np.zeros(len(names), np.float32)
    p.interpret(**args, y=want)
    got = np.zeros(len(names), np.float32)
    p.compile("emulator", check=False)(**args, y=got)   # about names, not proofs
    assert np.array_equal(want, np.arange(1, len(names) + 1)) and np.array_equal(got, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_reserved_words_and_their_escapes_compile_with_nvrtc(reserved_params, arch):
    src = _many_names_proc(reserved_params).cuda_source()
    assert compile_cubin(src, arch).cubin[:4] == b"\x7fELF"
