"""The user-facing proc object and the ``@proc`` / ``@instr`` decorators.

A ``Proc`` is an immutable value wrapping a ``gpudsl.ir.ProcDef``.
Its methods are thin doors into the rest of the package: checking, code
generation, compiling, interpreting and cursors for scheduling.
"""
from __future__ import annotations

from .ir.nodes import ProcDef
from .ir.printer import print_proc


class Proc:
    """A gpudsl procedure: an immutable value made by ``@proc`` (or by a scheduling
    primitive from another proc).

    ``print(p)`` shows it as gpudsl source (a notebook shows it highlighted);
    ``p.check()`` proves it safe; ``p.interpret(...)`` runs its reference meaning on
    numpy arrays; ``p.cuda_source()`` is its CUDA C; ``p.compile(backend)`` proves and
    compiles it into a callable ``Kernel``; ``p.find_loop``,
    ``p.find``, ``p.find_alloc`` give cursors for ``gpudsl.schedule``.  Two procs
    are equal when their code is (source locations aside).
    """

    __slots__ = ("_ir", "_origin", "_hash")

    def __init__(self, ir: ProcDef, origin=None):
        self._ir = ir
        self._hash = None
        # Cursor forwarding: (previous proc, forwarding function) or None.
        self._origin = origin

    # ---------------------------------------------------------------- value

    @property
    def ir(self) -> ProcDef:
        return self._ir

    def _derive(self, ir: ProcDef, forward) -> "Proc":
        """The proc a scheduling primitive makes from this one: ``ir``, with cursors
        of this proc forwarded into it by ``forward`` (see gpudsl.schedule.cursors).
        Primitives build their results through this, so that the layers below
        ``Proc`` never import it."""
        return Proc(ir, (self, forward))

    @property
    def name(self) -> str:
        return self._ir.name

    @property
    def is_instr(self) -> bool:
        return self._ir.instr is not None

    def __eq__(self, other):
        if not isinstance(other, Proc):
            return NotImplemented
        return self._ir == other._ir

    def __getstate__(self):
        # the cached hash stays behind: string hashes differ between processes
        return (self._ir, self._origin)

    def __setstate__(self, state):
        self._ir, self._origin = state
        self._hash = None

    def __hash__(self):
        # the IR is immutable and hashing it walks every node: once per proc (ops and
        # the kernel caches look a proc up on every call)
        h = self._hash
        if h is None:
            h = self._hash = hash(self._ir)
        return h

    def __str__(self):
        return print_proc(self._ir)

    def __repr__(self):
        return f"<gpudsl proc {self.name}>"

    def _repr_markdown_(self):
        return "```python\n" + str(self) + "```"

    def _repr_html_(self):
        """A notebook's display: the proc's source, highlighted."""
        from .display import proc_html

        return proc_html(self.name, str(self))

    def __call__(self, *args, **kwargs):
        raise TypeError(f"proc {self.name} cannot be called from Python directly; use "
                        f"gpudsl.interpret({self.name}, ...) or {self.name}.compile(...)(...)")

    # ---------------------------------------------------------------- doors

    def check(self, /, **bindings):
        """Prove the proc free of races, divergence and out-of-bounds accesses."""
        from .analysis import check

        return check(self, **bindings)

    def interpret(self, /, **args):
        """Run the reference (sequential) meaning on numpy arrays, in place; with
        ``detect_races=True`` (``_detect_races=True`` when the proc has a parameter named
        ``detect_races``) the dynamic race detector watches the threads."""
        from .interpreter import interpret

        return interpret(self, **args)

    def cuda_source(self, **bindings) -> str:
        """The CUDA C translation unit of this proc: one ``__global__`` function per
        kernel launch, ``#line`` directives pointing at the Python source; sizes given
        in ``bindings`` become constants, the others kernel parameters."""
        from .codegen import cuda_source

        return cuda_source(self, **bindings)

    def perf(self, device: str = "H100", **bindings):
        """The performance report (docs/performance.md), without a GPU: per access, the sectors a
        warp request touches against the minimum and the bank-conflict degree of
        shared accesses; per kernel, ptxas' registers / shared / spills, occupancy on
        ``device`` (``"H100"``, ``"H200"``, ``"A100"``), bytes, FLOPs and the roofline
        bound.  Every size is bound in ``bindings`` (``p.perf(n=4096)``)."""
        from .perf import perf

        return perf(self, device, **bindings)

    def compile(self, backend: str | None = None, check: bool = True,
                trace: dict | None = None, target=None, **bindings):
        """Prove the proc, generate CUDA C and compile it into a callable ``Kernel``.

        The ``backend`` is how the code runs: ``"cuda"`` (the default; NVRTC, compiling
        needs no GPU, running does) or ``"emulator"`` (g++ and gpudsl's CUDA emulation
        header, any CPU).  The ``target`` is the architecture the proc is proved and
        generated for (``"sm_80"``, a ``gpudsl.targets.Target``); by default the
        backend's: the GPU's own (``sm_90`` without one), the emulator's
        ``targets.EMULATED_TARGET``.  (``target="emulator"``, a backend, is the old
        spelling of ``backend="emulator"``: it works, with a ``DeprecationWarning``.)
        ``bindings`` fix sizes at compile time (``n=4096``); the others are inferred
        from the arrays at each call.  The proof (``check(**bindings, target=...)``,
        cached per proc, bindings and target) comes first: an unproved proc raises
        ``gpudsl.CheckError`` with the report.  ``check=False`` skips it
        (``kernel.proved`` is then False).

        ``trace=dict(block=(0, 0), thread=(3, 0))`` builds a kernel that prints, from
        that one thread only (CUDA indices, x first), each assignment it executes (source
        line, indices, value) on Python's stdout, on the GPU and on the emulator alike;
        ``kernel.trace_output`` keeps the text of the last call.

        Example:
            ```python
            k = saxpy.compile("emulator")
            k(a=2.0, x=x, y=y)          # sizes from x and y; y written in place
            ```
        """
        from .compiler import compile_proc

        return compile_proc(self, backend, check=check, trace=trace, target=target,
                            **bindings)

    # cursors (see gpudsl.schedule.cursors)
    def find_loop(self, pattern, many: bool = False):
        """A cursor to the loop named by ``pattern`` (``"i"``, ``"i #2"`` for the
        second loop over ``i``); ``many=True`` gives all matches.  Raises
        ``gpudsl.SchedulingError`` when none matches."""
        from .schedule.cursors import find_loop

        return find_loop(self, pattern, many=many)

    def find(self, pattern, many: bool = False):
        """A cursor to the statement or expression ``pattern`` (gpudsl source, ``_``
        for a hole: ``"y[_] = _"``, ``"x[i] * 2"``); ``many=True`` gives all."""
        from .schedule.cursors import find

        return find(self, pattern, many=many)

    def find_alloc(self, pattern, many: bool = False):
        """A cursor to the allocation of the buffer named by ``pattern``."""
        from .schedule.cursors import find_alloc

        return find_alloc(self, pattern, many=many)

    def forward(self, cursor):
        """A cursor of an earlier proc of this one's scheduling chain, moved here."""
        from .schedule.cursors import forward

        return forward(self, cursor)

    def body(self):
        """A cursor to the whole body (a block)."""
        from .schedule.cursors import body

        return body(self)


def _not_a_function(func, what: str):
    """The ProcError for ``@proc``/``@instr`` applied to something that is not a function:
    at the object's definition when it has one (a class), else at the call."""
    import inspect
    import sys

    from .errors import ProcError, SrcLoc

    loc = None
    try:
        lines, first = inspect.getsourcelines(func)
        loc = SrcLoc(inspect.getsourcefile(func) or inspect.getfile(func), max(first, 1), 0)
    except (OSError, TypeError):
        f = sys._getframe(2)
        loc = SrcLoc(f.f_code.co_filename, f.f_lineno, 0)
    kind = "a class" if inspect.isclass(func) else f"{type(func).__name__} {func!r:.40}"
    return ProcError(f"{what} applies to a function (def ...), not to {kind}", loc,
                     f"write {what} on the line before a def")


def proc(func) -> Proc:
    """Decorator: parse a Python function as a gpudsl proc."""
    import inspect

    from .frontend import parse_function

    if not inspect.isfunction(func):
        raise _not_a_function(func, "@proc")
    return Proc(parse_function(func, enclosing=_enclosing(2)))


def _enclosing(depth: int) -> dict | None:
    """The local variables of the function ``depth`` frames up (the one whose body
    applies the decorator: a proc factory), None at module level."""
    import sys

    f = sys._getframe(depth)
    if f.f_code.co_name == "<module>" or f.f_locals is f.f_globals:
        return None
    return dict(f.f_locals)


def instr(template: str):
    """Decorator: an instruction whose body gives its meaning to the interpreter
    and the checker, and whose CUDA C ``template`` (``{arg}`` holes) code
    generation emits."""
    if not isinstance(template, str):
        raise TypeError("use @instr(\"CUDA C template\")")

    def deco(func) -> Proc:
        import inspect

        from .frontend import parse_function

        if not inspect.isfunction(func):
            raise _not_a_function(func, "@instr")
        return Proc(parse_function(func, instr=template, enclosing=_enclosing(2)))

    return deco


def proc_from_source(text: str, namespace: dict | None = None, file: str = "<string>",
                     first_line: int = 1) -> Proc:
    """Parse a proc from source text, resolving callees in ``namespace``.  A pseudo-file
    name (``file="<...>"``) holds the text for error messages (the latest text given that
    name); the default, ``"<string>"``, holds the first text given no name, and each
    other such text is named ``"<string#DIGEST>"``, so that each proc's messages quote
    its own lines."""
    import linecache

    from .frontend import parse_source_text

    if file == "<string>":
        file = hold_source(file, text)
    elif file.startswith("<"):
        linecache.cache[file] = (len(text), None, text.splitlines(True), file)
    instr_t = _instr_template(text)
    return Proc(parse_source_text(text, file, first_line, namespace or {}, instr_t))


def hold_source(file: str, text: str) -> str:
    """Keep ``text`` in ``linecache`` under the pseudo-file name ``file`` (``"<...>"``),
    or, when that name holds another text, under ``file`` with the text's digest (the
    same text always gets the same name); returns the name used."""
    import hashlib
    import linecache

    lines = text.splitlines(True)
    held = linecache.cache.get(file)
    if held is not None and len(held) == 4 and held[2] != lines:
        stem = file[:-1] if file.endswith(">") else file
        file = f"{stem}#{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}>"
    linecache.cache[file] = (len(text), None, lines, file)
    return file


def _instr_template(text: str) -> str | None:
    """The template of an ``@instr("...")`` decorator on the first function in
    ``text`` (so that printed instrs parse back as instrs), else None."""
    import ast
    import textwrap

    try:
        module = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the parser reports it with a location
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", getattr(
                        d.func, "attr", None)) == "instr" and d.args and isinstance(
                        d.args[0], ast.Constant) and isinstance(d.args[0].value, str):
                    return d.args[0].value
            return None
    return None
