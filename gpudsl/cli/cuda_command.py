"""``gpudsl cuda FILE::PROC [--bind n=4096 ...]``: print a proc's CUDA C."""
from __future__ import annotations

import sys

from ..errors import CompileError
from .load import load_procs


def find_proc(target: str):
    path, sep, name = target.partition("::")
    procs = load_procs(path)
    launchable = {k: v for k, v in procs.items() if not v.is_instr}
    if not sep:
        if len(launchable) == 1:
            return next(iter(launchable.values()))
        raise CompileError(f"{path} defines {len(launchable)} procs; name one: "
                           f"gpudsl cuda {path}::PROC",
                           hint="procs: " + (", ".join(sorted(launchable)) or "none"))
    if name not in procs:
        raise CompileError(f"{path} has no proc named {name!r}",
                           hint="procs: " + (", ".join(sorted(launchable)) or "none"))
    return procs[name]


def run_cuda(target: str, bindings: dict) -> int:
    """Print the CUDA C translation unit of ``FILE::PROC`` with ``bindings``; 0 on success.
    gpudsl errors propagate (the top-level CLI prints them and exits 1)."""
    p = find_proc(target)
    sys.stdout.write(p.cuda_source(**bindings))
    return 0
