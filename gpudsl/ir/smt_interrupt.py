"""Ctrl-C while gpudsl asks the solver: always a KeyboardInterrupt, within a moment.

Left alone, a Ctrl-C during check() is often lost.  Z3 catches SIGINT during a query with
a handler of its own, and a query that finishes as the signal lands answers as if nothing
happened: the signal is gone and check() runs on to a verdict.  Outside queries, Python's
handler raises KeyboardInterrupt wherever the main thread happens to be: in a Z3 object's
``__del__`` Python drops it, in a ctypes argument conversion it becomes
``ctypes.ArgumentError`` (an ``Exception``, which user code catching ``Exception`` swallows).

So while the solver is in use (:func:`ctrl_c_guard`, entered by check(), by every rewrite
primitive and by each query):

* Z3's own handler is off (each solver gets the parameter ``ctrl_c`` false: :func:`quiet`);
* SIGINT is recorded by a handler of ours, which raises nothing where it lands;
* a watcher thread woken by the signal itself (``signal.set_wakeup_fd``) interrupts the
  query that is running (``Solver.interrupt``), so a long query ends at once;
* :func:`raise_if_interrupted` raises the KeyboardInterrupt where raising is safe: before
  and after each query and when the outermost guard is left.

Only the main thread handles signals; elsewhere the guard does nothing.  A SIGINT handler
other than Python's default one (``SIG_IGN``, an application's own) is left in place.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager


class _State:
    depth = 0            # nesting of ctrl_c_guard in the main thread
    pending = False      # a SIGINT arrived and has not been raised yet
    running = None       # the z3 solver whose query runs now, if any
    lock = threading.Lock()
    pipe: tuple | None = None   # (read end, write end) the watcher sleeps on


def quiet(solver):
    """``solver`` with Z3's own Ctrl-C handling off (gpudsl's guard handles SIGINT)."""
    solver.set("ctrl_c", False)
    return solver


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt of a Ctrl-C that arrived inside the guard."""
    if _State.pending:
        _State.pending = False
        raise KeyboardInterrupt("interrupted while proving (Ctrl-C)")


@contextmanager
def running(solver):
    """Mark ``solver``'s query as the one a Ctrl-C interrupts."""
    with _State.lock:
        _State.running = solver
    try:
        yield
    finally:
        with _State.lock:
            _State.running = None


def _interrupt_running() -> None:
    with _State.lock:
        s = _State.running
        if s is not None:
            stop = getattr(s, "interrupt", None) or s.ctx.interrupt
            stop()


def _on_sigint(signum, frame) -> None:
    _State.pending = True   # the watcher has interrupted the query, if one ran


def _watch(fd: int) -> None:
    """The watcher thread: each byte on ``fd`` is a signal's number (``set_wakeup_fd``)."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            _State.pending = True
            _interrupt_running()


def _wakeup_pipe() -> int:
    """The write end of the watcher's pipe (the watcher is started once per process)."""
    if _State.pipe is None:
        r, w = os.pipe()
        os.set_blocking(w, False)
        threading.Thread(target=_watch, args=(r,), name="gpudsl-ctrl-c", daemon=True).start()
        _State.pipe = (r, w)
    return _State.pipe[1]


@contextmanager
def ctrl_c_guard():
    """Inside: a Ctrl-C is recorded and ends the running query; it is raised as a
    KeyboardInterrupt at the next safe point, at the latest when the outermost guard is
    left (so nothing inside ever returns a verdict after it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _State.depth:
        _State.depth += 1
        try:
            yield
        finally:
            _State.depth -= 1
        return
    try:
        old = signal.getsignal(signal.SIGINT)
    except ValueError:     # pragma: no cover - no signals in this interpreter
        old = None
    if old is not signal.default_int_handler:
        yield
        return
    old_fd = signal.set_wakeup_fd(_wakeup_pipe(), warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, _on_sigint)
    _State.depth, _State.pending = 1, False
    try:
        yield
    finally:
        _State.depth = 0
        signal.signal(signal.SIGINT, old)
        signal.set_wakeup_fd(old_fd, warn_on_full_buffer=False)
        if _State.pending:
            _State.pending = False
            raise KeyboardInterrupt("interrupted while proving (Ctrl-C)")
