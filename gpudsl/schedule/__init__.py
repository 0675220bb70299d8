"""Scheduling: rewrite primitives that turn a simple proc into a fast GPU kernel.

Every primitive is a free function ``proc -> proc``; a loop, statement,
allocation, block or gap is named by a pattern string or a cursor (see
:mod:`gpudsl.schedule.cursors`).  Each either preserves the proc's meaning (what
the sequential interpreter computes) or raises :class:`gpudsl.SchedulingError`
naming the primitive, the statement and the reason (with a witness for
conflicts).  The returned proc forwards cursors of the old one:
``new.forward(cursor)``.
"""
from __future__ import annotations

from .calls import inline, replace, vectorize
from .cursors import Cursor, body, find, find_alloc, find_loop, forward
from .loops import (cut_loop, divide_loop, fission, fuse, parallelize_loop, remove_loop,
                    rename, reorder_loops, set_blocks_per_sm, set_unroll, simplify,
                    specialize, unroll_loop)
from .memory import (bind_expr, expand_dim, lift_alloc, pad_dim, set_memory, sink_alloc,
                     stage_mem)
from .simplify import normalize
from .sync import delete_sync, insert_sync

__all__ = ["divide_loop", "reorder_loops", "fission", "fuse", "unroll_loop", "set_unroll",
           "set_blocks_per_sm", "cut_loop",
           "remove_loop", "simplify", "rename", "specialize", "parallelize_loop",
           "stage_mem", "set_memory", "lift_alloc", "sink_alloc", "expand_dim", "pad_dim",
           "bind_expr", "insert_sync", "delete_sync", "vectorize", "inline", "replace",
           "Cursor", "find", "find_loop", "find_alloc", "forward", "body", "normalize"]
