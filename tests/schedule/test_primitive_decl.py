"""Primitives declared once (gpudsl/schedule/primitive.py): the registry, the
argument kinds, the name in errors, the wrapping into the caller's proc class,
and docs/primitives.md rendered from the declarations."""
from __future__ import annotations

import pathlib

import pytest

import gpudsl
import gpudsl.schedule as schedule
from gpudsl import BLOCKS, SHARED, SchedulingError
from gpudsl.ir.nodes import Sync
from gpudsl.schedule import (divide_loop, fission, lift_alloc, pad_dim, parallelize_loop,
                             rename, replace, set_memory, specialize, stage_mem, vectorize)
from gpudsl.schedule.cursors import fwd_insert, splice
from gpudsl.schedule.primitive import (LOOP, PRIMITIVES, STMT, Rewrite, current, fail,
                                       primitive, render)

from . import procs as P

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "primitives.md"

# the primitives the issue lists; a new one is added here, to its module and its doc
EXPECTED = {"divide_loop", "reorder_loops", "fission", "fuse", "unroll_loop", "set_unroll",
            "set_blocks_per_sm", "cut_loop", "remove_loop", "simplify", "rename",
            "specialize", "parallelize_loop", "stage_mem", "set_memory", "lift_alloc",
            "sink_alloc", "expand_dim", "pad_dim", "bind_expr", "insert_sync",
            "delete_sync", "vectorize", "inline", "replace", "merge_loops", "rearrange_dim",
            "reorder_stmts", "rotate_loop", "make_async", "pipeline_loop", "warp_specialize",
            "add_assert", "divide_dim", "make_tma", "make_wgmma", "set_swizzle", "set_registers",
            "pipeline_wgmma", "make_tma_store", "remove_guard",
            "set_block_order", "persist_blocks"}


@pytest.fixture
def declare():
    """Declare toy primitives for one test, then take them out of the registry."""
    before = set(PRIMITIVES)
    yield primitive
    for name in set(PRIMITIVES) - before:
        del PRIMITIVES[name]


# ------------------------------------------------------------------ registry and docs


def test_every_primitive_is_declared_exported_and_documented():
    assert set(PRIMITIVES) == EXPECTED
    text = DOCS.read_text()
    for name, pr in PRIMITIVES.items():
        assert name in schedule.__all__, name
        assert getattr(schedule, name) is pr.apply
        assert pr.apply.__name__ == name
        assert pr.summary and pr.legality and pr.example, f"{name}: incomplete docstring"
        assert f"{name}(" in pr.example, f"{name}: the example does not call it"
        assert f"### `{name}`" in text, name


def test_docs_are_the_rendering_of_the_declarations():
    assert DOCS.read_text() == render(), (
        "docs/primitives.md is out of date; regenerate it with\n"
        "    python -m gpudsl.schedule.primitive > docs/primitives.md")


def test_docs_have_a_section_per_module():
    text = render()
    for title in ("## Loops", "## Memory", "## Sync", "## Calls"):
        assert title in text
    assert text.index("### `divide_loop`") < text.index("## Memory") < \
        text.index("### `stage_mem`") < text.index("## Sync") < \
        text.index("### `delete_sync`") < text.index("## Calls") < text.index("### `inline`")


def test_public_signatures_are_kept():
    import inspect

    sig = inspect.signature(divide_loop)
    assert list(sig.parameters) == ["p", "loop", "factor", "names", "tail", "perfect"]
    assert sig.parameters["tail"].default == "guard"
    assert list(inspect.signature(stage_mem).parameters) == \
        ["p", "block", "window", "name", "memory", "zeros"]
    assert inspect.signature(stage_mem).parameters["memory"].default is SHARED
    assert PRIMITIVES["divide_loop"].signature == \
        "divide_loop(p, loop, factor, names, tail='guard', perfect=False)"


# ------------------------------------------------------------------ argument kinds


def _refused(f, prim, *words):
    with pytest.raises(SchedulingError) as e:
        f()
    assert e.value.primitive == prim, e.value
    for w in words:
        assert w in e.value.raw_message, e.value.raw_message
    return e.value


def test_wrong_argument_kinds_are_refused_naming_the_primitive():
    _refused(lambda: divide_loop(P.saxpy, "i", 2.5, ["a", "b"]), "divide_loop",
             "factor", "positive integer", "2.5")
    _refused(lambda: divide_loop(P.saxpy, "i", True, ["a", "b"]), "divide_loop", "factor")
    _refused(lambda: divide_loop(P.saxpy, "i", 4, ["a"]), "divide_loop", "2 names")
    _refused(lambda: divide_loop(P.saxpy, "i", 4, ["a", "a"]), "divide_loop", "differ")
    _refused(lambda: divide_loop(P.saxpy, "i", 4, ["a", "b"], tail="round"), "divide_loop",
             "tail", "'guard'")
    _refused(lambda: parallelize_loop(P.saxpy, "i", "BLOCKS"), "parallelize_loop",
             "mapping", "BLOCKS, THREADS", "'BLOCKS'")
    _refused(lambda: rename(P.saxpy, "for"), "rename", "keyword")
    _refused(lambda: rename(P.saxpy, 3), "rename", "not a valid name")
    _refused(lambda: set_memory(P.rowsum, "s", "SHARED"), "set_memory", "memory")
    _refused(lambda: vectorize(P.tiled_copy, "v", 3), "vectorize", "width", "2, 4")
    _refused(lambda: fission(P.rowsum, P.rowsum.find("s[_] = _").after(), n_lifts=0),
             "fission", "n_lifts")
    _refused(lambda: specialize(P.saxpy, "i", []), "specialize", "conds")
    _refused(lambda: replace(P.saxpy, "i", "axpy4"), "replace", "instr", "proc")
    _refused(lambda: stage_mem(P.rowsum, "j", "x[i, 0:m]", 7, SHARED), "stage_mem", "name")


def test_cursor_kinds_are_checked():
    _refused(lambda: divide_loop(P.saxpy, "y[_] = _", 4, ["a", "b"]), "divide_loop", "loop")
    _refused(lambda: lift_alloc(P.saxpy, 3), "lift_alloc", "cursor or a pattern")
    _refused(lambda: fission(P.rowsum, P.rowsum.find_loop("j")), "fission", "gap")


def test_a_missing_or_extra_argument_is_a_scheduling_error():
    _refused(lambda: divide_loop(P.saxpy, "i", 4), "divide_loop", "bad arguments")
    _refused(lambda: pad_dim(P.saxpy, "x", 0, "n", 1), "pad_dim", "bad arguments")


def test_the_first_argument_must_be_a_proc():
    with pytest.raises(TypeError, match="rename: the first argument must be a proc"):
        rename("saxpy", "f")


# ------------------------------------------------------------------ nesting


def test_errors_of_a_nested_primitive_name_the_outermost(monkeypatch):
    """vectorize ends with replace: a refusal there is vectorize's."""
    import gpudsl.schedule.call_primitives as calls

    real = calls.vector_copy_instr
    # an instr whose parameters expect SHARED memory: replace refuses the GLOBAL arrays
    monkeypatch.setattr(calls, "vector_copy_instr",
                        lambda w, d, s, ty=None: real(w, SHARED, SHARED))
    e = _refused(lambda: vectorize(P.tiled_copy, "v", 4), "vectorize", "SHARED memory")
    assert "vectorize: dst of vcopy4" in str(e)
    # called alone, the same refusal is replace's
    _refused(lambda: replace(P.tiled_copy, "v", real(4, SHARED, SHARED)), "replace",
             "SHARED memory")


def test_the_running_primitive_is_known_only_while_it_runs(declare):
    seen = []

    @declare("toy_outer", loop=LOOP)
    def toy_outer(p, loop):
        """Toy."""
        seen.append(current())
        q = divide_loop(p, loop, 4, ["io", "ii"])
        seen.append(current())
        divide_loop(q, "ii", 0, ["a", "b"])  # refused: named after toy_outer

    with pytest.raises(SchedulingError) as e:
        toy_outer(P.saxpy, "i")
    assert e.value.primitive == "toy_outer"
    assert seen == ["toy_outer", "toy_outer"]
    assert current() == "schedule"
    _refused(lambda: divide_loop(P.saxpy, "i", 0, ["a", "b"]), "divide_loop")


# ------------------------------------------------------------------ a primitive declared here


def test_a_new_primitive_is_one_declaration(declare):
    @declare("toy_sync_before", at=STMT)
    def toy_sync_before(p, at):
        """Insert a sync() before a statement (a toy: no legality here).

        Legality: none (a test).

        Example: ``toy_sync_before(p, "y[_] = _")``
        """
        if not at.node().loc:
            raise fail("no location", None)
        return Rewrite(splice(p.ir, at.addr, [Sync(at.loc), at.node()]),
                       fwd_insert(at.addr, 1))

    assert PRIMITIVES["toy_sync_before"].apply is toy_sync_before
    assert PRIMITIVES["toy_sync_before"].legality == "none (a test)."
    p = P.saxpy
    c = p.find("y[_] = _")
    q = toy_sync_before(p, c)
    assert type(q) is type(p) and isinstance(q, gpudsl.Proc)
    assert isinstance(q.find("sync()").node(), Sync)
    moved = q.forward(c)  # the cursor follows its statement, one place down
    assert moved.node() == c.node()
    assert moved.addr[:-1] == c.addr[:-1] and moved.addr[-1] == c.addr[-1] + 1
    assert q.forward(p.find_loop("i")).node().iter == "i"
    # a later primitive keeps forwarding through the toy's result
    r = divide_loop(q, "i", 4, ["io", "ii"])
    assert r.forward(c).node().name == "y"
    # argument kinds work for it too
    _refused(lambda: toy_sync_before(p, 3), "toy_sync_before", "cursor or a pattern")
    # and the docs would list it (out of the registry again after this test)
    assert "### `toy_sync_before`" in render()


def test_the_result_is_built_by_the_callers_proc_class(declare):
    """Primitives never import Proc: the input's ``_derive`` builds the result."""

    class MyProc(gpudsl.Proc):
        __slots__ = ()

        def _derive(self, ir, forward):
            return MyProc(ir, (self, forward))

    @declare("toy_identity")
    def toy_identity(p):
        """Toy."""
        return Rewrite(p.ir, lambda a: a)

    mine = MyProc(P.saxpy.ir)
    assert type(toy_identity(mine)) is MyProc
    q = divide_loop(mine, "i", 4, ["io", "ii"])
    assert type(q) is MyProc
    assert type(parallelize_loop(q, "io", BLOCKS)) is MyProc
    assert type(vectorize(MyProc(P.tiled_copy.ir), "v", 4)) is MyProc  # nested: replace


def test_a_declaration_must_name_real_arguments():
    with pytest.raises(TypeError, match="no argument 'loops'"):
        @primitive("toy_bad", loops=LOOP)
        def toy_bad(p, loop):
            """Toy."""
    assert "toy_bad" not in PRIMITIVES
