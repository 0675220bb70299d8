"""``gpudsl.ops`` is :mod:`gpudsl.stdlib.array_ops` (the graph nodes on arrays)."""
import sys

from .stdlib import array_ops as _ops

sys.modules[__name__] = _ops
