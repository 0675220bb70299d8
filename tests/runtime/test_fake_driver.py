"""The recording fake driver (``gpudsl/runtime/fake_driver.py``): the capture status it
reports per stream, the allocations and frees it records, and objects made under it
dying under it (collected later, under another driver, their ``__del__`` freed a fake
address there or deadlocked inside ``device._cu``'s first call: a test after a
fake-driver model test hung)."""
from __future__ import annotations

import gc

import numpy as np

from gpudsl.runtime import fake_driver


def test_capture_status_is_per_stream_and_frees_are_recorded():
    from gpudsl.runtime.device import DeviceBuffer
    from gpudsl.runtime.graphs import Stream, is_capturing

    with fake_driver.installed() as fake:
        s, other = Stream(), Stream()
        assert not is_capturing(s)
        fake.cuStreamBeginCapture_v2(s.handle, 1)
        assert is_capturing(s) and not is_capturing(other) and not is_capturing(None)
        b = DeviceBuffer(4, np.float32)
        assert fake.allocated_while_capturing == [b.ptr]
        fake.cuStreamEndCapture(s.handle, None)
        assert not is_capturing(s)
        ptr = b.ptr
        b.free()
        assert fake.freed == [ptr] and fake.allocated == [ptr]


def test_objects_made_under_the_fake_die_under_it():
    from gpudsl.runtime.graphs import Stream

    gc.disable()    # only the fake's own collection may collect the cycle
    try:
        with fake_driver.installed() as fake:
            s = Stream()
            cycle = [s]
            cycle.append(cycle)
            del s, cycle
        assert "cuStreamDestroy_v2" in fake.calls
    finally:
        gc.enable()
