"""The node table: every standard-library node declared once (docs/running.md).

A ``Node`` declaration says everything the rest of gpudsl needs to know about a node:

- ``name``: its ``gpudsl.ops`` name and tuning task (``"add"``); ``graph``: its graph
  and script name (``"SumNode"``), from which ``gpudsl.graph`` derives its constructor,
  and ``script``: its script arguments;
- ``shape``: the shape rule, ``(operands, attrs) -> (dtype, shape)`` where each operand
  has ``.dtype`` (``"float32"``/``"int64"``) and ``.shape``; it raises ``ShapeError``
  naming the operand at fault; ``dtypes``: the float dtypes its kernels take (another
  is refused by ``gpudsl.ops`` and by graphs), ``half_rule``: which shapes have no
  float16/bfloat16 kernel;
- its meaning: ``launch``, the kernel choice, ``(shapes, attrs, backend) -> Launch``: the
  proc (the tuning database's winner where there is one, else the default) and how
  each of its parameters comes from the operands (reshaped), the output, a literal or
  a fault flag; a pointwise node gives ``expr`` instead, its element's expression
  (``"{a} + {b}"``, ``"{x} * {x}"``), from which ``stdlib.pointwise`` builds its procs
  and the graph's fused kernels (``node_table.pointwise_node`` declares one);
- ``reference``: numpy's meaning, the one reference of ``gpudsl.ops``' tests, graphs,
  ``gpudsl tune``'s tasks and ``gpudsl bench``;
- ``tuning``: the node's tuning task for ``gpudsl tune`` (its space, arguments and
  reference; None: not tunable), ``example``: arguments ``gpudsl bench`` times it on,
  ``bench``: the names of ``gpudsl bench``'s own cases of it, ``snapshots``: its
  default kernels whose CUDA the snapshot tests keep.

``gpudsl.ops``, the graph (shape inference, constructors, the script parser, the
launch list, fusion), ``gpudsl tune`` and ``gpudsl bench`` all read this table
(through ``gpudsl.stdlib.node_table``, which declares the built-in nodes), so they
cannot disagree.  Adding a node is one ``register(Node(...))`` (a pointwise one:
``register(pointwise_node(...))``), plus its family module when its kernel is new
(CONTRIBUTING.md, "Adding a standard-library node").
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable


class ShapeError(Exception):
    """A node's operands do not fit; ``arg`` is the index of the operand at fault."""

    def __init__(self, message: str, arg: int | None = None, hint: str | None = None):
        super().__init__(message)
        self.message, self.arg, self.hint = message, arg, hint


# ------------------------------------------------------------------ launches
#
# How a kernel parameter gets its value (``Launch.args[name]``):
#   ("in", i, shape)     operand i, reshaped to ``shape`` (None: as it is)
#   ("out", shape)       the node's result, reshaped (None: as it is)
#   ("index", i, attr)   an int64 tensor of one element: operand i when the node has
#                        it, else the integer attribute ``attr`` made one
#   ("value", v)         a literal scalar (a row index, a scale)
#   ("array", a)         a literal numpy array (ALiBi slopes), copied where the
#                        operands live
#   ("err",)             a fault flag (int32, one element, zero before the launch)
#   ("scratch", name, shape)  the node's scratch array ``name`` (``Launch.scratch``),
#                        reshaped (None: as it is)


@dataclass(frozen=True)
class Launch:
    """One kernel launch for a node: ``proc`` and where each parameter comes from
    (see above); ``out``: the result's shape, None when the node writes its first
    operand in place.  ``before``: launches run first, in order (their ``out`` unused;
    e.g. an operand transposed into a scratch array); ``scratch``: ``(name, shape)`` of
    the arrays of the node's dtype they share, their contents undefined before."""

    proc: object
    args: tuple[tuple[str, tuple], ...]
    out: tuple | None = None
    before: tuple = ()
    scratch: tuple = ()

    def arg_dict(self) -> dict:
        return dict(self.args)


def array_params(p) -> list[str]:
    """The names of ``p``'s array parameters, in order."""
    return [q.name for q in p.ir.params if q.is_array]


# ------------------------------------------------------------------ declarations


FLOATS = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Node:
    """One standard-library node (see the module's text)."""

    name: str
    shape: Callable
    launch: Callable | None
    reference: Callable | None = None
    graph: str | None = None
    #: the script's arguments: ("ref" | "int" | "list" | "ref|int" | "bool", name);
    #: a "ref" is an operand, the others attributes (a "ref|int" is either)
    script: tuple = ()
    #: the operands' names, for messages of the generic op
    operands: tuple[str, ...] = ()
    #: the script's keyword options after the arguments, ``(name, words)``: written
    #: ``name=word`` (``MatMulNode($1, $2, precision=tf32)``), the first word the
    #: default (an attribute only when another word is given)
    keywords: tuple = ()
    #: in a graph: the value shares the first operand's memory (read when
    #: ``gpudsl.graph`` is imported: the built-in nodes' property)
    aliases: bool = False
    #: in a graph: no launch (a view)
    graph_view: bool = False
    #: a pointwise node's element: an expression of ``{a}`` and ``{b}`` (binary) or of
    #: ``{x}`` (unary) in the kernel language, computed in f32 (halves widened, the
    #: result rounded once); ``stdlib.pointwise`` builds the node's procs from it and
    #: graphs fuse the node into chains (``gpudsl.graph.fusion``, ``stdlib.fused``)
    expr: str | None = None
    #: a binary node whose operands may be swapped (a scalar or a broadcast first)
    commutes: bool = False
    #: the float dtypes the node's kernels take
    dtypes: tuple[str, ...] = ("float32",)
    #: ``(*shapes) -> why`` the float16/bfloat16 kernel does not take these operand
    #: shapes (None: it does)
    half_rule: Callable | None = None
    #: ``gpudsl tune``: (shapes, options) -> a tuning task; ``tune_shapes`` operands
    tuning: Callable | None = None
    tune_shapes: int = 1
    #: ``gpudsl bench``: (rng, rows, cols) -> (operands, attrs)
    example: Callable | None = None
    #: ``gpudsl bench``: the names of its own cases of this node (none: the node is
    #: timed on ``example``)
    bench: tuple[str, ...] = ()
    #: the snapshot tests: (name, () -> proc) of default kernels whose CUDA is kept
    snapshots: tuple = ()
    doc: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def pointwise(self) -> str | None:
        """``"binary"`` / ``"unary"`` for a pointwise node (``expr``), else None."""
        if self.expr is None:
            return None
        return "unary" if "{x}" in self.expr else "binary"

    def refuses(self, dtype: str, shapes=()) -> str | None:
        """Why this node has no kernel for ``dtype`` operands of these shapes (None:
        it has one)."""
        if dtype in FLOATS and dtype not in self.dtypes:
            return (f"{self.graph or self.name} has no {dtype} kernel; it takes "
                    f"{' or '.join(self.dtypes)}")
        if dtype in FLOATS[1:] and self.half_rule is not None and shapes:
            return self.half_rule(*shapes)
        return None


_TABLE: dict[str, Node] = {}
_GRAPH: dict[str, Node] = {}


def register(node: Node) -> Node:
    """Add ``node`` to the table (a name already there is replaced: a test may
    declare a node twice)."""
    _TABLE[node.name] = node
    if node.graph is not None:
        _GRAPH[node.graph] = node
    _table_changed()
    return node


def unregister(name: str) -> None:
    node = _TABLE.pop(name, None)
    if node is not None and node.graph is not None:
        _GRAPH.pop(node.graph, None)
    _table_changed()


def _table_changed() -> None:
    """The recipes of ``gpudsl.ops``' fast path (``ops_fast``) hold the kernel choices of
    the nodes they were planned with: a node replaced or removed drops them."""
    forget = getattr(sys.modules.get("gpudsl.stdlib.ops_fast"), "forget", None)
    if forget is not None:  # (None while ops_fast is being imported: no recipes yet)
        forget()


def get(name: str) -> Node | None:
    """The node called ``name`` in ``gpudsl.ops`` (None: no such node)."""
    return _TABLE.get(name)


def by_graph(op: str) -> Node | None:
    """The node called ``op`` in graphs and scripts (``"SumNode"``), or None."""
    return _GRAPH.get(op)


def all_nodes() -> list[Node]:
    return list(_TABLE.values())


# ------------------------------------------------------------------ tuned winners

_TUNED: dict = {}  # key -> (the database's stamp, value)
URL_STORE_SECONDS = 60.0  # a database server's winners are read again after this


_WHERE: dict = {}  # (the environment variables default_path reads) -> (path, is a URL)
_ENV_NAMES = ("GPUDSL_TUNE_DB", "GPUDSL_CACHE_DIR", "HOME")
STAMP_SECONDS = 0.5  # how long a database file's modification time is taken as read
_STAMP: list = [None, None, -1.0, -1]  # stamp, environment, when read, in-process writes


# os.environ's own mapping, read without its encoding layer where it has one (POSIX)
_ENV_DATA = getattr(os.environ, "_data", None) if os.name == "posix" else None
if not isinstance(_ENV_DATA, dict):
    _ENV_DATA = None
_ENV_KEYS = tuple(os.fsencode(k) for k in _ENV_NAMES)


def _env_now() -> tuple:
    """The values of the variables ``default_path`` reads."""
    if _ENV_DATA is not None:
        return tuple(_ENV_DATA.get(k) for k in _ENV_KEYS)
    return tuple(os.environ.get(k) for k in _ENV_NAMES)


def _db_where() -> tuple[str, bool]:
    key = _env_now()
    hit = _WHERE.get(key)
    if hit is None:
        from ..autotune.db import default_path

        where = default_path()
        hit = _WHERE[key] = (str(where), isinstance(where, str))
    return hit


def db_stamp():
    """What changes when the tuning database does: a file's modification time (None:
    no file), or, for a database server, the current minute-long period.  The file's
    time is read again after ``STAMP_SECONDS``, at once when the environment names
    another database or this process wrote a winner (``autotune.db.wrote``)."""
    data = _ENV_DATA
    if data is not None:  # _env_now, inline: this runs at every op call
        get = data.get
        env = get(_ENV_KEYS[0]), get(_ENV_KEYS[1]), get(_ENV_KEYS[2])
    else:
        env = _env_now()
    db = sys.modules.get("gpudsl.autotune.db")
    now, writes = time.monotonic(), 0 if db is None else db.WRITES
    stamp, seen_env, when, seen_writes = _STAMP
    if stamp is not None and env == seen_env and writes == seen_writes \
            and now - when < STAMP_SECONDS:
        return stamp
    where, is_url = _db_where()
    if is_url:
        stamp = (where, int(time.monotonic() // URL_STORE_SECONDS), writes)
    else:
        try:
            stamp = (where, os.stat(where).st_mtime_ns, writes)
        except OSError:
            stamp = (where, None, writes)
    _STAMP[:] = [stamp, env, now, writes]
    return stamp


def tuned(key, lookup: Callable, stamp=None):
    """``lookup()`` (a tuning database read: a winner or None), read once per
    database version for ``key``: a call costs one ``stat`` (``stamp``: the caller's,
    when it has one)."""
    stamp = db_stamp() if stamp is None else stamp
    hit = _TUNED.get(key)
    if hit is not None and hit[0] == stamp:
        replay_lookups(hit[2])
        return hit[1]
    asked, value = recorded(lookup)
    if len(_TUNED) > 4096:
        _TUNED.clear()
    _TUNED[key] = (stamp, value, asked)
    return value


def recorded(make: Callable):
    """``(asked, make())``: the tuning lookups ``make`` asked (``autotune.db``'s
    records), told to the recording around this call too, for a memo to keep."""
    from ..autotune import db

    with db.recording_lookups() as asked:
        value = make()
    db.replay_lookups(asked)
    return tuple(asked), value


def replay_lookups(asked: tuple) -> None:
    """A memo's hit tells the recording around it (a graph compile's, whose cache
    entry must list every lookup its choices rest on) the lookups its value rests on.
    No recording is possible before ``autotune.db`` is imported."""
    if asked:
        db = sys.modules.get("gpudsl.autotune.db")
        if db is not None:
            db.replay_lookups(asked)


__all__ = ["Node", "FLOATS", "Launch", "ShapeError", "register", "unregister", "get", "by_graph",
           "all_nodes", "array_params", "tuned", "db_stamp", "recorded", "replay_lookups"]
