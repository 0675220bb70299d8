"""``gpudsl perf FILE::PROC --bind n=4096 [--device H100]``: print a proc's
performance report (docs/performance.md)."""
from __future__ import annotations

import sys

from .cuda import find_proc


def run_perf(target: str, bindings: dict, device: str = "H100") -> int:
    from ..errors import Error

    p = find_proc(target)
    missing = [q.name for q in p.ir.params
               if q.kind in ("size", "index") and q.name not in bindings]
    if missing:  # the report is exact only for bound sizes: say how, on the command line
        binds = " ".join(f"--bind {m}=..." for m in missing)
        raise Error(f"gpudsl perf needs every size and index parameter of {p.name} bound; "
                    f"missing: {', '.join(missing)}", hint=f"gpudsl perf {target} {binds}")
    sys.stdout.write(str(p.perf(device, **bindings)))
    return 0
