"""Where a statement made by a scheduling primitive came from.

After the outermost primitive of a call returns, :func:`stamp` gives every statement
of the new proc that reads differently from all statements of the old one a
location that remembers the statement as it now reads and the primitive call that
made it (``SrcLoc.text`` / ``SrcLoc.made_by``; neither takes part in equality, so
procs compare as before).  Diagnostics quote that text and name the call.
"""
from __future__ import annotations

import os
import sys

from ..errors import SrcLoc, cell_label, is_internal
from ..ir.nodes import For, If, ProcDef
from ..ir.printer import print_stmt
from ..ir.visitor import block_stmts


def call_site() -> tuple[SrcLoc | None, str]:
    """The frame that called the primitive from outside the language's machinery: the
    user's, or the standard library's schedule functions (a stdlib kernel's statements
    are made by its own lines, whichever script asked for the kernel); its location and
    source line."""
    f = sys._getframe(1)
    while f is not None and is_internal(f.f_code.co_filename) and \
            not _in_stdlib(f.f_code.co_filename):
        f = f.f_back
    if f is None:
        return None, ""
    loc = SrcLoc(f.f_code.co_filename, f.f_lineno, 0)
    line = loc.source_line()
    return loc, (line or "").strip()


_STDLIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "stdlib")


def _in_stdlib(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_STDLIB + os.sep)


def _header(s):
    if isinstance(s, For):
        return s.with_(body=())
    if isinstance(s, If):
        return s.with_(body=(), orelse=())
    return s


def stamp(old: ProcDef, new: ProcDef, primitive: str) -> ProcDef:
    """``new`` with the statements ``primitive`` made (not in ``old``) located as
    made by the user's call of it."""
    if old is new:
        return new
    seen = {_header(s) for s in block_stmts(old.body)}
    site, line = call_site()
    where = ""
    if site is not None:
        label = cell_label(site.file)
        where = f" at {label}, line {site.line}" if label else f" at {site.file}:{site.line}"
    made_by = primitive + where + (f": {line}" if line else "")

    def rewrite(body):
        out, changed = [], False
        for s in body:
            ch = {}
            if isinstance(s, For):
                b = rewrite(s.body)
                if b is not s.body:
                    ch["body"] = b
            elif isinstance(s, If):
                b, e = rewrite(s.body), rewrite(s.orelse)
                if b is not s.body:
                    ch["body"] = b
                if e is not s.orelse:
                    ch["orelse"] = e
            if _header(s) not in seen:
                base = s.loc or site
                if base is not None:
                    ch["loc"] = SrcLoc(base.file, base.line, base.col,
                                       text=print_stmt(s)[0].strip(), made_by=made_by)
            if ch:
                s = s.with_(**ch)
                changed = True
            out.append(s)
        return tuple(out) if changed else body

    body = rewrite(new.body)
    return new if body is new.body else new.with_(body=body)
