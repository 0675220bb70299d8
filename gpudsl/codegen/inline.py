"""The inliner lives in :mod:`gpudsl.ir.inline`; these names stay importable from
here for ``runtime/kernel.py``."""
from ..ir.inline import inline_calls, written_names

__all__ = ["inline_calls", "written_names"]
