"""``gpudsl perf FILE::PROC --bind n=4096 [--device H100] [--sass [--arch sm_90]]``: print
a proc's performance report (docs/performance.md) and, with ``--sass``, the
machine-code report of the kernel that runs (``perf.sass_report``)."""
from __future__ import annotations

import sys

from .cuda_command import find_proc


def run_perf(target: str, bindings: dict, device: str = "H100", sass: bool = False,
             arch: str | None = None) -> int:
    from ..errors import Error

    p = find_proc(target)
    missing = [q.name for q in p.ir.params
               if q.is_control and q.name not in bindings]
    if missing:  # the report is exact only for bound sizes: say how, on the command line
        binds = " ".join(f"--bind {m}=..." for m in missing)
        raise Error(f"gpudsl perf needs every size and index parameter of {p.name} bound; "
                    f"missing: {', '.join(missing)}", hint=f"gpudsl perf {target} {binds}")
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
