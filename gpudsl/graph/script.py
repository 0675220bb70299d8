"""HamKaas's script language: ``parse`` (script text → ``Graph``) and
``to_script`` (a node → the script and its constants).

One statement per line, ``$N = Node(args);`` in topological order, then ``result = $N;``;
a node's keyword options (its declaration's ``keywords``) follow its arguments as
``name=word`` (``MatMulNode($1, $2, precision=tf32)``).
Every refusal is a ``gpudsl.GraphError`` at the script's line and column.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..errors import GraphError
from ..stdlib.node_table import all_nodes, by_graph
from .graph_nodes import DTYPES, LATER, Node, ShapeError, infer  # noqa: F401

# argument kinds: "ref" ($N), "name" (identifier), "dtype", "list" ([ints]), "int",
# "ref|int", "bool" (0 or 1), "float", "floats" ([numbers]); a computing node's come
# from its declaration in the node table (``gpudsl.stdlib.node_table``)
LEAF_SIGNATURES: dict[str, tuple[str, ...]] = {
    "InputTensor": ("name", "dtype", "list"),
    "ConstantTensor": ("name", "dtype", "list"),
    "BufferTensor": ("dtype", "list"),
}


def signature(op: str) -> tuple[str, ...] | None:
    """The script arguments of node ``op`` (None: no such node)."""
    if op in LEAF_SIGNATURES:
        return LEAF_SIGNATURES[op]
    decl = by_graph(op)
    return None if decl is None else tuple(kind for kind, _ in decl.script)


#: every node of this version (the node table's when this module was imported)
SIGNATURES: dict[str, tuple[str, ...]] = dict(LEAF_SIGNATURES, **{
    n.graph: signature(n.graph) for n in all_nodes() if n.graph})
_KIND_TEXT = {"ref": "a node reference $N", "name": "a tensor name", "dtype":
              "a dtype (float32, float16, bfloat16 or int64)", "list": "a list of integers [..]",
              "int": "an integer", "ref|int": "an integer or a node reference $N",
              "bool": "an integer", "float": "a number", "floats": "a list of numbers [..]"}
#: an optional trailing argument's kind ends in "?" ("int?", "float?"): it may be left
#: out (with the ones after it); ``to_script`` writes it only when the node has it

_TOKEN = re.compile(r"\s*(?:(?P<ref>\$\d+)|(?P<float>-?\d+(?:\.\d*)?[eE][-+]?\d+|-?\d+\.\d*)"
                    r"|(?P<int>-?\d+)|(?P<ident>[A-Za-z_]\w*)|(?P<punct>[=(),;\[\]]))")


def _kind_text(kind: str) -> str:
    return _KIND_TEXT[kind.rstrip("?")] + (" (optional)" if kind.endswith("?") else "")


def _required(sig) -> int:
    """How many of the arguments ``sig`` must be given (the optional ones trail)."""
    return sum(1 for kind in sig if not kind.endswith("?"))


@dataclass
class Graph:
    """A parsed script: its nodes in topological order and the result."""

    nodes: list[Node]
    result: Node
    inputs: dict[str, Node] = field(default_factory=dict)
    constants: dict[str, Node] = field(default_factory=dict)
    buffers: list[Node] = field(default_factory=list)
    text: str = ""
    file: str = "<script>"


class _Tok(NamedTuple):
    kind: str
    text: str
    col: int  # 1-based


def _tokens(line: str, lineno: int) -> list[_Tok]:
    out, pos = [], 0
    end = len(line.rstrip())  # once: the rest of the line is not copied per token
    while pos < end:
        m = _TOKEN.match(line, pos)
        if m is None or m.end() == pos:
            col = pos + len(line[pos:]) - len(line[pos:].lstrip()) + 1
            raise GraphError(f"unexpected symbol {line[col - 1]!r}", lineno, col, line)
        kind = m.lastgroup
        out.append(_Tok(kind, m.group(kind), m.start(kind) + 1))
        pos = m.end()
    return out


class _Line:
    def __init__(self, toks, lineno, source):
        self.toks, self.i, self.lineno, self.source = toks, 0, lineno, source

    def error(self, message, tok=None, hint=None):
        if tok is None:
            tok = self.toks[self.i] if self.i < len(self.toks) else None
        col = tok.col if tok is not None else len(self.source.rstrip()) + 1
        return GraphError(message, self.lineno, col, self.source, hint=hint)

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self, what):
        t = self.peek()
        if t is None:
            raise self.error(f"the statement ends early: expected {what}")
        self.i += 1
        return t

    def expect(self, text, what=None):
        t = self.peek()
        if t is None or t.text != text:
            found = "the end of the line" if t is None else repr(t.text)
            raise self.error(f"expected {what or repr(text)}, found {found}")
        self.i += 1
        return t

    def end(self):
        self.expect(";", "';' at the end of the statement")
        t = self.peek()
        if t is not None:
            raise self.error(f"trailing symbols after ';': {t.text!r}",
                             hint="one statement per line")


def _int(ln: "_Line", t) -> int:
    """An integer literal of the script: a 64-bit signed value, or an error at it (a
    literal of thousands of digits is not even converted)."""
    digits = t.text.lstrip("+-")
    if len(digits) > 19 or not -(2 ** 63) <= int(t.text) < 2 ** 63:
        shown = t.text if len(t.text) <= 24 else t.text[:20] + f"... ({len(digits)} digits)"
        raise ln.error(f"the integer {shown} does not fit in 64 bits", t)
    return int(t.text)


def _parse_list(ln: _Line):
    ln.expect("[")
    items = []
    if ln.peek() is not None and ln.peek().text == "]":
        ln.i += 1
        return items
    while True:
        t = ln.next("an integer")
        if t.kind != "int":
            raise ln.error(f"expected an integer in the list, found {t.text!r}", t)
        items.append(_int(ln, t))
        t = ln.next("',' or ']'")
        if t.text == "]":
            return items
        if t.text != ",":
            raise ln.error(f"expected ',' or ']' in the list, found {t.text!r}", t)


def _parse_numbers(ln: _Line) -> list:
    """``[x, y, ...]``: finite numbers (integers or floats), as floats."""
    ln.expect("[")
    items = []
    while True:
        t = ln.next("a number")
        if t.kind not in ("int", "float") or not np.isfinite(float(t.text)):
            raise ln.error(f"expected a finite number in the list, found {t.text!r}", t)
        items.append(float(t.text))
        t = ln.next("',' or ']'")
        if t.text == "]":
            return items
        if t.text != ",":
            raise ln.error(f"expected ',' or ']' in the list, found {t.text!r}", t)


def parse(text: str, file: str = "<script>") -> Graph:
    """Parse a HamKaas script into a ``Graph`` (shapes inferred and checked);
    errors name ``file`` (default ``<script>``), line and column."""
    try:
        g = _parse(text)
    except GraphError as e:
        raise refile(e, file) from None
    g.file = file
    return g


def refile(e: GraphError, file: str) -> GraphError:
    """``e`` naming ``file`` instead of ``<script>``."""
    if e.line is None or e.file == file:
        return e
    src = e.source if hasattr(e, "source") else None
    return GraphError(e.raw_message, e.line, e.column, src, file, e.hint)


def _parse(text: str) -> Graph:
    defined: dict[str, Node] = {}
    nodes: list[Node] = []
    g = Graph([], None, text=text)  # type: ignore[arg-type]
    lines = text.splitlines()
    result = None
    for lineno, source in enumerate(lines, 1):
        toks = _tokens(source, lineno)
        if not toks:
            continue
        ln = _Line(toks, lineno, source)
        if result is not None:
            raise ln.error("a statement after the result line",
                           hint="`result = $N;` is the script's last statement")
        head = ln.next("a statement")
        if head.kind == "ident" and head.text == "result":
            ln.expect("=")
            t = ln.next("a node reference $N")
            if t.kind != "ref":
                raise ln.error(f"the result must be a node reference $N, not {t.text!r}", t)
            if t.text not in defined:
                raise ln.error(f"{t.text} is not defined", t)
            ln.end()
            result = defined[t.text]
            continue
        if head.kind != "ref":
            raise ln.error(f"a statement starts with $N or `result`, not {head.text!r}", head)
        if head.text in defined:
            first = defined[head.text].where[0]
            raise ln.error(f"{head.text} is defined twice (first on line {first})", head)
        ln.expect("=")
        name_tok = ln.next("a node name")
        sig = signature(name_tok.text) if name_tok.kind == "ident" else None
        if sig is None:
            known = ", ".join(list(LEAF_SIGNATURES) + [n.graph for n in all_nodes()
                                                      if n.graph])
            raise ln.error(f"unknown node {name_tok.text!r}", name_tok, hint=f"nodes: {known}")
        op = name_tok.text
        ln.expect("(")
        args, cols, options = [], [], {}
        while ln.peek() is not None and ln.peek().text != ")":
            if args or options:
                ln.expect(",", "',' or ')'")
            t = ln.peek()
            if t is None:
                break
            if _at_keyword(ln):
                name, word = _keyword(ln, op, options)
                options[name] = word
                continue
            if options:
                raise ln.error(f"an argument of {op} after its keyword options", t,
                               hint="keyword options (name=word) come last")
            if len(args) >= len(sig):
                raise ln.error(f"{op} takes {len(sig)} argument(s); this one is extra", t)
            kind = sig[len(args)]
            cols.append(t.col)
            args.append(_argument(ln, op, kind, len(args), defined))
        ln.expect(")", "',' or ')'")
        if len(args) < _required(sig):
            raise ln.error(f"{op} takes {_required(sig)} argument(s), got {len(args)}: missing "
                           f"{_kind_text(sig[len(args)])}", ln.toks[ln.i - 1])
        ln.end()
        if op in LATER:
            raise ln.error(f"{op} is not implemented yet in gpudsl.graph", name_tok)
        where = (lineno, name_tok.col, source, cols)
        node = _build(op, args, where, g, ln, options)
        defined[head.text] = node
        nodes.append(node)
    if result is None:
        last = len(lines) + 1
        raise GraphError("the script has no result line", last, 1, "",
                         hint="end the script with `result = $N;`")
    g.nodes = _reachable(nodes, result)
    g.result = result
    return g


def _at_keyword(ln: _Line) -> bool:
    """Whether the next tokens are ``name =`` (a keyword option)."""
    t, after = ln.peek(), ln.toks[ln.i + 1] if ln.i + 1 < len(ln.toks) else None
    return t.kind == "ident" and after is not None and after.text == "="


def keyword_options(op: str) -> dict:
    """``{name: words}`` of node ``op``'s keyword options (the first word the default)."""
    decl = by_graph(op) if op not in LEAF_SIGNATURES else None
    return dict(decl.keywords) if decl is not None else {}


def options_text(op: str) -> str:
    """The keyword options of node ``op`` as a hint (``precision=fp32|tf32``)."""
    opts = keyword_options(op)
    return ", ".join(f"{k}={'|'.join(w)}" for k, w in opts.items()) or "none"


def _keyword(ln: _Line, op, given: dict) -> tuple:
    """``name=word``: ``(name, word)``, None for the default word (no attribute)."""
    opts = keyword_options(op)
    name = ln.next("an option name")
    if not opts:
        raise ln.error(f"{op} takes no keyword options", name)
    if name.text not in opts:
        raise ln.error(f"{op} has no option {name.text!r}", name,
                       hint=f"{op}'s keyword options: {options_text(op)}")
    if name.text in given:
        raise ln.error(f"the option {name.text} is given twice", name)
    ln.expect("=")
    word = ln.next(f"one of {', '.join(opts[name.text])}")
    if word.kind != "ident" or word.text not in opts[name.text]:
        raise ln.error(f"{name.text} of {op} is one of {', '.join(opts[name.text])}, "
                       f"not {word.text!r}", word)
    return name.text, word.text


def _argument(ln: _Line, op, kind, index, defined):
    t = ln.peek()
    if kind.startswith("floats"):
        if t.text != "[":
            raise ln.error(f"argument {index + 1} of {op} must be {_kind_text(kind)}, "
                           f"not {t.text!r}", t)
        return _parse_numbers(ln)
    if kind == "list":
        if t.text != "[":
            raise ln.error(f"argument {index + 1} of {op} must be {_kind_text(kind)}, "
                           f"not {t.text!r}", t)
        return _parse_list(ln)
    ln.i += 1
    if t.kind == "ref" and "ref" in kind:
        if t.text not in defined:
            raise ln.error(f"{t.text} is not defined before this line", t,
                           hint="nodes are listed in topological order: define a node "
                                "before its first use")
        return defined[t.text]
    if t.kind == "int" and ("int" in kind or kind == "bool"):
        return _int(ln, t)
    if t.kind == "int" and kind == "float?" and int(t.text) == 0:
        return None  # an absent option before a given one (as to_script writes it)
    if t.kind in ("int", "float") and kind.startswith("float"):
        value = float(t.text)
        if not np.isfinite(value):
            raise ln.error(f"the number {t.text} is not finite", t)
        return value
    if t.kind == "ident" and kind == "name":
        return t.text
    if t.kind == "ident" and kind == "dtype":
        if t.text not in DTYPES:
            raise ln.error(f"unknown dtype {t.text!r}; graphs hold float32, float16, "
                           "bfloat16 or int64", t)
        return t.text
    raise ln.error(f"argument {index + 1} of {op} must be {_kind_text(kind)}, not "
                   f"{t.text!r}", t)


def _build(op, args, where, g: Graph, ln: _Line, options: dict) -> Node:
    line, col, source, cols = where
    if op in ("InputTensor", "ConstantTensor"):
        name, dtype, shape = args
        table = g.inputs if op == "InputTensor" else g.constants
        other = g.constants if op == "InputTensor" else g.inputs
        if name in table or name in other:
            first = (table.get(name) or other.get(name)).where[0]
            raise GraphError(f"the tensor name {name!r} is declared twice (first on line "
                             f"{first})", line, cols[0], source)
        node = Node(op, (), dict(name=name, dtype=dtype, shape=tuple(shape)),
                    (line, col, source, cols[2:]))
        table[name] = node
        return node
    if op == "BufferTensor":
        node = Node(op, (), dict(dtype=args[0], shape=tuple(args[1])),
                    (line, col, source, cols[1:]))
        g.buffers.append(node)
        return node
    inputs, attrs = [], {}
    for (kind, name), v in zip(by_graph(op).script, args):
        if v is None:  # an absent option
            continue
        if isinstance(v, Node):
            inputs.append(v)
        elif kind == "bool":
            attrs[name] = bool(v) if v in (0, 1) else v
        else:
            attrs[name] = tuple(v) if isinstance(v, list) else v
    defaults = {k: words[0] for k, words in keyword_options(op).items()}
    attrs.update((k, w) for k, w in options.items() if w != defaults[k])
    return Node(op, tuple(inputs), attrs, where)


def _reachable(nodes: list[Node], result: Node) -> list[Node]:
    """The nodes the result depends on, in the script's order (others are dropped)."""
    keep, stack = set(), [result]
    while stack:
        n = stack.pop()
        if id(n) in keep:
            continue
        keep.add(id(n))
        stack.extend(n.inputs)
    return [n for n in nodes if id(n) in keep]


# ------------------------------------------------------------------ to_script


class Script(NamedTuple):
    """A graph as HamKaas script text and the constants it names."""

    script: str
    constants: dict[str, np.ndarray]


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _script_args(n: Node, ref) -> list[str]:
    """The script arguments of computing node ``n``, by its declaration."""
    out, inputs = [], iter(n.inputs)
    script, options = by_graph(n.op).script, keyword_options(n.op)
    unwritable = set(n.attrs) - {name for _, name in script} - set(options)
    if unwritable:  # dropping them would change the meaning
        raise GraphError(f"{n.op} with {', '.join(sorted(unwritable))} has no script form "
                         "(the script language writes only its declared arguments)")
    given = [i for i, (kind, name) in enumerate(script)
             if not kind.endswith("?") or name in n.attrs]
    for kind, name in script[:given[-1] + 1 if given else 0]:  # (absent trailing options)
        if kind.endswith("?") and name not in n.attrs:
            out.append("0")  # an absent option before a given one: its "none"
            continue
        if kind == "ref" or (kind == "ref|int" and name not in n.attrs):
            out.append(ref(next(inputs)))
        elif kind == "list":
            out.append(_shape_text(n.attrs[name]))
        elif kind.startswith("floats"):
            out.append("[" + ", ".join(repr(float(x)) for x in n.attrs[name]) + "]")
        elif kind.startswith("float"):
            out.append(repr(float(n.attrs[name])))
        else:  # int, bool, ref|int given as an integer
            out.append(str(int(n.attrs[name])))
    return out + [f"{k}={n.attrs[k]}" for k, words in options.items()
                  if n.attrs.get(k, words[0]) != words[0]]


def to_script(node: Node | Graph) -> Script:
    """The script of the graph ending in ``node`` (a node used twice is emitted once;
    a parsed ``Graph``: its result) and its constants' values by name (unnamed ones
    become ``constant_0``, ``constant_1``...; a parsed constant has no value and is
    left out: ``graph.compile`` takes it by name)."""
    if isinstance(node, Graph):
        node = node.result
    if not isinstance(node, Node):
        raise GraphError(f"to_script takes a graph node, not {type(node).__name__}")
    order: list[Node] = []
    seen: set[int] = set()
    stack = [(node, False)]
    while stack:  # iterative post-order: deep graphs do not hit the recursion limit
        n, done = stack.pop()
        if done:
            if id(n) not in seen:
                seen.add(id(n))
                order.append(n)
            continue
        if id(n) in seen:
            continue
        stack.append((n, True))
        stack.extend((i, False) for i in reversed(n.inputs))
    index = {id(n): i for i, n in enumerate(order, 1)}
    constants: dict[str, np.ndarray] = {}
    names: dict[str, int] = {}
    for n in order:  # named tensors first, so that generated names avoid them
        name = n.attrs.get("name")
        if n.op in ("InputTensor", "ConstantTensor") and name is not None:
            if name in names and names[name] != id(n):
                raise GraphError(f"two different tensors are named {name!r}")
            names[name] = id(n)
    counter = 0
    lines = []
    for n in order:
        ref = lambda m: f"${index[id(m)]}"  # noqa: E731
        if n.op == "InputTensor":
            expr = f"InputTensor({n.attrs['name']}, {n.dtype}, {_shape_text(n.shape)})"
        elif n.op == "ConstantTensor":
            name = n.attrs.get("name")
            if name is None:
                while f"constant_{counter}" in names:
                    counter += 1
                name = f"constant_{counter}"
                names[name] = id(n)
            if hasattr(n, "value"):   # built from an array, not parsed
                constants[name] = n.value
            expr = f"ConstantTensor({name}, {n.dtype}, {_shape_text(n.shape)})"
        elif n.op == "BufferTensor":
            expr = f"BufferTensor({n.dtype}, {_shape_text(n.shape)})"
        else:
            expr = f"{n.op}({', '.join(_script_args(n, ref))})"
        lines.append(f"${index[id(n)]} = {expr};")
    lines.append(f"result = ${index[id(node)]};")
    return Script("\n".join(lines) + "\n", constants)
