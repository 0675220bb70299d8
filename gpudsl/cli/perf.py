"""``gpudsl perf FILE::PROC --bind n=4096 [--device H100] [--sass [--arch sm_90]]``: print
a proc's performance report (SPEC 4.1) and, with ``--sass``, the machine-code report
of the kernel that runs (``perf.sass_report``)."""
from __future__ import annotations

import sys

from .cuda import find_proc


def run_perf(target: str, bindings: dict, device: str = "H100", sass: bool = False,
             arch: str | None = None) -> int:
    p = find_proc(target)
    sys.stdout.write(str(p.perf(device, **bindings)))
    if sass:
        from ..ir.procdef import as_procdef
        from ..perf import running_module
        from ..perf.devices import device as device_table
        from ..perf.sass_report import sass_report

        ir = as_procdef(p) or p
        dev = device_table(device)
        module = running_module(ir, bindings)
        sys.stdout.write(str(sass_report(module, arch or dev.arch, dev, ir.name)))
    return 0
