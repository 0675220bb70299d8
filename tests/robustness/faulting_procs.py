"""Procs whose emulated kernels fault (issue 12), run by the tests in child processes:
``python faulting_procs.py NAME`` runs one and prints what it caught; it exits 0 only when
the process survived the fault and got a ``gpudsl.LaunchError``."""
from __future__ import annotations

import sys

import numpy as np

from gpudsl import BLOCKS, REGISTER, THREADS, f32, par, proc, seq, size


@proc
def big_register(n: size, x: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            r: f32[32768] @ REGISTER
            for i in seq(0, 32768):
                r[i] = 1.0 * i
            x[t] = r[t * 7]


@proc
def div_by_literal_zero(n: size, x: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            x[1 // 0] = 1.0


@proc
def div_by_size_zero(n: size, x: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            x[n // (n - 8)] = 1.0


@proc
def literal_out_of_range(n: size, x: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            x[100000000] = 1.0


def main(name: str) -> int:
    import gpudsl
    from gpudsl.compiler.compiled_kernel import Kernel
    from gpudsl.runtime import emulator

    x = np.zeros(8, np.float32)
    if name == "big_register_small_stack":  # a stack too small: the overflow is caught
        p = big_register
        orig = emulator.build_emulator_module
        emulator.build_emulator_module = lambda s, k, **kw: orig(s, k, stack_kb=64, **kw)
    else:
        p = globals()[name]
    k = Kernel(p, "emulator", check=False)  # check() flags these: run them unproved
    try:
        k(x=x)
    except gpudsl.LaunchError as e:
        print("LaunchError:", e, flush=True)
        return 0
    print("ran:", x.tolist(), flush=True)
    return 0 if name == "big_register" and x[1] == 7.0 else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
