"""The errors a user of gpudsl can cause.

Every one is a :class:`gpudsl.Error`.  Messages name the file, line and column,
quote the offending source with a caret, and say what to do.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class SrcLoc:
    """A position in the user's Python source (1-based line, 0-based column)."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def source_line(self) -> str | None:
        text = linecache.getline(self.file, self.line)
        return text.rstrip("\n") if text else None


def quote(loc: SrcLoc | None) -> str:
    """The source line at ``loc`` with a caret under its column, or ''."""
    if loc is None:
        return ""
    text = loc.source_line()
    if text is None:
        return ""
    stripped = text.lstrip()
    indent = len(text) - len(stripped)
    caret = " " * max(loc.col - indent, 0) + "^"
    return f"    {stripped}\n    {caret}"


def format_at(loc: SrcLoc | None, message: str, hint: str | None = None) -> str:
    """``file:line:col: message`` + quoted source + hint, as a compiler prints."""
    head = f"{loc}: {message}" if loc is not None else message
    parts = [head]
    q = quote(loc)
    if q:
        parts.append(q)
    if hint:
        parts.append(f"  hint: {hint}")
    return "\n".join(parts)


class Error(Exception):
    """Base class of every error a user of gpudsl can cause."""

    def __init__(self, message: str, loc: SrcLoc | None = None, hint: str | None = None):
        self.loc = loc
        self.raw_message = message
        self.hint = hint
        super().__init__(format_at(loc, message, hint))


class ProcError(Error):
    """A proc is not valid gpudsl (raised when it is defined)."""


class SchedulingError(Error):
    """A rewrite primitive was refused: it would change the proc's meaning or cannot apply."""

    def __init__(self, primitive: str, message: str, loc: SrcLoc | None = None,
                 hint: str | None = None, witness: dict | None = None):
        self.primitive = primitive
        self.witness = witness
        self.reason = message  # without the primitive's name and the witness
        text = f"{primitive}: {message}"
        if witness:
            text += "\n  witness: " + ", ".join(f"{k}={v}" for k, v in witness.items())
        super().__init__(text, loc, hint)


class CheckError(Error):
    """``report.raise_if_failed()`` on a report with diagnostics."""

    def __init__(self, report):
        self.report = report
        Exception.__init__(self, str(report))
        self.loc = None
        self.raw_message = str(report)
        self.hint = None


class RaceError(Error):
    """The interpreter's race detector saw two threads conflict inside a phase."""

    def __init__(self, message: str, loc: SrcLoc | None = None, hint: str | None = None,
                 accesses: tuple = (), element: tuple | None = None):
        self.accesses = accesses
        self.element = element
        super().__init__(message, loc, hint)


class LaunchError(Error):
    """A kernel launch was refused (bad arguments) or failed."""


class CompileError(Error):
    """NVRTC or the emulator's C++ compiler rejected generated code."""


class InterpError(Error):
    """The interpreter met a run-time fault (out-of-bounds access, failed assert)."""
