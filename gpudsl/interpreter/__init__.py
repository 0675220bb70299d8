"""The reference interpreter: what a proc means.

``interpret(proc, detect_races=False, **args)`` runs a proc on numpy arrays in
place.  Procs are compiled once to Python functions (nested ``for`` loops over
flat buffers with cheap bounds checks; see :mod:`.emit_stmt`), cached per proc.
``detect_races=True`` runs an instrumented version that watches every memory
access (see :mod:`.races`).
"""
from .api import eval_control, interpret
from .compiler import python_source

__all__ = ["interpret", "python_source", "eval_control"]
