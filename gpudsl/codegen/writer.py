"""Line-oriented text output with indentation and ``#line`` directives.

A directive is written only where the preprocessor's idea of the current line
differs from the statement's line in the Python source, so code that follows
the proc line by line carries few of them.
"""
from __future__ import annotations

from ..errors import SrcLoc


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Writer:
    def __init__(self):
        self.lines: list[str] = []
        self.indent = 0
        self._file: str | None = None
        self._next: int | None = None  # the line number the next line gets

    def raw(self, text: str = "") -> None:
        """A line outside the proc's source (header, helpers): no directive."""
        for t in text.split("\n"):
            self.lines.append(t)
            if self._next is not None:
                self._next += 1

    def line(self, text: str, loc: SrcLoc | None = None) -> None:
        if loc is not None and loc.file and loc.line:
            if loc.file != self._file:
                self.lines.append(f"#line {loc.line} {c_string(loc.file)}")
                self._file, self._next = loc.file, loc.line
            elif loc.line != self._next:
                self.lines.append(f"#line {loc.line}")
                self._next = loc.line
        pad = "  " * self.indent
        for t in text.split("\n"):
            self.lines.append(pad + t if t else "")
            if self._next is not None:
                self._next += 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
