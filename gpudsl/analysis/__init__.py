"""``check()``: prove GPU procs free of races, divergence and out-of-bounds accesses.

- :func:`check` (``proc.check(**bindings)``) → :class:`Report` (SPEC 2.5).
- :mod:`.effects` (accesses with their context, on :mod:`gpudsl.ir.effects`) is
  reusable; the Z3 encoding and the shared solver are :mod:`gpudsl.ir.smt`.
- :mod:`.phases` barrier counts, :mod:`.mapping` SPEC 2.4 rules and uniformity,
  :mod:`.obligations` races / bounds / register ownership, :mod:`.resources` limits,
  :mod:`.cli` the ``gpudsl check`` command.
"""
from __future__ import annotations

from .check import check
from .report import Diagnostic, DiagnosticKind, Report

__all__ = ["check", "Report", "Diagnostic", "DiagnosticKind"]
