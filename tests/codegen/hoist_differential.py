"""The differential test of loop-invariant read hoisting (gpudsl/codegen/hoist.py):
random small kernels whose sequential loops read GLOBAL elements at indices that may or
may not depend on the loop, may be out of bounds unless a condition or the loop's running
holds, from arrays the kernel may or may not write, run by the interpreter (the
reference meaning) and by the generated C on the emulator.

A case whose interpretation fails (an out-of-bounds read that really happens) is
skipped: the program is wrong for those inputs.  Otherwise the emulator must give the
same arrays; an index far out of bounds (``10**9``) makes a wrongly hoisted load fault
on the emulator, so hoisting a read that the loop never performs shows as a mismatch.
The outcome counts the cases whose C hoisted at least one read.

``python -m tests.codegen.hoist_differential --seconds N [--seed S]`` is the long mode;
``tests/codegen/test_hoist.py`` runs a few cases in CI.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field

import numpy as np

import gpudsl
from gpudsl.errors import Error

NS = vars(gpudsl)
FAR = 10 ** 9
INDICES = ["k", "0", "n - 1", "k % n", "min(max(k, 0), n - 1)", "j", "k + j", "ix[0]",
           "ix[t % 4]", "m"]
CONDS = ["True", "k >= 0 and k < n", "j < m", "j < n", "k < n and k >= 0 and j < m",
         "ix[0] >= 0 and ix[0] < n"]
TRIPS = ["m", "n", "4", "min(k, 5)", "ix[1]"]


@dataclass
class Outcome:
    cases: int = 0
    skipped: int = 0       # the interpreter refused the inputs (a real out-of-bounds read)
    hoisting: int = 0      # cases whose C hoisted at least one read
    mismatches: list = field(default_factory=list)


def _stmt(rng: random.Random, depth: int) -> list[str]:
    """One statement of the loop body (lines, relative indent)."""
    kind = rng.choice(["acc", "acc", "select", "write_x", "if", "inner"] if depth < 2
                      else ["acc", "select", "write_x"])
    idx = rng.choice(INDICES)
    if kind == "acc":
        return [f"y[t % 8] += x[{idx}] * 0.5"]
    if kind == "select":
        return [f"y[t % 8] = select({rng.choice(CONDS)}, x[{idx}], y[t % 8])"]
    if kind == "write_x":
        return [f"if t == 0 and {rng.choice(['k >= 0 and k < n', 'j < n'])}:",
                f"    x[{rng.choice(['k', 'j'])}] = x[0] + 1.0"]
    if kind == "if":
        body = _stmt(rng, depth + 1)
        return [f"if {rng.choice(CONDS)}:"] + ["    " + ln for ln in body]
    body = _stmt(rng, depth + 1)
    return ["for jj in seq(0, 2):"] + ["    " + ln.replace("j ", "jj ").replace("j]", "jj]")
                                       for ln in body]


def source(rng: random.Random) -> str:
    lines = ["def f(n: size, k: index, m: index, x: f32[n], ix: i32[4], y: f32[8]):",
             "    for b in par(0, 1) @ BLOCKS:"]
    threads = rng.choice([1, 4])
    if rng.random() < 0.3:  # another thread nest writes x first: x is written in the kernel
        lines += [f"        for t in par(0, {threads}) @ THREADS:",
                  "            if t == 0:",
                  "                x[n - 1] = 2.0",
                  "        sync()"]
    lines += [f"        for t in par(0, {threads}) @ THREADS:",
              f"            for j in seq(0, {rng.choice(TRIPS)}):"]
    for _ in range(rng.randint(1, 3)):
        lines += ["                " + ln for ln in _stmt(rng, 0)]
    return "\n".join(lines) + "\n"


def inputs(rng: random.Random) -> dict:
    n = rng.choice([1, 3, 8])
    k = rng.choice([0, 2, n - 1, n, FAR, -1])
    m = rng.choice([0, 3, -2, n])
    ix = np.array([rng.choice([0, n - 1, n, FAR]), rng.choice([0, 2, 5]), 1, 0], np.int32)
    return dict(k=k, m=m, x=(np.arange(n, dtype=np.float32) + 1), ix=ix,
                y=np.zeros(8, np.float32))


def _copy(args):
    return {a: (v.copy() if isinstance(v, np.ndarray) else v) for a, v in args.items()}


def run_case(src: str, args: dict, out: Outcome) -> None:
    out.cases += 1
    try:
        p = gpudsl.proc_from_source(src, namespace=NS)
        text = p.cuda_source()
    except Error:
        out.skipped += 1
        return
    ref = _copy(args)
    try:
        gpudsl.interpret(p, **ref)
    except Error:
        out.skipped += 1
        return
    hoisted = "gpudsl_h" in text
    out.hoisting += hoisted
    emu = _copy(args)
    try:
        p.compile("emulator", check=False)(**emu)
    except Error as e:
        out.mismatches.append((src, {a: v for a, v in args.items() if not
                                     isinstance(v, np.ndarray)}, f"emulator: {e}"[:300]))
        return
    for a in ("x", "y"):
        if not np.array_equal(ref[a], emu[a]):
            out.mismatches.append((src, {k: v for k, v in args.items() if not
                                         isinstance(v, np.ndarray)}, f"{a}: {ref[a]} vs {emu[a]}"))
            return


def run(seed: int, cases: int | None = None, seconds: float | None = None,
        inputs_per_case: int = 3) -> Outcome:
    rng = random.Random(seed)
    out = Outcome()
    t0 = time.time()
    k = 0
    while (cases is None or k < cases) and (seconds is None or time.time() - t0 < seconds):
        src = source(rng)
        for _ in range(inputs_per_case):
            run_case(src, inputs(rng), out)
        k += 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ns = ap.parse_args(argv)
    t0 = time.time()
    out = run(ns.seed, seconds=ns.seconds)
    print(f"seed {ns.seed}, {time.time() - t0:.0f} s: {out.cases} runs, {out.skipped} skipped "
          f"(the interpreter refused the inputs), {out.hoisting} runs of C that hoisted a "
          f"read, {len(out.mismatches)} mismatches")
    for src, vals, why in out.mismatches[:5]:
        print("----", vals, why)
        print(src)
    return 1 if out.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
