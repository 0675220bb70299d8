"""The environment a timing belongs to: target, device, driver, compiler and gpudsl
versions.  Emulated timings carry ``target: emulator`` and are never mixed with GPU ones."""
from __future__ import annotations

import ctypes
import json
import platform
from functools import lru_cache

from ..version import __version__


@lru_cache(maxsize=None)
def environment(target: str) -> dict:
    if target == "emulator":
        from ..runtime.emulator import compiler_version

        return {"target": "emulator", "device": f"cpu {platform.machine()}",
                "compiler": compiler_version(), "gpudsl": __version__}
    if target != "cuda":
        from ..errors import Error

        raise Error(f"autotune: unknown target {target!r}", None, "use 'cuda' or 'emulator'")
    from ..runtime.driver import device_arch, driver_available, libcuda
    from ..runtime.nvrtc import compiler_version

    name, driver = "none", "none"
    if driver_available():
        lib = libcuda()
        buf = ctypes.create_string_buffer(256)
        try:
            if lib.cuDeviceGetName(buf, 256, 0) == 0:
                name = buf.value.decode(errors="replace")
            v = ctypes.c_int(0)
            if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
                driver = str(v.value)
        except Exception:
            pass
    return {"target": "cuda", "device": name, "arch": device_arch(), "driver": driver,
            "compiler": compiler_version(), "gpudsl": __version__}


def env_key(target: str) -> str:
    return json.dumps(environment(target), sort_keys=True)
