"""The layer rules of gpudsl/, asserted on the import graph built from the source.

Every ``import`` and ``from ... import`` in every module counts, function-local ones
included (a local import still ties the two modules together).  The rules are by
package, not by file, so new modules fall under them without editing this test:

- no import cycle between modules;
- no module below ``gpudsl.proc`` imports it (``ir``, ``frontend``, ``interpreter``,
  ``schedule``, ``analysis``, ``codegen``, ``runtime``, the compile layer, ``errors``);
- ``runtime`` imports neither ``gpudsl.ir`` nor ``gpudsl.codegen``, directly or through
  another module.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

import gpudsl

ROOT = pathlib.Path(gpudsl.__file__).resolve().parent

# packages (and modules) that sit below the public Proc
BELOW_PROC = ("gpudsl.errors", "gpudsl.language", "gpudsl.ir", "gpudsl.frontend",
              "gpudsl.interpreter", "gpudsl.schedule", "gpudsl.analysis", "gpudsl.codegen",
              "gpudsl.runtime", "gpudsl.compiler")
RUNTIME_MAY_NOT_REACH = ("gpudsl.ir", "gpudsl.codegen")


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _in(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported gpudsl module: first line}, from every import statement."""
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        package = mod if is_pkg else mod.rpartition(".")[0]
        edges: dict[str, int] = {}

        def add(target: str, line: int):
            # resolve to the longest existing module name
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != mod:
                edges.setdefault(target, line)

        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if _in(a.name, "gpudsl"):
                        add(a.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    if node.level > 1:
                        base = base[:len(base) - (node.level - 1)]
                    base = ".".join(base)
                    full = base + ("." + node.module if node.module else "")
                else:
                    full = node.module or ""
                if not _in(full, "gpudsl"):
                    continue
                for a in node.names:
                    sub = full + "." + a.name
                    add(sub if sub in files else full, node.lineno)
        graph[mod] = edges
    return graph


def _fmt(graph, a, b) -> str:
    return f"{a} -> {b} (line {graph[a][b]})"


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _reach(graph, start) -> dict[str, str]:
    """Every module reachable from ``start``, with the module that first imports it."""
    seen = {start: ""}
    todo = [start]
    while todo:
        v = todo.pop()
        for w in sorted(graph.get(v, ())):
            if w not in seen:
                seen[w] = v
                todo.append(w)
    return seen


def _path(seen, target) -> list[str]:
    path = [target]
    while seen[path[-1]]:
        path.append(seen[path[-1]])
    return path[::-1]


def test_graph_sees_local_imports():
    # the Proc door methods import lazily: the graph must still see them
    g = import_graph()
    assert "gpudsl.proc" in g and "gpudsl.ir.nodes" in g
    assert any(_in(t, "gpudsl.analysis") for t in g["gpudsl.proc"]), g["gpudsl.proc"]


def _layer(mod: str) -> str:
    """The layer a module belongs to: its top-level subpackage of gpudsl (or itself)."""
    parts = mod.split(".")
    return ".".join(parts[:2])


def test_no_import_cycles_between_layers():
    # modules collapsed to their subpackage (gpudsl.ir, gpudsl.schedule, gpudsl.proc, ...):
    # the layers must form a DAG
    g = import_graph()
    lg: dict[str, dict[str, int]] = {}
    why: dict[tuple[str, str], str] = {}
    for a, targets in g.items():
        for b in targets:
            la, lb = _layer(a), _layer(b)
            if la != lb and lb != "gpudsl":
                lg.setdefault(la, {}).setdefault(lb, 0)
                why.setdefault((la, lb), _fmt(g, a, b))
    bad = []
    for comp in _cycles(lg):
        members = set(comp)
        edges = [why[a, b] for a in comp for b in lg.get(a, ()) if b in members]
        bad.append("cycle among " + ", ".join(comp) + ":\n    " + "\n    ".join(edges))
    assert not bad, "import cycles between the layers of gpudsl/:\n  " + "\n  ".join(bad)


def test_nothing_imports_the_package_root():
    # ``from gpudsl import X`` inside gpudsl/ runs gpudsl/__init__ (which imports
    # everything above): only the stdlib, the CLI, bench and demo sit above it
    g = import_graph()
    bad = [_fmt(g, m, t) for m in sorted(g) for t in g[m]
           if t == "gpudsl" and any(_in(m, p) for p in BELOW_PROC + ("gpudsl.proc",))]
    assert not bad, "modules below the package root import it:\n  " + "\n  ".join(bad)


def test_no_import_cycles():
    g = import_graph()
    bad = []
    for comp in _cycles(g):
        members = set(comp)
        edges = [_fmt(g, a, b) for a in comp for b in g[a] if b in members]
        bad.append("cycle among " + ", ".join(comp) + ":\n    " + "\n    ".join(edges))
    assert not bad, "import cycles in gpudsl/:\n  " + "\n  ".join(bad)


def test_nothing_below_proc_imports_it():
    g = import_graph()
    bad = [_fmt(g, m, t) for m in sorted(g) for t in g[m]
           if any(_in(m, p) for p in BELOW_PROC) and _in(t, "gpudsl.proc")]
    assert not bad, "modules below gpudsl.proc import it:\n  " + "\n  ".join(bad)


def test_runtime_knows_nothing_of_ir_or_codegen():
    g = import_graph()
    bad = []
    for m in sorted(g):
        if not _in(m, "gpudsl.runtime"):
            continue
        seen = _reach(g, m)
        for t in sorted(seen):
            if any(_in(t, p) for p in RUNTIME_MAY_NOT_REACH):
                bad.append(" -> ".join(_path(seen, t)))
    assert not bad, "runtime/ reaches the IR or codegen:\n  " + "\n  ".join(bad)


def test_compile_layer_sits_above_codegen_and_runtime():
    g = import_graph()
    bad = [_fmt(g, m, t) for m in sorted(g) for t in g[m]
           if (_in(m, "gpudsl.codegen") or _in(m, "gpudsl.runtime"))
           and _in(t, "gpudsl.compiler")]
    assert not bad, "codegen/runtime import the compile layer:\n  " + "\n  ".join(bad)


CONTRIBUTING = ROOT.parent / "CONTRIBUTING.md"


def layer_rows() -> list[list[str]]:
    """The layer table of CONTRIBUTING.md, lowest row first: each row the gpudsl module or
    package names of its first column (``ir/`` -> ``gpudsl.ir``, ``proc.py`` ->
    ``gpudsl.proc``, ``__init__.py`` -> ``gpudsl``)."""
    text = CONTRIBUTING.read_text()
    table = text.split("<!-- layers: begin", 1)[1].split("<!-- layers: end", 1)[0]
    rows = []
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or "`" not in cells[1]:
            continue
        names = []
        for entry in cells[1].split("`")[1::2]:
            entry = entry.rstrip("/").removesuffix(".py")
            names.append("gpudsl" if entry == "__init__" else "gpudsl." + entry)
        rows.append(names)
    return rows


def _row_of(mod: str, rows) -> tuple[int, str] | None:
    best = None
    for i, row in enumerate(rows):
        for name in row:
            if (mod == name or (name != "gpudsl" and mod.startswith(name + "."))) and \
                    (best is None or len(name) > len(best[1])):
                best = (i, name)
    return best


def test_every_module_has_a_layer():
    rows = layer_rows()
    assert len(rows) >= 10, rows
    missing = sorted(m for m in import_graph() if _row_of(m, rows) is None)
    assert not missing, ("modules of gpudsl/ in no row of the layer table of "
                         "CONTRIBUTING.md: " + ", ".join(missing))


def test_imports_follow_the_layer_table():
    # the whole order, as CONTRIBUTING.md writes it: an import goes to the module's own
    # entry or to a lower row, never up and never sideways within a row
    rows, g = layer_rows(), import_graph()
    bad = []
    for a in sorted(g):
        ra = _row_of(a, rows)
        for b in g[a]:
            rb = _row_of(b, rows)
            if ra is None or rb is None or ra[1] == rb[1]:
                continue
            if rb[0] >= ra[0]:
                where = "sideways (same row)" if rb[0] == ra[0] else "up"
                bad.append(f"{_fmt(g, a, b)}: {ra[1]} imports {rb[1]} {where}")
    assert not bad, ("imports against the layer table of CONTRIBUTING.md:\n  "
                     + "\n  ".join(bad))


GRAPH_MAY_NOT_IMPORT = ("gpudsl.schedule", "gpudsl.ir")


def test_graph_builds_no_proc_itself():
    # the graph reads the node table and the stdlib's fused kernels; building and
    # scheduling procs is the stdlib's (no direct import of schedule/ or ir/)
    g = import_graph()
    bad = [_fmt(g, m, t) for m in sorted(g) for t in g[m]
           if _in(m, "gpudsl.graph") and any(_in(t, p) for p in GRAPH_MAY_NOT_IMPORT)]
    assert not bad, "graph/ imports schedule/ or ir/:\n  " + "\n  ".join(bad)
