"""The whole acceptance grid of attention in half precision (issue 27), longer than CI:
decode (1 query row against a cache of 300) and prefill (L rows against L + 5), causal
and not, prefix L in 1 / 17 / 256, head dimensions 64 / 128, f16 and bf16, on the
emulator (``gpudsl.ops.attention``) and in the interpreter (the planned kernel; with the
race detector up to 17 rows).  Prints one line per case (the worst absolute error and
the worst ratio of the error to the stated tolerance, which must stay <= 1) and exits 1
if any case is outside it.

    python -m tests.stdlib.attention_half_grid [--no-interpreter]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from gpudsl import ops
from gpudsl.stdlib.attention import attention_reference, attention_tolerance, plan_attention
from tests.stdlib.test_attention_half import inputs, interpret


def errors(got, want, dt):
    atol, rtol = attention_tolerance(dt)
    e = np.abs(got.astype(np.float64) - want)
    return float(e.max()), float((e / (atol + rtol * np.abs(want))).max())


def main(argv=()) -> int:
    targets = ["emulator"] + ([] if "--no-interpreter" in argv else ["interpreter"])
    bad = 0
    worst = {}
    for dt in ("f16", "bf16"):
        for d in (64, 128):
            for length in (1, 17, 256):
                for shape in ("decode", "prefill"):
                    m, n = (1, 300) if shape == "decode" else (length, length + 5)
                    q, k, v = inputs(2 if shape == "decode" else 1, m, n, d, dt)
                    for causal in (False, True):
                        want = attention_reference(q, k, v, causal, length)
                        for target in targets:
                            t0 = time.time()
                            if target == "emulator":
                                got = ops.attention(q, k, v, causal=causal, prefix=length)
                            else:
                                p = plan_attention(m, d, causal, q.shape[0], n, dt=dt)
                                got = interpret(p, q, k, v, length,
                                                detect_races=m <= 17)
                            err, ratio = errors(got, want, dt)
                            bad += ratio > 1
                            key = (dt, target)
                            worst[key] = max(worst.get(key, (0, 0)), (ratio, err))
                            print(f"{dt:4} d={d:3} L={length:3} {shape:7} causal={causal!s:5} "
                                  f"{target:11} err {err:.2e} err/tol {ratio:.3f} "
                                  f"({time.time() - t0:.1f} s)", flush=True)
    for (dt, target), (ratio, err) in sorted(worst.items()):
        print(f"worst {dt} {target}: err {err:.2e}, err/tol {ratio:.3f}")
    print("cases outside the tolerance:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
