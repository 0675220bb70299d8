"""``gpudsl check FILE[::PROC] [--bind n=4096 ...]``.

``run_check(target, bindings)`` imports FILE, checks every ``gpudsl.Proc`` it
defines (or only PROC), prints each report, and returns 1 if any fails, else 0.
Bindings that name no size or index parameter of a proc are ignored for that proc,
so one ``--bind`` can serve a file of several procs.
"""
from __future__ import annotations

import sys

from ..errors import Error
from .load import load_procs


def run_check(target: str, bindings: dict[str, int], out=None) -> int:
    out = out or sys.stdout
    path, sep, pname = target.partition("::")
    procs = load_procs(path)
    if pname:
        if pname not in procs:
            raise Error(f"{path} defines no proc named '{pname}'",
                        hint="procs in it: " + (", ".join(sorted(procs)) or "(none)"))
        procs = {pname: procs[pname]}
    if not procs:
        print(f"{path}: no procs to check", file=out)
        return 0
    failed = bad_instrs = 0
    seen = set()
    for name, p in procs.items():
        if id(p.ir) in seen:
            continue
        if p.is_instr:  # not a kernel: its body is its meaning where a proc calls it
            print(f"instr {name}: not checked alone; an @instr's body is checked where a "
                  "proc calls it", file=out)
            bad_instrs += _compare_template(name, p, bindings, out)
            print(file=out)
            continue
        seen.add(id(p.ir))
        params = {q.name for q in p.ir.params if q.is_control}
        b = {k: v for k, v in bindings.items() if k in params}
        if pname:
            unknown = set(bindings) - params
            if unknown:
                raise Error(f"{pname} has no size or index parameter "
                            f"{', '.join(sorted(unknown))}")
        rep = p.check(**b)
        print(str(rep), file=out)
        print(file=out)
        failed += not rep.ok
    n = len(seen)
    print(f"{n - failed} of {n} proc{'s' if n != 1 else ''} proved; {failed} failed", file=out)
    if bad_instrs:
        print(f"{bad_instrs} @instr template{' differs from its body' if bad_instrs == 1 else 's differ from their bodies'}", file=out)
    return 1 if failed or bad_instrs else 0


def _compare_template(name: str, p, bindings: dict, out) -> int:
    """Run ``gpudsl.check_instr`` on an @instr (its sizes from ``--bind``): 1 when its
    template differs from its body, else 0."""
    from ..compiler.instr_check import check_instr

    sizes = {q.name for q in p.ir.params if q.kind == "size"}
    missing = sorted(sizes - set(bindings))
    if missing:
        print(f"  its template is not compared with its body: give its sizes "
              f"(--bind {missing[0]}=...)", file=out)
        return 0
    b = {k: v for k, v in bindings.items()
         if k in {q.name for q in p.ir.params if q.is_control}}
    try:
        r = check_instr(p, **b)
    except Error as e:
        print(f"  its template could not be compared with its body: {e.raw_message}",
              file=out)
        return 0
    print("  " + str(r).replace("\n", "\n  "), file=out)
    return 0 if r.ok else 1
