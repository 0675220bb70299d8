"""gpudsl: a Python-embedded, user-scheduled kernel language for NVIDIA GPUs.

Write kernels as ``@proc`` functions, prove them race-free with ``check()``,
schedule them with ``gpudsl.schedule``, and run them through CUDA or the CPU
emulator.  See README.md and docs/.
"""
from __future__ import annotations

from .errors import (CheckError, CompileError, Error, GraphError, InterpError, LaunchError, ProcError,
                     RaceError, SchedulingError, SrcLoc)
from .language import *  # noqa: F401,F403
from .language import __all__ as _lang_all
from .proc import Proc, instr, proc, proc_from_source
from .version import __version__
from .errors import install_display_hooks as _install_display_hooks

_install_display_hooks()  # gpudsl errors shown message first (see errors.py)


def interpret(p, /, **args):
    """Run ``p`` on numpy arrays in place with the reference semantics
    (``detect_races=True``, or ``_detect_races`` when the proc has a parameter of that
    name, runs the race detector)."""
    from .interpreter import interpret as _interpret

    return _interpret(p, **args)


def check(p, /, **bindings):
    """``p.check(**bindings)``: prove the proc safe or show a counterexample."""
    from .analysis import check as _check

    return _check(p, **bindings)


def check_instr(instr, *, trials: int = 8, seed: int = 0, backend: str | None = None,
                rtol: float = 0.0, atol: float = 0.0, target=None, **sizes):
    """Run an ``@instr``'s CUDA C template and its body on ``trials`` random inputs
    and compare the arrays they leave (exactly, or within ``rtol``/``atol``): the body is
    what ``check()`` proves and the interpreter runs, the template what the kernel runs.
    Sizes and index parameters of the instruction are keywords (index ones default to
    0).  Returns a result whose ``ok`` says they agreed; ``str()`` shows the first
    differing elements, ``raise_if_failed()`` raises ``gpudsl.CompileError``.  The
    template runs on ``backend`` (``"emulator"`` by default, ``"cuda"``).

    Example:
        ```python
        r = gpudsl.check_instr(copy4)
        assert r.ok, str(r)
        ```
    """
    from .compiler.instr_check import check_instr as _check_instr

    return _check_instr(instr, trials=trials, seed=seed, backend=backend, rtol=rtol,
                        atol=atol, target=target, **sizes)


__all__ = list(_lang_all) + [
    "Proc", "proc", "instr", "proc_from_source", "interpret", "check", "check_instr",
    "Error", "ProcError", "SchedulingError", "CheckError", "RaceError", "LaunchError",
    "CompileError", "InterpError", "GraphError", "SrcLoc", "__version__",
]
