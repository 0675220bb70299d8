"""The edits of gpudsl.schedule.edits return their forwarding (issue 41): no primitive
splices statements or writes a forwarding by hand, and each edit's forwarding sends a
statement's cursor to that statement in the new proc."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpudsl
from gpudsl import SchedulingError
from gpudsl.ir.addresses import iter_stmts, stmt_at
from gpudsl.ir.nodes import Pass
from gpudsl.schedule import edits as E
from gpudsl.schedule import unroll_loop

from . import procs as P

SCHEDULE = Path(gpudsl.__file__).parent / "schedule"
# the forwarding machinery (cursors.py) and the edits that use it (edits.py)
HOME = {"cursors.py", "edits.py"}
HAND = {"fwd_splice", "fwd_edits", "fwd_insert", "fwd_identity", "compose", "splice",
        "replace_block"}


def _hand_forwardings(path: Path) -> list[str]:
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) \
            else None
        if name in HAND:
            out.append(f"{path.name}:{n.lineno}: {name}")
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Rewrite":
            out.append(f"{path.name}:{n.lineno}: Rewrite(...) built by hand")
        if isinstance(n, ast.alias) and n.name in HAND:
            out.append(f"{path.name}: imports {n.name}")
    return out


def test_no_primitive_writes_a_forwarding_by_hand():
    found = [x for f in sorted(SCHEDULE.glob("*.py")) if f.name not in HOME
             for x in _hand_forwardings(f)]
    assert found == [], "\n".join(found)


def test_the_scan_sees_a_hand_forwarding(tmp_path):
    src = "from .cursors import fwd_splice\nx = Rewrite(ir, fwd_splice(a, 1))\n"
    path = tmp_path / "_gpudsl_hand_fwd.py"
    path.write_text(src)
    assert len(_hand_forwardings(path)) == 3


def test_move_forwards_the_moved_and_the_shifted():
    ir = P.rowsum.ir  # s[i] = 0; for j: s[i] += ... inside for i
    loop_i = ir.body[0]
    a_init, a_j = (0, "body", 0), (0, "body", 1)
    rw = E.move(ir, a_j, a_init)  # the j loop before the initialisation
    assert stmt_at(rw.ir, a_init) == stmt_at(ir, a_j)
    assert rw.forward(a_j) == a_init and rw.forward(a_init) == a_j
    assert rw.forward(a_j + ("body", 0)) == a_init + ("body", 0)
    assert rw.forward((0,)) == (0,) and len(rw.ir.body[0].body) == len(loop_i.body)


def test_move_out_of_a_block_and_into_one():
    ir = P.rowsum.ir
    rw = E.move(ir, (0, "body", 0), (0,))  # the initialisation before the i loop
    assert rw.forward((0, "body", 0)) == (0,)
    assert rw.forward((0,)) == (1,)
    assert rw.forward((0, "body", 1)) == (1, "body", 0)
    back = E.move(rw.ir, (0,), (1, "body", 0))
    assert back.ir == ir and back.forward((1, "body", 0)) == (0, "body", 1)
    with pytest.raises(AssertionError):
        E.move(ir, (0,), (0, "body", 1))  # into itself


def test_in_place_edits_keep_every_address_and_check_the_shape():
    ir = P.two_loops.ir
    s = ir.body[0]
    rw = E.update(ir, (0,), [s.with_(unroll=True)])
    assert all(rw.forward(a) == a for a, _ in iter_stmts(ir))
    with pytest.raises(AssertionError):
        E.update(ir, (0,), [s.with_(body=s.body + s.body)])


def test_replace_checks_the_parts_it_keeps():
    ir = P.two_loops.ir
    with pytest.raises(AssertionError):  # no statement 5 in the new proc
        E.replace(ir, (0,), [ir.body[0]], keep=[E.Moved((0,), (5,))])
    with pytest.raises(AssertionError):  # a statement cannot become a block
        E.replace(ir, (0,), [ir.body[0]], keep=[E.Moved((0,), (0, "body"))])


def test_split_and_join_are_inverse():
    ir = P.independent_phases.ir
    a = next(a for a, s in iter_stmts(ir) if getattr(s, "body", ()) and len(s.body) > 2)
    L = stmt_at(ir, a)
    halves = [L.with_(body=L.body[:1]), L.with_(body=L.body[1:])]
    sp = E.split(ir, a, 1, halves)
    assert sp.forward(a + ("body", 1)) == a[:-1] + (a[-1] + 1, "body", 0)
    jn = E.join(sp.ir, a, a[:-1] + (a[-1] + 1,), L)
    both = sp.then(jn)
    assert both.ir == ir
    assert all(both.forward(x) == x for x, _ in iter_stmts(ir))


def test_a_deleted_sync_alone_in_a_body_leaves_a_pass():
    ir = P.two_loops.ir
    rw = E.replace(ir, (0, "body", 0), [Pass(None)])
    with pytest.raises(Exception):
        rw.forward((0, "body", 0))


def test_unrolling_a_loop_that_never_runs_invalidates_its_body_cursors():
    # regression: a cursor into the body of a loop unrolled zero times was sent to
    # the statement after the loop (silently wrong); there is no copy to follow
    p = gpudsl.proc_from_source('''@proc
def none(x: f32[4]):
    for i in seq(0, 0):
        x[i] = 1.0
    x[0] = 2.0
''')
    body_stmt = p.find("x[i] = _")
    q = unroll_loop(p, "i")
    with pytest.raises(SchedulingError, match="no longer exists"):
        q.forward(body_stmt)
