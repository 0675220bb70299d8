"""Running snippets in child processes (a fault there must not end the test run)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def child_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def sigint_as_a_terminal() -> None:
    """``preexec_fn`` for a child that is sent Ctrl-C: SIGINT back to its default (a
    shell running the tests as a background job starts children with SIGINT ignored,
    and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_child(args, timeout=300, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(**env), cwd=str(HERE))
