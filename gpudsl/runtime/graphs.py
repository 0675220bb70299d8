"""CUDA streams and graphs through the driver API (ctypes on ``libcuda.so.1``).

A :class:`CapturedGraph` records the work a function enqueues on a stream once (stream
capture) and replays it with one ``cuGraphLaunch`` per call: the kernels, their grids and
their arguments (device pointers included) are frozen at capture, so the memory they
touch must stay where it was (a model's arena, constants and buffers do).

Capture happens on a stream of our own (the legacy default stream cannot be captured),
in thread-local mode (other threads' CUDA calls are not disturbed).  While capturing,
nothing may synchronize or allocate-and-memset on the legacy stream; a failure inside
the function ends the capture (the partial graph is destroyed) and re-raises.

Every entry point goes through :func:`_api`, the driver (``device._cu()`` with these
functions' argument types set): tests replace it by a recording fake to check the
capture logic on a machine without a GPU.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Callable

from .device import check

_P = ctypes.POINTER
_vp, _c_uint, _c_int, _u64 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ulonglong
_SIGNATURES = {
    "cuStreamCreate": [_P(_vp), _c_uint],
    "cuStreamDestroy_v2": [_vp],
    "cuStreamSynchronize": [_vp],
    "cuStreamBeginCapture_v2": [_vp, _c_int],
    "cuStreamEndCapture": [_vp, _P(_vp)],
    "cuStreamIsCapturing": [_vp, _P(_c_int)],
    "cuGraphInstantiateWithFlags": [_P(_vp), _vp, _u64],
    "cuGraphLaunch": [_vp, _vp],
    "cuGraphExecDestroy": [_vp],
    "cuGraphDestroy": [_vp],
    "cuMemcpyHtoDAsync_v2": [_u64, _vp, ctypes.c_size_t, _vp],
    "cuMemcpyDtoHAsync_v2": [_vp, _u64, ctypes.c_size_t, _vp],
    "cuMemcpyDtoDAsync_v2": [_u64, _u64, ctypes.c_size_t, _vp],
    "cuEventCreate": [_P(_vp), _c_uint],
    "cuEventRecord": [_vp, _vp],
    "cuEventDestroy_v2": [_vp],
    "cuStreamWaitEvent": [_vp, _vp, _c_uint],
}
CU_EVENT_DISABLE_TIMING = 2
CU_STREAM_NON_BLOCKING = 1
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
CU_STREAM_CAPTURE_STATUS_NONE = 0
CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906

_typed = False
_lock = threading.Lock()


def _api():
    """The driver with the stream and graph functions' argument types set."""
    global _typed
    from .device import _cu

    lib = _cu()
    if not _typed:
        with _lock:
            for name, argtypes in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.argtypes = argtypes
                fn.restype = ctypes.c_int
            _typed = True
    return lib


def is_capturing(stream) -> bool:
    """Whether ``stream`` (a ``CUstream`` handle, a :class:`Stream`, or None / 0: the
    legacy default stream) is being captured into a CUDA graph now
    (``cuStreamIsCapturing``; a capture already invalidated counts too).  The legacy
    stream reports an error while a blocking stream captures: that counts as capturing
    as well (work put there would join or break that capture)."""
    status = _c_int(CU_STREAM_CAPTURE_STATUS_NONE)
    res = _api().cuStreamIsCapturing(_vp(int(stream or 0)), ctypes.byref(status))
    if res == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return True
    check(res, "cuStreamIsCapturing")
    return status.value != CU_STREAM_CAPTURE_STATUS_NONE


class Stream:
    """A non-blocking CUDA stream (``int(stream)`` is the ``CUstream`` handle)."""

    def __init__(self):
        self.handle = _vp(0)
        check(_api().cuStreamCreate(ctypes.byref(self.handle), CU_STREAM_NON_BLOCKING),
              "cuStreamCreate")

    def __int__(self):
        return int(self.handle.value or 0)

    def synchronize(self) -> None:
        check(_api().cuStreamSynchronize(self.handle), "kernel execution (cuStreamSynchronize)")

    def wait_for(self, other: int | None) -> None:
        """Order this stream's later work after what is enqueued now on stream
        ``other`` (a ``CUstream`` handle; None or 0: the legacy default stream): an event
        recorded there, waited for here, no host synchronization.  This stream is
        non-blocking, so without it a copy here could read an input that the caller's
        stream has not finished writing."""
        cu = _api()
        if getattr(self, "_event", None) is None:
            self._event = _vp(0)
            check(cu.cuEventCreate(ctypes.byref(self._event), CU_EVENT_DISABLE_TIMING),
                  "cuEventCreate")
        check(cu.cuEventRecord(self._event, _vp(other or 0)), "cuEventRecord")
        check(cu.cuStreamWaitEvent(self.handle, self._event, 0), "cuStreamWaitEvent")

    def copy_to_device(self, dst_ptr: int, host_array) -> None:
        """Host → device on this stream (``host_array`` must stay alive until the stream
        is synchronized)."""
        if host_array.nbytes:
            check(_api().cuMemcpyHtoDAsync_v2(dst_ptr, host_array.ctypes.data,
                                              host_array.nbytes, self.handle),
                  "cuMemcpyHtoDAsync")

    def copy_to_host(self, host_array, src_ptr: int) -> None:
        if host_array.nbytes:
            check(_api().cuMemcpyDtoHAsync_v2(host_array.ctypes.data, src_ptr,
                                              host_array.nbytes, self.handle),
                  "cuMemcpyDtoHAsync")

    def copy_device(self, dst_ptr: int, src_ptr: int, nbytes: int) -> None:
        if nbytes:
            check(_api().cuMemcpyDtoDAsync_v2(dst_ptr, src_ptr, nbytes, self.handle),
                  "cuMemcpyDtoDAsync")

    def __del__(self):
        try:
            event = getattr(self, "_event", None)
            if event is not None and event.value:
                _api().cuEventDestroy_v2(event)
            if self.handle.value:
                _api().cuStreamDestroy_v2(self.handle)
        except Exception:
            pass


class CapturedGraph:
    """``CapturedGraph(stream, enqueue)``: ``enqueue(stream)`` runs once, its work on
    ``stream`` recorded as a CUDA graph; :meth:`replay` launches the whole graph on the
    stream (asynchronous; synchronize the stream to wait).  ``replays`` counts them."""

    def __init__(self, stream: Stream, enqueue: Callable[[Stream], None]):
        cu = _api()
        self.stream = stream
        self.graph = _vp(0)
        self.exec = _vp(0)
        self.replays = 0
        check(cu.cuStreamBeginCapture_v2(stream.handle, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture")
        try:
            enqueue(stream)
        except BaseException:
            partial = _vp(0)
            cu.cuStreamEndCapture(stream.handle, ctypes.byref(partial))
            if partial.value:
                cu.cuGraphDestroy(partial)
            raise
        check(cu.cuStreamEndCapture(stream.handle, ctypes.byref(self.graph)),
              "cuStreamEndCapture")
        try:
            check(cu.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), self.graph, 0),
                  "cuGraphInstantiate")
        except BaseException:
            cu.cuGraphDestroy(self.graph)
            self.graph = _vp(0)
            raise

    def replay(self) -> None:
        check(_api().cuGraphLaunch(self.exec, self.stream.handle), "cuGraphLaunch")
        self.replays += 1

    def close(self) -> None:
        cu = _api()
        if self.exec.value:
            cu.cuGraphExecDestroy(self.exec)
            self.exec = _vp(0)
        if self.graph.value:
            cu.cuGraphDestroy(self.graph)
            self.graph = _vp(0)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


__all__ = ["Stream", "CapturedGraph", "is_capturing"]
