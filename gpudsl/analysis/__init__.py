"""``check()``: prove GPU procs free of races, divergence and out-of-bounds accesses.

- ``check`` (``proc.check(**bindings)``) → ``Report`` (docs/checking.md).
- ``effects`` (accesses with their context, on ``gpudsl.ir.stmt_effects``) is
  reusable; the Z3 encoding and the shared solver are ``gpudsl.ir.smt``.
- ``phases`` barrier counts, ``mapping`` docs/language.md (meaning) rules and uniformity,
  ``obligations`` races / bounds / register ownership, ``resources`` limits,
  ``cli`` the ``gpudsl check`` command.
"""
from __future__ import annotations

from .check import check
from .check_report import Diagnostic, DiagnosticKind, Report

__all__ = ["check", "Report", "Diagnostic", "DiagnosticKind"]
