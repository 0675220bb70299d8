"""``Report`` and ``Diagnostic``: what ``check()`` returns (docs/checking.md).

``Diagnostic(kind, message, locations, witness, hint)``: ``kind`` is one of
``"race"``, ``"bounds"``, ``"divergence"``, ``"mapping"``, ``"resource"``,
``"target"``, ``"unknown"``; ``locations`` is a list of ``gpudsl.SrcLoc`` (file, line, col):
both accesses of a race; ``witness`` a dict of concrete values, for races::

    {"sizes": {"n": 64}, "array": "s", "element": (3,),
     "thread1": {"block": {"b": 0}, "thread": {"t": 2}, "loops": {"k": 1},
                 "blockIdx": (0, 0, 0), "threadIdx": (2, 0, 0), "access": "write of s[t + 1]"},
     "thread2": {...}, "between": "threads of one block" | "blocks" | "iterations of par loop i"}

``Report``: ``ok`` (no diagnostics), ``diagnostics``, ``warnings`` (Diagnostics of
kind ``"warning"``, which do not make ``ok`` False), ``str(report)`` prints like a
compiler, ``raise_if_failed()`` raises ``gpudsl.CheckError``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..errors import CheckError, SrcLoc


class DiagnosticKind(str, Enum):
    """Every kind of diagnostic check() produces (docs/checking.md).  A member equals its
    string (``DiagnosticKind.RACE == "race"``), so reports compare with either."""

    RACE = "race"
    BOUNDS = "bounds"
    DIVERGENCE = "divergence"
    MAPPING = "mapping"
    RESOURCE = "resource"
    TARGET = "target"     # a construct the target architecture does not have
    UNKNOWN = "unknown"
    WARNING = "warning"   # reported in ``Report.warnings``; does not make ``ok`` False

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


KINDS = tuple(k.value for k in DiagnosticKind if k is not DiagnosticKind.WARNING)


@dataclass
class Diagnostic:
    """The one constructor of check()'s findings: ``kind`` is coerced to a
    ``DiagnosticKind``, so a misspelled kind fails where it is made."""

    kind: DiagnosticKind
    message: str
    locations: list = field(default_factory=list)
    witness: dict = field(default_factory=dict)
    hint: str = ""
    notes: list = field(default_factory=list)   # one note per location ("write", "read")

    def __post_init__(self):
        try:
            self.kind = DiagnosticKind(self.kind)
        except ValueError:
            raise ValueError(f"unknown diagnostic kind {self.kind!r}; the kinds are "
                             f"{[k.value for k in DiagnosticKind]}") from None

    @property
    def is_error(self) -> bool:
        return self.kind != "warning"

    def __str__(self) -> str:
        head = "warning" if self.kind == "warning" else f"error[{self.kind}]"
        lines = [f"{head}: {self.message}"]
        for i, loc in enumerate(self.locations):
            note = self.notes[i] if i < len(self.notes) else ""
            lines.append(f"  --> {loc}" + (f"  ({note})" if note else ""))
            q = loc.quoted() if isinstance(loc, SrcLoc) else None
            if q is not None:
                lines.append(f"   | {q[0]}")
                lines.append(f"   | {' ' * q[1]}^")
            if getattr(loc, "made_by", None):
                lines.append(f"   = made by {loc.made_by}")
        if self.witness:
            lines.append("  witness: " + format_witness(self.witness))
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


# the witness text is shared with SchedulingError (errors.py, the lowest layer)
from ..errors import _fmt_map, format_witness  # noqa: E402,F401


@dataclass
class Report:
    proc: str
    diagnostics: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    bindings: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    # the @instr procs the proc calls: the proof holds for their bodies, and the
    # generated code runs their templates (gpudsl.check_instr compares the two)
    trusted: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diagnostics

    def __bool__(self) -> bool:
        return self.ok

    def kinds(self) -> set:
        return {d.kind for d in self.diagnostics}

    def of_kind(self, kind: str) -> list:
        return [d for d in self.diagnostics if d.kind == kind]

    def __str__(self) -> str:
        bind = f" with {_fmt_map(self.bindings)}" if self.bindings else ""
        if self.ok:
            head = f"check({self.proc}){bind}: ok"
            q = self.stats.get("queries")
            if q is not None:
                head += f" ({q} obligations proved)"
        else:
            n = len(self.diagnostics)
            head = f"check({self.proc}){bind}: {n} problem{'s' if n != 1 else ''}"
        parts = [head]
        for d in self.diagnostics + self.warnings:
            parts.append(str(d))
        if self.trusted:
            parts.append(self.trusted_note())
        return "\n\n".join(parts)

    def trusted_note(self) -> str:
        """The line saying which ``@instr`` templates the proof takes on trust."""
        n = len(self.trusted)
        return (f"note: the meaning rests on {n} trusted @instr template{'s' if n != 1 else ''} "
                f"({', '.join(self.trusted)}): check() proves their bodies, the kernel runs "
                "the templates; gpudsl.check_instr(instr) compares the two")

    def __repr__(self) -> str:
        return f"<Report {self.proc}: {'ok' if self.ok else sorted(self.kinds())}>"

    def _repr_html_(self) -> str:
        """A notebook's display: each diagnostic with its highlighted lines and the
        witness as a table."""
        from ..display import report_html

        return report_html(self)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython's plain-text display
        printer.text(str(self))

    def raise_if_failed(self) -> "Report":
        if not self.ok:
            raise CheckError(self)
        return self
