"""The errors a user of gpudsl can cause.

Every one is a ``gpudsl.Error``.  Messages name the file, line and column,
quote the offending source with a caret, and say what to do.
"""
from __future__ import annotations

import linecache
import os
import sys
import traceback
from dataclasses import dataclass, field

#: ``GPUDSL_TRACEBACK=full`` shows gpudsl's own frames under a user error.
TRACEBACK_ENV = "GPUDSL_TRACEBACK"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def cell_label(file: str) -> str | None:
    """``"Cell In[n]"`` when ``file`` is the temporary file IPython compiled a
    notebook cell from (so locations read as IPython's own tracebacks do), else None."""
    ipy = sys.modules.get("IPython")
    if ipy is None:
        return None
    try:
        shell = ipy.get_ipython()
        named = shell.compile.format_code_name(file) if shell is not None else None
    except Exception:  # an IPython without the cell map: plain paths
        return None
    if not named:
        return None
    return f"{named[0]} {named[1]}"


@dataclass(frozen=True)
class SrcLoc:
    """A position in the user's Python source (1-based line, 0-based column)."""

    file: str
    line: int
    col: int = 0
    #: for a statement a scheduling primitive made: the statement as it now reads
    text: str | None = field(default=None, compare=False)
    #: and the primitive call that made it (``"divide_loop at file:line: p = ..."``)
    made_by: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        label = cell_label(self.file)
        if label is not None:
            return f"{label}, line {self.line}, column {self.col + 1}"
        return f"{self.file}:{self.line}:{self.col + 1}"

    def source_line(self) -> str | None:
        text = linecache.getline(self.file, self.line)
        return text.rstrip("\n") if text else None

    def quoted(self) -> tuple[str, int] | None:
        """``(source without its indentation, caret offset)``: the statement as it
        now reads when a primitive made it, else the line in the user's file."""
        if self.text is not None:
            return self.text, 0
        text = self.source_line()
        if text is None:
            return None
        stripped = text.lstrip()
        return stripped, max(self.col - (len(text) - len(stripped)), 0)


def quote(loc: SrcLoc | None) -> str:
    """The source line at ``loc`` with a caret under its column, or ''."""
    if loc is None:
        return ""
    q = loc.quoted()
    if q is None:
        return ""
    text = f"    {q[0]}\n    {' ' * q[1]}^"
    if loc.made_by:
        text += f"\n    (made by {loc.made_by})"
    return text


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

    def _render_traceback_(self) -> list[str]:
        """IPython / Jupyter's display: the message first, no gpudsl frames (unless
        ``GPUDSL_TRACEBACK=full``, when IPython shows its usual traceback)."""
        if show_internal_frames():
            raise NotImplementedError  # IPython falls back to its own traceback
        return format_user_error(self).split("\n")


class ProcError(Error):
    """A proc is not valid gpudsl (raised when it is defined)."""


def _fmt_map(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def format_witness(w: dict) -> str:
    parts = []
    if w.get("sizes"):
        parts.append(_fmt_map(w["sizes"]))
    if "array" in w:
        el = w.get("element")
        if el is not None:
            parts.append(f"element {w['array']}[{', '.join(str(x) for x in el)}]")
    for key in ("thread1", "thread2", "thread"):
        t = w.get(key)
        if not t:
            continue
        vals = {}
        vals.update(t.get("block", {}))
        vals.update(t.get("thread", {}))
        vals.update(t.get("loops", {}))
        label = {"thread1": "thread 1", "thread2": "thread 2", "thread": "at"}[key]
        extra = []
        if "blockIdx" in t:
            extra.append(f"blockIdx={t['blockIdx']}")
        if "threadIdx" in t:
            extra.append(f"threadIdx={t['threadIdx']}")
        s = f"{label}: {_fmt_map(vals)}" if vals else label
        if extra:
            s += " (" + ", ".join(extra) + ")"
        parts.append(s)
    for k, v in w.items():
        if k not in ("sizes", "array", "element", "thread1", "thread2", "thread"):
            parts.append(f"{k}={v}")
    return "; ".join(parts)


class SchedulingError(Error):
    """A rewrite primitive was refused: it would change the proc's meaning or cannot apply."""

    def __init__(self, primitive: str, message: str, loc: SrcLoc | None = None,
                 hint: str | None = None, witness: dict | None = None):
        self.primitive = primitive
        self.witness = witness
        self.reason = message  # without the primitive's name and the witness
        text = f"{primitive}: {message}"
        if witness:
            text += "\n  witness: " + format_witness(witness)
        super().__init__(text, loc, hint)


class CheckError(Error):
    """``report.raise_if_failed()`` on a report with diagnostics."""

    def __init__(self, report, hint: str | None = None):
        self.report = report
        text = str(report) + (f"\n\n  hint: {hint}" if hint else "")
        Exception.__init__(self, text)
        self.loc = None
        self.raw_message = str(report)
        self.hint = hint


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


class GraphError(Error):
    """A graph (a HamKaas script, or one built with ``gpudsl.graph``) is malformed, does
    not fit its shapes, or was given inputs that do not fit it.

    ``line`` and ``column`` (both 1-based) name the place in the script, when there is
    one; the message quotes that line with a caret under the column."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 source: str | None = None, file: str = "<script>",
                 hint: str | None = None):
        self.line = line
        self.column = column
        self.file = file
        self.source = source
        loc = SrcLoc(file, line, (column or 1) - 1) if line is not None else None
        head = f"{file}:{line}:{column or 1}: {message}" if line is not None else message
        parts = [head]
        if line is not None and source is not None:
            stripped = source.lstrip()
            caret = max((column or 1) - 1 - (len(source) - len(stripped)), 0)
            parts.append(f"    {stripped.rstrip()}\n    {' ' * caret}^")
        if hint:
            parts.append(f"  hint: {hint}")
        Exception.__init__(self, "\n".join(parts))
        self.loc = loc
        self.raw_message = message
        self.hint = hint


# ---------------------------------------------------------------- showing errors
#
# A user's mistake is shown message first: the gpudsl message (file:line, quoted
# source, caret, hint), then the user's own frames that led to it; gpudsl's
# internal frames are left out unless ``GPUDSL_TRACEBACK=full``.  ``import gpudsl``
# installs this as ``sys.excepthook`` (chained to the previous hook for every other
# exception); IPython / Jupyter call ``Error._render_traceback_``.


def show_internal_frames() -> bool:
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() in ("full", "1", "all", "yes")


def is_internal(filename: str) -> bool:
    """A frame of gpudsl itself (the package directory)."""
    try:
        path = os.path.abspath(filename)
    except (TypeError, ValueError):
        return False
    return path == _PACKAGE_DIR or path.startswith(_PACKAGE_DIR + os.sep)


def user_frames(tb) -> list:
    """The ``traceback.FrameSummary`` s of ``tb`` outside gpudsl (and outside
    IPython's machinery), outermost first."""
    out = []
    for fs in traceback.extract_tb(tb):
        if is_internal(fs.filename):
            continue
        if cell_label(fs.filename) is None and ("/IPython/" in fs.filename
                                                 or "/ipykernel/" in fs.filename):
            continue
        out.append(fs)
    return out


def _frame_line(fs) -> str:
    label = cell_label(fs.filename)
    where = f"{label}, line {fs.lineno}" if label else f'File "{fs.filename}", line {fs.lineno}'
    text = f"  {where}, in {fs.name}"
    if fs.line:
        text += f"\n    {fs.line.strip()}"
    return text


def format_user_error(exc: BaseException) -> str:
    """The text shown for a gpudsl error: the message first, then the user's frames."""
    name = type(exc).__name__
    mod = "gpudsl" if type(exc).__module__.startswith("gpudsl") else type(exc).__module__
    lines = [f"{mod}.{name}: {exc}"]
    frames = user_frames(exc.__traceback__)
    if frames:
        lines.append("")
        lines.append("raised from your code (most recent call last):")
        lines.extend(_frame_line(fs) for fs in frames)
    lines.append(f"(gpudsl's internal frames are hidden; set {TRACEBACK_ENV}=full to show them)")
    return "\n".join(lines)


_previous_hook = None


ANNOTATIONS_HINT = (
    "gpudsl: Python evaluated the annotations of a proc's parameters (f32[n]...) when it "
    "defined the function, before @proc could read them.\n  hint: put `from __future__ "
    "import annotations` at the top of the file (or of the notebook's first cell), so "
    "that annotations stay text.")


def annotations_name_error(value, tb) -> bool:
    """Whether ``value`` is the NameError Python raises on a ``@proc`` function's
    annotations when the module lacks ``from __future__ import annotations``."""
    if not isinstance(value, NameError) or tb is None:
        return False
    frames = traceback.extract_tb(tb)
    if not frames:
        return False
    last = frames[-1]
    line = (last.line or "").lstrip()
    if not line.startswith("def ") and not line.startswith("@"):
        return False
    above = [linecache.getline(last.filename, n).strip()
             for n in range(max(1, last.lineno - 5), last.lineno + 1)]
    return any(a.startswith(("@proc", "@instr", "@gpudsl.proc", "@gpudsl.instr"))
               for a in above)


def _excepthook(etype, value, tb):
    if isinstance(value, Error) and not show_internal_frames():
        try:
            sys.stderr.write(format_user_error(value) + "\n")
            return
        except Exception:  # never lose the error: fall back to Python's display
            pass
    (_previous_hook or sys.__excepthook__)(etype, value, tb)
    try:
        if annotations_name_error(value, tb):
            sys.stderr.write(ANNOTATIONS_HINT + "\n")
    except Exception:
        pass


def install_display_hooks() -> None:
    """Show gpudsl errors message first in a terminal (``sys.excepthook``, chained to
    the previous hook for every other exception); idempotent.  IPython and Jupyter ask
    the exception itself (``Error._render_traceback_``)."""
    global _previous_hook
    if sys.excepthook is not _excepthook:
        _previous_hook = sys.excepthook
        sys.excepthook = _excepthook
