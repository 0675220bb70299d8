"""Remembered encodings of the IR expressions of one :class:`~gpudsl.ir.smt.Encoder`.

check() and the primitives' guards encode the same expressions again and again (a
barrier count at a position, asked for each pair of accesses): the encoding of an
expression is kept and given back where nothing it depends on has changed.  It is the
same Z3 term the encoder would build again (Z3 shares equal terms anyway), so no
query, proof or witness changes; only the Python work of building it is saved.

An expression's encoding depends on its structure, the thread's tag, the terms its
variables stand for in that thread (``ThreadEnv.vars``, then the encoder's fixed
parameters), the constant ranges of those variables (``ThreadEnv.ranges``) and nothing
else *unless* it reads memory, holds a warp collective or makes a fresh unknown (each
has its own value, per thread, occurrence or expression): those are never kept.  So
an entry is kept only for an expression without :class:`Read` or :class:`Collective`
whose encoding took no fresh name (:class:`FreshNames` did not move), under the key
(structure, tag, its variables' terms and ranges) read *after* the encoding (which
may have made a ``__`` variable of the thread).  Structure is exact: the class, the
operator or name, the type and, for a constant, the Python type of its value
(``Const(1)``, ``Const(True)`` and ``Const(1.0)`` compare equal but encode apart).
The terms of the key are held by the entry, so their identities stay their own.
"""
from __future__ import annotations

from .nodes import BinOp, Builtin, Const, UnOp, Var


class FreshNames:
    """``next()`` gives 0, 1, 2... (the encoder's fresh-name counter); ``n`` is how
    many were given (so a caller can see whether an encoding made a fresh unknown)."""

    __slots__ = ("n",)

    def __init__(self):
        self.n = 0

    def __iter__(self):
        return self

    def __next__(self) -> int:
        self.n += 1
        return self.n - 1


class Shapes:
    """Each expression's exact structure as ``(small integer, its variable names)``
    (equal structure, equal integer), or None for one that is never kept (reads,
    collectives, windows, anything else); memoised by identity (entries hold the node)."""

    def __init__(self):
        self._by_id: dict = {}      # id(node) -> (node, shape)
        self._ids: dict = {}        # structure tuple -> small integer

    def of(self, e):
        got = self._by_id.get(id(e))
        if got is not None and got[0] is e:
            return got[1]
        shape = self._compute(e)
        self._by_id[id(e)] = (e, shape)
        return shape

    def _compute(self, e):
        t = type(e)
        if t is Const:
            return self._intern((t, type(e.val), e.val, e.ty), ())
        if t is Var:
            return self._intern((t, e.name, e.ty), (e.name,))
        if t is BinOp:
            parts = (self.of(e.lhs), self.of(e.rhs))
            head = (t, e.op, e.ty)
        elif t is UnOp:
            parts = (self.of(e.arg),)
            head = (t, e.op, e.ty)
        elif t is Builtin:
            parts = tuple(self.of(a) for a in e.args)
            head = (t, e.name, e.ty)
        else:
            return None
        if None in parts:
            return None
        names = set()
        for p in parts:
            names.update(p[1])
        return self._intern(head + tuple(p[0] for p in parts), tuple(sorted(names)))

    def _intern(self, key, names):
        try:
            i = self._ids.get(key)
        except TypeError:   # an unhashable value: never kept
            return None
        if i is None:
            i = self._ids[key] = len(self._ids)
        return (i, names)


class EncodingMemo:
    """The kept encodings of one encoder (see the module docstring)."""

    def __init__(self, params: dict):
        self.params = params
        self.shapes = Shapes()
        self._terms: dict = {}   # (shape id, tag, state) -> (term, the state's terms)

    def _state(self, t, names):
        """The terms (by identity) and ranges of ``names`` in thread env ``t``, and the
        terms themselves (to keep them alive with the entry)."""
        key, held = [], []
        vars_, ranges = t.vars, t.ranges
        for n in names:
            v = vars_.get(n)
            if v is None:
                v = self.params.get(n)
                key.append((n, None if v is None else "param", ranges.get(n)))
            else:
                key.append((n, id(v), ranges.get(n)))
                held.append(v)
        return tuple(key), held

    def lookup(self, t, e):
        """(the kept term or None, the shape of ``e`` or None)."""
        shape = self.shapes.of(e)
        if shape is None:
            return None, None
        state, _ = self._state(t, shape[1])
        try:
            got = self._terms.get((shape[0], t.tag, state))
        except TypeError:
            return None, None
        return (got[0] if got is not None else None), shape

    def keep(self, t, shape, term) -> None:
        state, held = self._state(t, shape[1])
        try:
            self._terms[(shape[0], t.tag, state)] = (term, held)
        except TypeError:
            pass


__all__ = ["FreshNames", "EncodingMemo", "Shapes"]
