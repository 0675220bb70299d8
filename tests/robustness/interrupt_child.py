"""``python interrupt_child.py emulator|check``: start something long, print "ready" just
before it, and print "KeyboardInterrupt" when Ctrl-C arrives (or "finished" if it ran to its
end, which the test counts as a failure).

``python interrupt_child.py check-rounds``: check() a proc of many statements (many short
queries) again and again, printing "verdict <time>" after each; a Ctrl-C prints
"KeyboardInterrupt <time>" (or "OTHER <exception>") and starts the next round."""
from __future__ import annotations

import sys
import time

import numpy as np

from gpudsl import BLOCKS, THREADS, f32, par, proc, seq, size


@proc
def spin(n: size, m: size, x: f32[n]):
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, m):
                x[64 * b + t] = x[64 * b + t] * 0.999 + 1.0


@proc
def hard(n: size, m: size, x: f32[n]):
    assert n > 1000
    for b in par(0, m) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            x[(b * b * b + t * t * t * 7 + b * t * 13) % n] = 1.0


def _checks(seconds: float = 600.0) -> None:
    """check() of ``hard`` with its proof cache cleared, again until ``seconds`` pass: a
    solver that decides it quickly (z3 4.x finds its race at once, 5.x searches for
    minutes) still keeps the process inside check() when the signal comes."""
    from gpudsl.analysis.check import _cache

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _cache.clear()
        hard.check(timeout=60)


def _many_statements(n: int = 24):
    from gpudsl import proc_from_source
    import gpudsl

    body = "\n".join(f"            x[{i} * 256 + t] = y[({i} * 256 + t * 7) % n] + "
                     f"x[{i} * 256 + t]" for i in range(n))
    return proc_from_source(f"""
def many(n: size, x: f32[n], y: f32[n]):
    assert n >= {256 * n}
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
{body}
""", vars(gpudsl))


def rounds() -> int:
    from gpudsl.analysis.check import _cache

    p = _many_statements()
    print("ready", flush=True)
    while True:
        try:
            while True:
                _cache.clear()
                p.check()
                print(f"verdict {time.monotonic()}", flush=True)
        except KeyboardInterrupt:
            print(f"KeyboardInterrupt {time.monotonic()}", flush=True)
        except Exception as e:  # noqa: BLE001 - what the test counts as a failure
            print(f"OTHER {type(e).__name__}: {e}".splitlines()[0], flush=True)


def main(what: str) -> int:
    if what == "check-rounds":
        return rounds()
    if what.startswith("emulator"):
        k = spin.compile("emulator", check=False)  # a racy spin loop, on purpose
        x = np.zeros(256 if what == "emulator" else 65536, np.float32)
        k(x=x, m=10)  # compiled and warm
        run = lambda: k(x=x, m=2_000_000_000)  # noqa: E731  (minutes)
    else:
        run = _checks  # each query up to a minute; again and again whatever the solver
    print("ready", flush=True)
    try:
        run()
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
    time.sleep(0.1)
    print("alive", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
