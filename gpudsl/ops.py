"""``gpudsl.ops`` is :mod:`gpudsl.stdlib.ops` (the graph nodes on arrays)."""
import sys

from .stdlib import ops as _ops

sys.modules[__name__] = _ops
