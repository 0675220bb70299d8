"""Rich displays for notebooks: HTML (``_repr_html_``) and plain text of procs,
check reports, kernels and proc diffs.

A leaf module: it imports only ``gpudsl.errors`` and takes plain values (text,
locations, dicts), so every layer can display its objects without importing the
others.  Source is highlighted with Pygments when it is installed (inline styles, so
a notebook needs no stylesheet), else shown escaped in a ``<pre>``.
"""
from __future__ import annotations

import contextlib
import difflib
import html
import os
import sys
import threading
import time

_STYLE = ("font-family: var(--jp-code-font-family, monospace); font-size: 12px; "
          "margin: 2px 0; padding: 4px 8px; background: #f7f7f7; border-radius: 3px")


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def highlight(source: str) -> str:
    """``source`` (Python / gpudsl) as highlighted HTML in a ``<pre>``."""
    try:
        from pygments import highlight as _hl
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:  # pygments is optional
        return f'<pre class="gpudsl-src" style="{_STYLE}">{esc(source)}</pre>'
    body = _hl(source, PythonLexer(), HtmlFormatter(nowrap=True, noclasses=True))
    return f'<pre class="gpudsl-src" style="{_STYLE}">{body}</pre>'


def table(rows: list[list], header: list | None = None, cls: str = "gpudsl-table") -> str:
    out = [f'<table class="{cls}" style="border-collapse: collapse; font-size: 12px">']
    if header:
        out.append("<tr>" + "".join(f'<th style="text-align: left; padding: 2px 8px">'
                                    f'{esc(h)}</th>' for h in header) + "</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f'<td style="text-align: left; padding: 2px 8px">'
                                    f'{c}</td>' for c in r) + "</tr>")
    out.append("</table>")
    return "".join(out)


def badge(text: str, ok: bool) -> str:
    color = "#1a7f37" if ok else "#cf222e"
    return (f'<span class="gpudsl-{"ok" if ok else "fail"}" style="color: white; '
            f'background: {color}; padding: 1px 6px; border-radius: 3px">{esc(text)}</span>')


# ------------------------------------------------------------------ procs


def proc_html(name: str, source: str) -> str:
    return (f'<div class="gpudsl-proc"><b>proc {esc(name)}</b>' + highlight(source) +
            "</div>")


# ------------------------------------------------------------------ reports


def _location_html(loc, note: str = "") -> str:
    head = f'<div class="gpudsl-loc">--&gt; <code>{esc(loc)}</code>'
    if note:
        head += f" <i>({esc(note)})</i>"
    head += "</div>"
    q = loc.quoted() if hasattr(loc, "quoted") else None
    if q is not None:
        head += highlight(q[0])
    if getattr(loc, "made_by", None):
        head += f'<div class="gpudsl-made-by">made by <code>{esc(loc.made_by)}</code></div>'
    return head


def witness_rows(w: dict) -> tuple[list[str], list[list]]:
    """A witness as a table: one row per thread (its block, thread and loop
    variables, blockIdx, threadIdx, access), plus the sizes and the element."""
    threads = [(label, w[k]) for k, label in (("thread1", "thread 1"), ("thread2", "thread 2"),
                                              ("thread", "thread")) if w.get(k)]
    names: list[str] = []
    for _, t in threads:
        for part in ("block", "thread", "loops"):
            for n in t.get(part, {}):
                if n not in names:
                    names.append(n)
    header = [""] + names + ["blockIdx", "threadIdx", "access"]
    rows = []
    for label, t in threads:
        vals = {**t.get("block", {}), **t.get("thread", {}), **t.get("loops", {})}
        rows.append([esc(label)] + [esc(vals.get(n, "")) for n in names] +
                    [esc(t.get("blockIdx", "")), esc(t.get("threadIdx", "")),
                     esc(t.get("access", ""))])
    return header, rows


def witness_html(w: dict) -> str:
    parts = []
    facts = []
    if w.get("sizes"):
        facts.append(", ".join(f"{k}={v}" for k, v in w["sizes"].items()))
    if "array" in w and w.get("element") is not None:
        facts.append(f"element {w['array']}[{', '.join(str(x) for x in w['element'])}]")
    for k, v in w.items():
        if k not in ("sizes", "array", "element", "thread1", "thread2", "thread"):
            facts.append(f"{k}={v}")
    if facts:
        parts.append(f'<div class="gpudsl-witness-facts">witness: {esc("; ".join(facts))}</div>')
    header, rows = witness_rows(w)
    if rows:
        parts.append(table(rows, header, "gpudsl-witness"))
    return "".join(parts)


def diagnostic_html(d) -> str:
    kind = str(d.kind)
    head = "warning" if kind == "warning" else f"error[{kind}]"
    out = [f'<div class="gpudsl-diagnostic" style="margin: 6px 0">'
           f'{badge(head, kind == "warning")} {esc(d.message)}']
    for i, loc in enumerate(d.locations):
        note = d.notes[i] if i < len(d.notes) else ""
        out.append(_location_html(loc, note))
    if d.witness:
        out.append(witness_html(d.witness))
    if d.hint:
        out.append(f'<div class="gpudsl-hint">hint: {esc(d.hint)}</div>')
    out.append("</div>")
    return "".join(out)


def report_html(report) -> str:
    head = str(report).split("\n", 1)[0]
    out = [f'<div class="gpudsl-report">{badge("ok" if report.ok else "failed", report.ok)} '
           f'<b>{esc(head)}</b>']
    for d in list(report.diagnostics) + list(report.warnings):
        out.append(diagnostic_html(d))
    if getattr(report, "trusted", None):
        out.append(f"<div>{esc(report.trusted_note())}</div>")
    out.append("</div>")
    return "".join(out)


# ------------------------------------------------------------------ kernels


def kernel_html(name: str, backend: str, proved: bool, geometry: list[list],
                resources: dict | None, note: str = "", target: str = "") -> str:
    """``geometry``: rows ``[kernel, grid, block, threads, dynamic shared bytes]``;
    ``resources``: ``{kernel: object with registers, shared_bytes, spill_*}``;
    ``backend`` how it runs, ``target`` the architecture it was proved for."""
    out = [f'<div class="gpudsl-kernel"><b>Kernel {esc(name)}</b> backend '
           f'<code>{esc(backend)}</code> ' +
           (f'target <code>{esc(target)}</code> ' if target else ""),
           badge("proved" if proved else "not proved (check=False)", proved)]
    if note:
        out.append(f"<div>{esc(note)}</div>")
    if geometry:
        out.append(table([[esc(c) for c in r] for r in geometry],
                         ["kernel", "grid (x, y, z)", "block (x, y, z)", "threads/block",
                          "dynamic shared bytes"], "gpudsl-geometry"))
    if resources:
        rows = [[esc(k), esc(getattr(r, "registers", "")), esc(getattr(r, "shared_bytes", "")),
                 esc(getattr(r, "spill_stores_bytes", "")),
                 esc(getattr(r, "spill_loads_bytes", ""))] for k, r in resources.items()]
        out.append(table(rows, ["kernel", "registers", "shared bytes", "spill stores",
                                "spill loads"], "gpudsl-resources"))
    out.append("</div>")
    return "".join(out)


def kernel_text(name: str, backend: str, proved: bool, geometry: list[list],
                resources: dict | None, note: str = "", target: str = "") -> str:
    lines = [f"Kernel {name} backend={backend} " + (f"target={target} " if target else "") +
             ("proved" if proved else "NOT proved (compiled with check=False)")]
    if note:
        lines.append(f"  {note}")
    for k, grid, block, threads, dyn in geometry:
        lines.append(f"  {k}: grid {grid}, block {block} ({threads} threads)" +
                     (f", {dyn} B dynamic shared" if dyn else ""))
    for k, r in (resources or {}).items():
        lines.append(f"  {k}: {getattr(r, 'registers', '?')} registers, "
                     f"{getattr(r, 'shared_bytes', '?')} B shared, spills "
                     f"{getattr(r, 'spill_stores_bytes', 0)}/{getattr(r, 'spill_loads_bytes', 0)}")
    return "\n".join(lines)


# ------------------------------------------------------------------ diffs


class Diff:
    """What a primitive changed: two procs' source side by side (``_repr_html_``)
    or as a unified diff (``str``)."""

    def __init__(self, before: str, after: str, left: str = "before", right: str = "after"):
        self.before, self.after = before, after
        self.left, self.right = left, right

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def __str__(self) -> str:
        text = "".join(difflib.unified_diff(self.before.splitlines(True),
                                            self.after.splitlines(True),
                                            self.left, self.right))
        return text or f"{self.left} and {self.right} read the same\n"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        a, b = self.before.splitlines(), self.after.splitlines()
        rows = []
        sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            n = max(i2 - i1, j2 - j1)
            for k in range(n):
                la = a[i1 + k] if i1 + k < i2 else None
                lb = b[j1 + k] if j1 + k < j2 else None
                rows.append(_diff_row(tag, la, lb))
        return ('<table class="gpudsl-diff" style="border-collapse: collapse; '
                'font-family: monospace; font-size: 12px">'
                f'<tr><th style="text-align: left">{esc(self.left)}</th>'
                f'<th style="text-align: left">{esc(self.right)}</th></tr>' +
                "".join(rows) + "</table>")


_COLORS = {"delete": "#ffebe9", "insert": "#dafbe1", "replace": "#fff8c5", "equal": ""}


def _diff_cell(text, tag) -> str:
    if text is None:
        return '<td class="gpudsl-diff-empty"></td>'
    bg = _COLORS[tag]
    style = f"white-space: pre; padding: 0 8px; background: {bg}" if bg else \
        "white-space: pre; padding: 0 8px"
    return f'<td class="gpudsl-diff-{tag}" style="{style}">{esc(text)}</td>'


def _diff_row(tag, la, lb) -> str:
    ta = "delete" if tag in ("delete", "replace") and lb is None else tag
    tb = "insert" if tag in ("insert", "replace") and la is None else tag
    return f"<tr>{_diff_cell(la, ta)}{_diff_cell(lb, tb)}</tr>"


# ------------------------------------------------------------------ progress


def interactive() -> bool:
    """Whether someone watches: a terminal on stderr, or a Jupyter kernel
    (``GPUDSL_PROGRESS=0`` silences, ``=1`` forces)."""
    env = os.environ.get("GPUDSL_PROGRESS", "")
    if env:
        return env not in ("0", "no", "false")
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def status(text: str, delay: float = 1.0, stream=None):
    """A status line for work that may take long: shown on stderr only when
    ``interactive`` and once ``delay`` seconds have passed, then ended with the
    time taken; silent otherwise."""
    if not interactive():
        yield
        return
    out = stream or sys.stderr
    done = threading.Event()
    shown: list = []
    t0 = time.perf_counter()

    def show():
        if not done.wait(delay):
            out.write(f"{text} ...")
            out.flush()
            shown.append(True)

    t = threading.Thread(target=show, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
        if shown:
            out.write(f" done in {time.perf_counter() - t0:.1f} s\n")
            out.flush()


__all__ = ["interactive", "status", "highlight", "proc_html", "report_html", "diagnostic_html", "witness_html",
           "witness_rows", "kernel_html", "kernel_text", "Diff"]
