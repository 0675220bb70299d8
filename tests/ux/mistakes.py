"""A new user's mistakes, one per command-line argument (run as a script by
tests/ux/test_error_display.py; each ends in an uncaught gpudsl.Error)."""
from __future__ import annotations

import sys

import numpy as np

from gpudsl import BLOCKS, SHARED, THREADS, f32, par, proc, size, sync


def misspelled_name():
    @proc
    def k(n: size, x: f32[n]):
        assert n % 32 == 0
        for b in par(0, n // 32) @ BLOCKS:
            for t in par(0, 32) @ THREADS:
                x[32 * b + t] = xx[32 * b + t]  # noqa: F821


def race():
    @proc
    def k(n: size, x: f32[n]):
        assert n % 32 == 0
        for b in par(0, n // 32) @ BLOCKS:
            for t in par(0, 32) @ THREADS:
                x[32 * b] = x[32 * b + t]

    k.check().raise_if_failed()


def _stencil_without_sync():
    @proc
    def stencil(n: size, x: f32[n], y: f32[n]):
        assert n % 32 == 0
        for b in par(0, n // 32) @ BLOCKS:
            s: f32[33] @ SHARED
            for t in par(0, 32) @ THREADS:
                s[t] = x[32 * b + t]
            for t in par(0, 32) @ THREADS:
                y[32 * b + t] = s[31 - t]
    return stencil


def missing_sync():
    _stencil_without_sync().check().raise_if_failed()


def missing_sync_compile():
    _stencil_without_sync().compile("emulator")


def out_of_bounds():
    @proc
    def k(n: size, x: f32[n], y: f32[n]):
        assert n % 32 == 0
        for b in par(0, n // 32) @ BLOCKS:
            for t in par(0, 32) @ THREADS:
                y[32 * b + t] = x[32 * b + t + 1]

    k.check().raise_if_failed()


def bad_launch_dtype():
    @proc
    def k(n: size, x: f32[n], y: f32[n]):
        assert n % 32 == 0
        for b in par(0, n // 32) @ BLOCKS:
            for t in par(0, 32) @ THREADS:
                y[32 * b + t] = x[32 * b + t]

    kern = k.compile("emulator")
    kern(x=np.zeros(64, np.float64), y=np.zeros(64, np.float32))


def sync_in_thread_loop():
    @proc
    def k(n: size, x: f32[n], y: f32[n]):
        assert n % 32 == 0
        for b in par(0, n // 32) @ BLOCKS:
            for t in par(0, 32) @ THREADS:
                y[32 * b + t] = x[32 * b + t]
                sync()

    k.check().raise_if_failed()


def interpret_out_of_bounds():
    import gpudsl

    @proc
    def k(n: size, x: f32[n], y: f32[n]):
        for i in par(0, n) @ THREADS:
            y[i] = x[i + 1]

    gpudsl.interpret(k, x=np.zeros(4, np.float32), y=np.zeros(4, np.float32))


MISTAKES = {f.__name__: f for f in (misspelled_name, race, missing_sync, missing_sync_compile,
                                     out_of_bounds, bad_launch_dtype, sync_in_thread_loop,
                                     interpret_out_of_bounds)}

if __name__ == "__main__":
    MISTAKES[sys.argv[1]]()
