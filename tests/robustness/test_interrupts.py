"""Issue 12: Ctrl-C is honoured within a fraction of a second during an emulator launch and
during check() (an interrupted check raises KeyboardInterrupt; it never returns a verdict).
The time is measured from the signal to the child's report of the exception."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from .helpers import HERE, child_env, sigint_as_a_terminal


def _interrupt(what: str, env=None) -> tuple[float, str]:
    p = subprocess.Popen([sys.executable, str(HERE / "interrupt_child.py"), what],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=child_env(**(env or {})), preexec_fn=sigint_as_a_terminal)
    watchdog = threading.Timer(120, p.kill)  # never wait forever for a reply
    watchdog.start()
    try:
        line = p.stdout.readline()
        assert line.strip() == "ready", (line, p.stderr.read()[-3000:] if p.poll() else "")
        time.sleep(1.0)  # well inside the long call
        assert p.poll() is None
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        reply = p.stdout.readline().strip()
        elapsed = time.monotonic() - t0
        rest = p.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert reply == "KeyboardInterrupt", (reply, rest)
    assert rest[0].strip() == "alive" and p.returncode == 0, rest
    return elapsed, rest[1]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("what,env", [("emulator", None),
                                      ("emulator-wide", {"GPUDSL_EMU_WORKERS": "3"})])
def test_ctrl_c_stops_an_emulator_launch_at_once(what, env):
    elapsed, _ = _interrupt(what, env)
    assert elapsed < 1.0, f"{elapsed:.3f} s from SIGINT to KeyboardInterrupt"


def test_ctrl_c_stops_check_at_once_and_gives_no_verdict():
    elapsed, _ = _interrupt("check")
    assert elapsed < 1.0, f"{elapsed:.3f} s from SIGINT to KeyboardInterrupt"
