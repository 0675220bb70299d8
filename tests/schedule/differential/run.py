"""The differential run: random procs, random sequences of 1-4 applications,
each judged by the oracle; per-primitive figures and reproducible failures.

Case ``k`` of a run with seed ``s`` depends on ``(s, k)`` only, so a run is
deterministic for a seed (how many cases fit in the time budget varies) and a
failure replays from its case number alone (``--case K``).
"""
from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import gpudsl
from gpudsl import SchedulingError

from .apply import PRIMITIVES, Step, random_step
from .oracle import Oracle
from .procgen import CALL_ORDER, CALLEES, Gen, Program


# the share of programs whose arrays and scalars are f16 (vectorize's half copies,
# the interpreter's float16 arithmetic); a program that then calls an f32 callee does
# not parse and counts as skipped
HALF_SHARE = 0.15


def load_callees() -> dict:
    ns: dict = {}
    for name in CALL_ORDER:
        ns[name] = gpudsl.proc_from_source(CALLEES[name], dict(ns), file=f"<{name}>")
    return ns


@dataclass
class Failure:
    case: int
    seed: int
    program: Program
    steps: list  # accepted steps before the failing one, then the failing one
    cls: str
    message: str

    @property
    def prim(self) -> str:
        return self.steps[-1].prim

    @property
    def signature(self):
        return (self.prim, self.cls)

    def repro(self) -> str:
        """A Python script that reproduces the failure."""
        callees = [c for c in CALL_ORDER if c in self.program.source or
                   any(c in s.code() for s in self.steps)]
        lines = [f'"""differential failure: {self.prim}: {self.cls}',
                 "",
                 f"{self.message}",
                 "",
                 f"seed {self.seed}, case {self.case}; sizes {self.program.sizes}",
                 '"""',
                 "import gpudsl",
                 "from gpudsl import *",
                 "from gpudsl.schedule import *",
                 "from gpudsl.schedule.cursors import Cursor",
                 "from tests.schedule.differential.oracle import Oracle",
                 "", "ns = {}"]
        for c in callees:
            lines.append(f"ns[{c!r}] = {c} = gpudsl.proc_from_source('''{CALLEES[c]}''', "
                         "dict(ns))")
        lines += [f"p0 = p = gpudsl.proc_from_source('''@proc\n{self.program.source}''', ns)"]
        for s in self.steps[:-1]:
            lines.append(s.code())
        lines += ["before = p", self.steps[-1].code(), "print(p)",
                  "import random",
                  f"print(Oracle().judge(before, p, {self.program.sizes!r}, random.Random(0)))"]
        return "\n".join(lines) + "\n"


@dataclass
class Stats:
    tried: dict = field(default_factory=lambda: {p: 0 for p in PRIMITIVES})
    accepted: dict = field(default_factory=lambda: {p: 0 for p in PRIMITIVES})
    refused: dict = field(default_factory=lambda: {p: 0 for p in PRIMITIVES})
    failed: dict = field(default_factory=lambda: {p: 0 for p in PRIMITIVES})
    cases: int = 0
    skipped: int = 0
    original_check_crash: int = 0
    half: int = 0   # f16 programs that parsed

    def table(self) -> str:
        rows = [f"{'primitive':<18} {'tried':>7} {'accepted':>9} {'refused':>8} "
                f"{'failures':>9}"]
        for p in PRIMITIVES:
            rows.append(f"{p:<18} {self.tried[p]:>7} {self.accepted[p]:>9} "
                        f"{self.refused[p]:>8} {self.failed[p]:>9}")
        rows.append(f"{'total':<18} {sum(self.tried.values()):>7} "
                    f"{sum(self.accepted.values()):>9} {sum(self.refused.values()):>8} "
                    f"{sum(self.failed.values()):>9}")
        rows.append(f"cases {self.cases} ({self.half} in f16), skipped (frontend refused) "
                    f"{self.skipped}, "
                    f"check() crashed on a generated proc {self.original_check_crash}")
        return "\n".join(rows)


class Runner:
    def __init__(self, seed: int = 0, with_check: bool = True, family: str | None = None):
        self.seed = seed
        self.family = family
        self.ns = load_callees()
        self.instrs = {k: v for k, v in self.ns.items() if v.is_instr}
        self.oracle = Oracle()
        self.stats = Stats()
        self.failures: list[Failure] = []
        self.with_check = with_check

    def rng(self, case: int) -> random.Random:
        return random.Random(self.seed * 1_000_003 + case)

    def program(self, case: int):
        r = self.rng(case)
        prog = Gen(r, self.family).program(f"p{case}")
        if r.random() < HALF_SHARE:   # the same program in half precision
            prog = dataclasses.replace(prog, family=prog.family + "-f16",
                                       source=prog.source.replace("f32", "f16"))
        try:
            p = gpudsl.proc_from_source("@proc\n" + prog.source, self.ns,
                                        file=f"<case {case}>")
        except gpudsl.Error:
            return r, prog, None
        return r, prog, p

    def case(self, case: int) -> list[Failure]:
        r, prog, p = self.program(case)
        self.stats.cases += 1
        if p is None:
            self.stats.skipped += 1
            return []
        self.stats.half += prog.family.endswith("-f16")
        if self.with_check and isinstance(self.oracle.proved(p), str):
            self.stats.original_check_crash += 1
        done: list[Step] = []
        found = []
        for _ in range(r.randint(1, 4)):
            step = random_step(r, p, self.instrs, prog.family)
            st = self.stats
            st.tried[step.prim] += 1
            try:
                q = step.call(p)
            except SchedulingError:
                st.refused[step.prim] += 1
                continue
            except Exception as exc:  # noqa: BLE001 - any other exception is a failure
                msg = f"{type(exc).__name__}: {' / '.join(str(exc).splitlines()[:2])}"
                found.append(Failure(case, self.seed, prog, done + [step], "exception", msg))
                break
            st.accepted[step.prim] += 1
            bad = self.oracle.judge(p, q, prog.sizes, random.Random(case),
                                    with_check=self.with_check)
            if bad:
                found += [Failure(case, self.seed, prog, done + [step], c, m)
                          for c, m in bad]
                break
            done.append(step)
            p = q
        for f in found[:1]:
            self.stats.failed[f.prim] += 1
        self.failures += found
        return found

    def run(self, seconds: float, start: int = 0, max_cases: int | None = None,
            progress=None) -> Stats:
        t0 = time.monotonic()
        k = start
        while time.monotonic() - t0 < seconds and (max_cases is None or k - start < max_cases):
            fs = self.case(k)
            if progress is not None:
                for f in fs:
                    progress(f)
            k += 1
        return self.stats

    def distinct(self) -> dict:
        """The first failure of each (primitive, class, message head)."""
        out = {}
        for f in self.failures:
            key = (f.prim, f.cls, _head(f.message))
            out.setdefault(key, f)
        return out

    def write(self, folder: Path, limit_per_signature: int = 3,
              shrink_seconds: float = 0.0) -> list[Path]:
        """Each distinct failure as a script (shrunk first when ``shrink_seconds``)."""
        from .shrink import shrink

        folder.mkdir(parents=True, exist_ok=True)
        count: dict = {}
        paths = []
        for (prim, cls, _), f in sorted(self.distinct().items(), key=lambda kv: kv[0][:2]):
            n = count.get((prim, cls), 0)
            if n >= limit_per_signature:
                continue
            count[(prim, cls)] = n + 1
            path = folder / f"{prim}-{cls}-{n}.py"
            if shrink_seconds > 0:
                f = shrink(self, f, shrink_seconds)
            path.write_text(f.repro())
            paths.append(path)
        return paths


def _head(msg: str) -> str:
    """A message without its numbers, to tell failure kinds apart."""
    import re

    return re.sub(r"[-\d.]+|\[.*?\]|'.*?'", "#", msg.split(":")[0] if msg.startswith("at ")
                  is False else msg.split(": ", 1)[-1])[:40]


__all__ = ["Runner", "Stats", "Failure", "load_callees"]
