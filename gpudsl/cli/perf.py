"""``gpudsl perf FILE::PROC --bind n=4096 [--device H100]``: print a proc's
performance report (SPEC 4.1)."""
from __future__ import annotations

import sys

from .cuda import find_proc


def run_perf(target: str, bindings: dict, device: str = "H100") -> int:
    p = find_proc(target)
    sys.stdout.write(str(p.perf(device, **bindings)))
    return 0
