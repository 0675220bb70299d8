"""Issue 14: a status line for compiles longer than about a second, silent when not
interactive."""
from __future__ import annotations

import io
import time

from gpudsl import display


def test_status_line_after_the_delay(monkeypatch):
    monkeypatch.setenv("GPUDSL_PROGRESS", "1")
    out = io.StringIO()
    with display.status("gpudsl: compiling k", delay=0.05, stream=out):
        time.sleep(0.3)
    text = out.getvalue()
    assert text.startswith("gpudsl: compiling k ...") and " done in " in text


def test_quick_work_says_nothing(monkeypatch):
    monkeypatch.setenv("GPUDSL_PROGRESS", "1")
    out = io.StringIO()
    with display.status("gpudsl: compiling k", delay=5, stream=out):
        pass
    assert out.getvalue() == ""


def test_silent_when_not_interactive(monkeypatch):
    monkeypatch.setenv("GPUDSL_PROGRESS", "0")
    out = io.StringIO()
    with display.status("gpudsl: compiling k", delay=0, stream=out):
        time.sleep(0.05)
    assert out.getvalue() == ""
    monkeypatch.delenv("GPUDSL_PROGRESS")
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    monkeypatch.delitem(__import__("sys").modules, "ipykernel", raising=False)
    assert display.interactive() is False
