"""Driver detection never hangs or raises."""
import ctypes
import time

from gpudsl.runtime.driver import device_arch, driver_available


def _libcuda_loadable() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_driver_available_is_fast_and_cached():
    t = time.perf_counter()
    first = driver_available()
    assert isinstance(first, bool)
    assert driver_available() is first
    assert time.perf_counter() - t < 5.0
    if not _libcuda_loadable():
        assert first is False


def test_device_arch():
    arch = device_arch()
    assert arch.startswith("sm_")
    if not driver_available():
        assert arch == "sm_90"
