"""User kernels with the synchronization of ranged and split barriers and warp
collectives for the GPU campaign's smoke and sanitizer steps (``campaign_kernels.py
--sync``): the warp-specialized producer/consumer loop over ``buf[i % 2]`` joined by
``sync(0, 64)`` and the same loop with split (mbarrier) barriers (the checker's own
cases, ``tests/sync/cases.py``), a block reduction with ``warp_sum`` plus one SHARED
exchange (``tests/collectives/procs.py``), and the standard library's block reduction.
Each is proved by ``compile()`` and compared with numpy.  Importing this module fails
while the language lacks these constructs; the campaign then says so and runs the rest.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.collectives.procs import block_sum  # noqa: E402
from tests.sync.cases import pc_split, pc_sync  # noqa: E402


def _target() -> str:
    from gpudsl.stdlib.array_ops import backend

    return backend()


def cases():
    """(name, function of a numpy Generator returning (result, expected))."""
    def pipeline(p):
        def f(g):
            x = g.standard_normal((7, 32), np.float32)
            y = np.zeros_like(x)
            p.compile(_target())(x=x, y=y)
            return y, 2 * x
        return f

    def reduce(g):
        x = g.standard_normal((5, 256), np.float32)
        out = np.zeros(5, np.float32)
        block_sum.compile(_target())(x=x, out=out)
        return out, x.astype(np.float64).sum(1)

    return [("ranged barrier pipeline", pipeline(pc_sync)),
            ("split barrier pipeline", pipeline(pc_split)),
            ("warp_sum block reduction", reduce)]
