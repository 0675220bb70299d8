"""Memories carry their facts (issue 41): no layer asks which memory an array is in
(``mem == SHARED``, ``mem in (None, GLOBAL)``, ``memory == "SHARED"``) outside the
declaration, gpudsl/ir/types.py; they ask its facts (``mem.per_thread``,
``mem.async_destination``, ``mem.warp_access``...).  A memory declared with SHARED's
facts under another name therefore compiles as SHARED does."""
from __future__ import annotations

import ast
import pathlib

import gpudsl
from gpudsl.ir import types as T

ROOT = pathlib.Path(gpudsl.__file__).resolve().parent
DECLARATION = ROOT / "ir" / "types.py"


def _names_a_memory(n) -> bool:
    if isinstance(n, ast.Name) or isinstance(n, ast.Attribute):
        return (n.id if isinstance(n, ast.Name) else n.attr) in T.MEMORIES
    if isinstance(n, ast.Constant):
        return n.value in T.MEMORIES
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_memory(e) for e in n.elts)
    if isinstance(n, ast.BoolOp):  # (p.mem or GLOBAL)
        return any(_names_a_memory(e) for e in n.values)
    return False


def memory_tests(source: str) -> list[str]:
    """The comparisons in ``source`` with a memory (or its name) on one side."""
    return [f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Compare) and any(_names_a_memory(x)
                                                  for x in [n.left] + n.comparators)]


def test_no_memory_identity_or_name_tests_outside_the_declaration():
    found = [f"{f.relative_to(ROOT)}:{hit}" for f in sorted(ROOT.rglob("*.py"))
             if f != DECLARATION for hit in memory_tests(f.read_text())]
    assert found == [], "\n".join(found)


def test_the_scan_sees_each_form():
    src = ("a = m == SHARED\nb = m in (None, GLOBAL)\nc = (p.mem or GLOBAL) != q\n"
           "d = rec.memory == 'SHARED'\ne = m is T.REGISTER\nf = m.per_thread\n")
    assert [x.split(":")[0] for x in memory_tests(src)] == ["1", "2", "3", "4", "5"]


def test_the_facts():
    assert T.memory_with(scope="thread") is T.REGISTER and T.REGISTER.per_thread
    assert T.memory_with(scope="block") is T.SHARED and T.SHARED.per_block
    assert T.param_memory(None) is T.GLOBAL and T.param_memory(T.CONST) is T.CONST
    assert T.memory_with(async_source=True) is T.GLOBAL
    assert T.memory_with(async_destination=True) is T.SHARED
    assert {m.name: m.warp_access for m in T.MEMORIES.values()} == {
        "GLOBAL": "sectors", "SHARED": "banks", "REGISTER": "", "CONST": ""}


def test_a_memory_with_shareds_facts_compiles_as_shared(monkeypatch):
    # regression: codegen planned static/dynamic shared memory for SHARED by identity,
    # so a block-scope memory under another name stayed a 64 KiB static array (over
    # the 48 KiB static limit) where SHARED becomes dynamic shared memory
    from dataclasses import replace

    toy = replace(T.SHARED, name="TILE")
    monkeypatch.setitem(T.MEMORIES, "TILE", toy)
    src = '''@proc
def big(n: size, x: f32[n, 16384], y: f32[n, 16384]):
    for b in par(0, n) @ BLOCKS:
        s: f32[16384] @ {mem}
        for t in par(0, 256) @ THREADS:
            for k in seq(0, 64):
                s[k * 256 + t] = x[b, k * 256 + t]
        sync()
        for t in par(0, 256) @ THREADS:
            for k in seq(0, 64):
                y[b, k * 256 + t] = s[16383 - k * 256 - t]
'''
    # one file name for both (anonymous texts are named apart: "<string#DIGEST>")
    shared = gpudsl.proc_from_source(src.format(mem="SHARED"), file="<big>")
    tile = gpudsl.proc_from_source(src.format(mem="TILE"), file="<big>")
    assert "extern __shared__" in shared.cuda_source()
    assert tile.cuda_source() == shared.cuda_source()
    assert tile.check().ok == shared.check().ok
