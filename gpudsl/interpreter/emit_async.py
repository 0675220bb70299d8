"""The asynchronous statements of a proc → lines of the interpreter's function (a part
of :class:`.emit_stmt.ProcEmitter`, split from it): async copies (plain and with
``bar=``), warpgroup MMAs, bulk tensor (TMA) loads and stores, their elements, commits
and waits; each held in flight by the running thread's record (``_asy``:
:mod:`.async_copies`, :mod:`.tma_copies`) until what completes it."""
from __future__ import annotations

from . import sync_order, tma_copies
from ..errors import InterpError
from ..ir.async_copy_meaning import shifted
from ..ir.nodes import (AsyncCommit, AsyncCopy, AsyncWait, Read, Stmt, TmaLoad, Wgmma,
                        WgmmaCommit, WgmmaWait)
from ..ir.printer import print_stmt
from ..ir.tma_meaning import elements as tma_elements, store_elements
from ..ir.wgmma_meaning import elements as wgmma_elements, lane_of
from .emit_expr import READ, WRITE


def _stmt_text(s: Stmt) -> str:
    return print_stmt(s)[0].strip()


def _async_outside(acc):
    who = ("a wgmma is issued by the 128 threads of a warpgroup" if acc.how == "wgmma" else
           "an async copy is started by one thread")
    raise InterpError(f"`{acc.text}` stands outside any @ THREADS loop: {who}", acc.loc,
                      "put it inside a THREADS loop")


class AsyncStmtEmitter:
    """The async statements' methods of :class:`.emit_stmt.ProcEmitter` (which also
    derives from :class:`.emit_expr.ExprEmitter`: ``access``, ``flat``, ``line``...)."""

    # ------------------------------------------------------------ async copies

    def _tkey(self) -> str:
        """The running thread's (z, y, x) in the generated code; None at block level."""
        if not self.tnames:
            return "None"
        vals = [f"v_{n}" for n in self.tnames[-3:]]
        return "(" + ", ".join(["0"] * (3 - len(vals)) + vals) + ")"

    def _AsyncCopy(self, s: AsyncCopy):
        if not self.tnames:
            acc = self.access(s.loc, _stmt_text(s), "async copy", s.dst)
            self.line(f"_async_outside({acc})")
            return
        acc = self.access(s.loc, _stmt_text(s), "async copy", s.dst)
        dks, sks = [], []
        for k in range(s.n):
            dks.append(self.flat(s.dst, shifted(s.dst_idx, k), acc, WRITE))
            sks.append(self.flat(s.src, shifted(s.src_idx, k), acc, READ))
        d = ", ".join(dks) + ("," if len(dks) == 1 else "")
        r = ", ".join(sks) + ("," if len(sks) == 1 else "")
        shapes = []
        for name in (s.dst, s.src):
            info = self.arrays[name]
            dims = ", ".join(info.dim(k) for k in range(info.ndim))
            shapes.append(f"({dims}{',' if info.ndim == 1 else ''})")
        if s.bar is not None:
            return self._bar_copy(s, acc, dks, sks, shapes)
        race = f"_ctx, (tr_{s.dst}, tr_{s.src})" if self.race else "None, None"
        self.line(f"_asy.copy({self._tkey()}, {acc}, a_{s.dst}, ({d}), a_{s.src}, ({r}), "
                  f"{race}, ({shapes[0]}, {shapes[1]}))")

    def _bar_copy(self, s: AsyncCopy, acc, dks, sks, shapes) -> None:
        """``async_copy(..., bar=b)``: held in flight until the phase of ``b`` the thread's
        next arrive completes, as a bulk tensor copy (:mod:`.tma_copies`)."""
        items = self.fresh("_bcl")
        pairs = ", ".join(f"({d}, {r}, a_{s.src}[{r}])" for d, r in zip(dks, sks))
        self.line(f"{items} = [{pairs}]")
        bar = f"b_{s.bar}"
        if s.index is not None:
            el = self.const(sync_order.ring_element, "_F")
            bar = f"{el}(b_{s.bar}, {self.ex(s.index)}, {acc})"
        race = f"_ctx, (tr_{s.dst}, tr_{s.src})" if self.race else "_ctx, None"
        f = self.const(tma_copies.issue, "_F")
        self.line(f"{f}(_asy, {self._tkey()}, {acc}, {bar}, a_{s.dst}, {items}, a_{s.src}, "
                  f"{race}, ({shapes[0]}, {shapes[1]}), 'async copy')")

    def access(self, loc, text: str, how: str, name: str) -> str:
        if self.wg is not None:   # an access of a wgmma's meaning: quote the wgmma
            text, how = self.wg[3], "wgmma"
        return super().access(loc, text, how, name)

    def _Wgmma(self, s: Wgmma):
        """A wgmma (:mod:`gpudsl.ir.wgmma_meaning`): the thread's share computed here, its accesses
        noted and held in flight until the wgmma_wait that completes its group."""
        text = _stmt_text(s)
        if not self.tnames:
            self.line(f"_async_outside({self.access(s.loc, text, 'wgmma', s.acc.name)})")
            return
        notes, node = self.fresh("_wgl"), self.const(s, "_N")
        self.line(f"{notes} = []")
        roles = {s.a.name: "src", s.b.name: "src", s.acc.name: "dst"}
        self.wg = (notes, roles, node, text)
        try:
            self.block(wgmma_elements(s, lane_of(self.tnames[-1])))
        finally:
            self.wg = None
        site = self.access(s.loc, text, "wgmma", s.acc.name)
        ctx = "_ctx" if self.race else "None"
        dims = []
        for name in dict.fromkeys((s.acc.name, s.a.name, s.b.name)):
            info = self.arrays[name]
            shape = ", ".join(info.dim(k) for k in range(info.ndim))
            dims.append(f"id(a_{name}): ({name!r}, ({shape},))")
        self.line(f"_asy.wgmma({self._tkey()}, {site}, {notes}, {node}, {ctx}, "
                  f"{{{', '.join(dims)}}})")

    def _TmaLoad(self, s: TmaLoad):
        """A bulk tensor load (:mod:`gpudsl.ir.tma_meaning`): its box read here, its elements held
        in flight until the barrier phase it completes (:mod:`.tma_copies`)."""
        self._bulk(s, "bulk tensor copy", tma_elements(s), tma_copies.issue)

    def _TmaStore(self, s):
        """A bulk tensor store: its tile read here, held in flight until the tma_wait
        that completes its group (:mod:`.tma_copies`)."""
        self._bulk(s, "bulk tensor store", store_elements(s), tma_copies.store)

    def _bulk(self, s, how: str, meaning, issue) -> None:
        """A bulk tensor copy's elements (``meaning``) noted by the issuing thread, then
        ``issue(_asy, thread, site, [barrier,] dst, items, src, race, shapes)``."""
        site = self.access(s.loc, _stmt_text(s), how, s.dst.name)
        if not self.tnames:
            self.line(f"_async_outside({site})")
            return
        items = self.fresh("_tml")
        self.line(f"{items} = []")
        self.tma = items
        try:
            self.block(meaning)
        finally:
            self.tma = None
        bar = ""
        if isinstance(s, TmaLoad):
            bar = f"b_{s.name}, "
            if s.index is not None:
                el = self.const(sync_order.ring_element, "_F")
                bar = f"{el}(b_{s.name}, {self.ex(s.index)}, {site}), "
        race = f"_ctx, (tr_{s.dst.name}, tr_{s.src.name})" if self.race else "_ctx, None"
        shapes = []
        for name in (s.dst.name, s.src.name):
            info = self.arrays[name]
            dims = ", ".join(info.dim(k) for k in range(info.ndim))
            shapes.append(f"({dims}{',' if info.ndim == 1 else ''})")
        f = self.const(issue, "_F")
        self.line(f"{f}(_asy, {self._tkey()}, {site}, {bar}a_{s.dst.name}, {items}, "
                  f"a_{s.src.name}, {race}, ({shapes[0]}, {shapes[1]}))")

    def _TmaCommit(self, s):
        self.line(f"_asy.commit({self._tkey()}, 'ts')")

    def _TmaWait(self, s):
        self.line(f"_asy.wait({self._tkey()}, {s.depth}, 'ts')")

    def _TmaElement(self, s):
        """One element of a bulk tensor copy: noted (destination index, source index,
        value), written where the copy lands."""
        acc = self.access(s.loc, _stmt_text(s.tma), "bulk tensor copy", s.name)
        dk = self.flat(s.name, s.idx, acc, WRITE)
        if isinstance(s.rhs, Read):
            sk = self.fresh("_tsk")
            self.line(f"{sk} = {self.flat(s.rhs.name, s.rhs.idx, acc, READ)}")
            self.line(f"{self.tma}.append(({dk}, {sk}, a_{s.rhs.name}[{sk}]))")
        else:
            self.line(f"{self.tma}.append(({dk}, None, {self.ex_as(s.rhs, s.rhs.ty)}))")

    def _WgmmaElement(self, s):
        self._Reduce(s)

    def _WgmmaCommit(self, s: WgmmaCommit):
        self.line(f"_asy.commit({self._tkey()}, 'wg')")

    def _WgmmaWait(self, s: WgmmaWait):
        self.line(f"_asy.wait({self._tkey()}, {s.depth}, 'wg')")

    def _AsyncCommit(self, s: AsyncCommit):
        self.line(f"_asy.commit({self._tkey()})")

    def _AsyncWait(self, s: AsyncWait):
        self.line(f"_asy.wait({self._tkey()}, {s.depth})")
