"""The fast path of ``gpudsl.ops``: per op and operand signature, what the first call
decided (which kernel, how the operands are swapped, viewed and made contiguous, the
result's shape and dtype) kept as a *recipe*, so that a later call with the same
signature skips the checks and the planning and only allocates the result and calls
the kernel (whose own fast path, ``compiler/fast_call.py``, then applies).

An operand's signature is ``fast_call.describe``'s: type, shape, strides, dtype,
writability (numpy) or device, layout and gradient mode (PyTorch); a scalar operand or
an unknown array type is never cached.  The key also holds the op, the target and
every attribute (the key's ``backend``: where the op runs); a recipe is dropped when the tuning database changes (the kernel
choice is its winner) and when a node is registered or removed (``nodes.register``).
The first call of a signature runs the recipe it builds (so a replay does what that
call did) and keeps it only when the call succeeded.
"""
from __future__ import annotations

import sys

import numpy as np

from ..compiler.fast_call import Miss, describe
from ..compiler.compiled_kernel import _print
from .halves import common_dtype
from .node_table import get, plan
from .op_arguments import _is_device as is_device
from .op_arguments import torch_dtype
from .node_registry import db_stamp
from .shapes import require

_ND = np.ndarray
_RECIPES: dict = {}
MAX_RECIPES = 1024


def key_of(name: str, backend: str, operands: tuple):
    """The key of a call of op ``name`` on ``operands`` (positional, no keyword), or
    None when it cannot be cached (an operand of a type the key does not describe)."""
    if len(operands) == 1:
        key = (name, backend, describe(operands[0]))
    else:
        key = (name, backend, *map(describe, operands))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def lookup(name: str, backend: str, operands: tuple):
    """The recipe of a call of op ``name`` on ``operands``: a function of them, or None
    (none yet, the tuning database changed since, or not cacheable)."""
    n = len(operands)
    if n == 1:  # describe(), inline for the common cases
        (x,) = operands
        key = (name, backend, (_ND, x.shape, x.strides, x.dtype, x.flags.writeable)
               if type(x) is _ND else describe(x))
    elif n == 2 and type(operands[0]) is _ND and type(operands[1]) is _ND:
        x, y = operands
        key = (name, backend, (_ND, x.shape, x.strides, x.dtype, x.flags.writeable),
               (_ND, y.shape, y.strides, y.dtype, y.flags.writeable))
    else:
        key = (name, backend, *map(describe, operands))
    try:
        hit = _RECIPES.get(key)
    except TypeError:
        return None
    if hit is None or hit[0] != db_stamp():
        return None
    return hit[1]


def remember(key, stamp, fn) -> None:
    """Keep ``fn`` as the recipe of ``key``; ``stamp``: the tuning database's version
    that the kernel choice was read at."""
    if len(_RECIPES) >= MAX_RECIPES:
        _RECIPES.clear()
    _RECIPES[key] = (stamp, fn)


def forget() -> None:
    _RECIPES.clear()


# ----------------------------------------------------------------- recipes


def _ops():
    """``gpudsl.stdlib.array_ops``, whose helpers (``_run``, ``_empty``, ``_contig``) a recipe
    calls through the module at each call, as the ops themselves do."""
    return sys.modules["gpudsl.stdlib.array_ops"]


def _attrs(dt: str) -> dict:
    """The node's attributes for operands of precision ``dt``: the table's kernel
    choice reads ``dtype`` (float32: none, as the graph gives)."""
    return {} if dt == "f32" else {"dtype": dt}


def binary_recipe(op: str, a, b, sa: tuple, sb: tuple):
    """``run(a, b)``: ``a op b`` for arrays like ``a`` and ``b`` (checked tensors of
    shapes ``sa``, ``sb``: dtypes, layouts), the decisions and the plan made once;
    every precision through the node table's kernel choice."""
    lift_a = (1,) * (len(sb) - len(sa)) + sa if len(sa) < len(sb) else None
    lift_b = (1,) * (len(sa) - len(sb)) + sb if len(sb) < len(sa) else None
    sa, sb = lift_a or sa, lift_b or sb  # numpy's rule: the lower rank gets leading 1s
    dt = common_dtype(op, a=a, b=b)
    swap = len(sa) == len(sb) and sa != sb and all(x in (1, y) for x, y in zip(sa, sb))
    if swap:  # a broadcasts against b: swapped when they commute
        require(get(op).commutes, f"a {list(sa)} broadcasts onto b {list(sb)}; {op} "
                "broadcasts its second operand onto its first only")
        sa, sb = sb, sa
    views = _operands(lift_a, lift_b, swap, False, False)(a, b)  # what _contig is given
    copy_a, copy_b = (not contiguous(x) for x in views)
    operands = None
    if lift_a or lift_b or swap or copy_a or copy_b:
        operands = _operands(lift_a, lift_b, swap, copy_a, copy_b)
        a, b = operands(a, b)
    execute = executor(plan(get(op), (sa, sb), _attrs(dt), _ops().backend()), (a, b), a)
    if operands is None:
        return execute
    return lambda a, b: execute(*operands(a, b))


def matmul_recipe(a, b, sa: tuple, sb: tuple):
    """``run(a, b)``: ``ops.matmul(a, b)`` of float32 arrays like ``a`` and ``b``
    (checked: shapes ``sa``, ``sb``) through the node table's kernel choice (the tuning
    database's winner, else the defaults), planned once."""
    copy_a, copy_b = not contiguous(a), not contiguous(b)
    operands = _operands(None, None, False, copy_a, copy_b) if copy_a or copy_b else None
    if operands is not None:
        a, b = operands(a, b)
    execute = executor(plan(get("matmul"), (sa, sb), {}, _ops().backend()), (a, b), a)
    if operands is None:
        return execute
    return lambda a, b: execute(*operands(a, b))


def _operands(lift_a, lift_b, swap: bool, copy_a: bool, copy_b: bool):
    """``a, b`` as the kernel takes them: lifted to the common rank, swapped, made
    contiguous, as the first call decided."""
    def operands(a, b):
        if lift_a is not None:
            a = a.reshape(lift_a)
        if lift_b is not None:
            b = b.reshape(lift_b)
        if swap:
            a, b = b, a
        contig = _ops()._contig
        return (contig(a) if copy_a else a), (contig(b) if copy_b else b)
    return operands


def unary_recipe(op: str, x, shape: tuple, dt: str):
    """``run(x)``: ``op(x)`` for arrays like ``x`` (shape, dtype, layout), planned once,
    every precision through the node table's kernel choice."""
    copy = not contiguous(x)
    execute = executor(plan(get(op), (shape,), _attrs(dt), _ops().backend()), (x,), x)
    if not copy:
        return execute
    return lambda x: execute(_ops()._contig(x))


def executor(launch, operands: tuple, like):
    """``execute(*operands)`` -> the result: the node table's ``launch`` run on
    operands of these shapes and kinds (the ops' ``_execute``, the result allocated
    like the first operand: its kind and dtype), which operands need reshaping and how
    the result is allocated decided once."""
    ins, outs, values, flags = [], [], {}, False
    for param, spec in launch.args:
        kind = spec[0]
        if kind == "in" or kind == "index":
            shape = None if kind == "index" or spec[2] is None else tuple(spec[2])
            same = shape is None or tuple(operands[spec[1]].shape) == shape
            ins.append((param, spec[1], None if same else shape))
        elif kind == "out":
            outs.append((param, spec[1]))
        elif kind == "value":
            values[param] = spec[1]
        else:
            flags = True
    if flags or launch.out is None or launch.before:  # a fault flag, in place, two steps
        return lambda *operands: _ops()._execute(launch, operands, operands[0])[0]
    ops_mod, out_shape, proc = _ops(), tuple(launch.out), launch.proc
    numpy_out = type(like) is np.ndarray
    dtype = ops_mod._dtype_like(like)   # _launch's result dtype
    alloc = allocator(like, dtype)
    names = [p.name for p in proc.ir.params]
    template = [values.get(n) for n in names]   # the call's arguments, in parameter order
    plain_ins = tuple((names.index(p), i) for p, i, shape in ins if shape is None)
    shaped_ins = tuple((names.index(p), i, shape) for p, i, shape in ins if shape is not None)
    out_at = tuple((names.index(p), shape) for p, shape in outs)
    own_run = ops_mod._OWN_RUN
    kernel = []   # the compiled kernel and its fast-path entry, found at the first call

    def execute(*operands):
        out = np.empty(out_shape, dtype) if numpy_out else alloc(operands[0], out_shape)
        args = template.copy()
        for at, i in plain_ins:
            args[at] = operands[i]
        for at, i, shape in shaped_ins:
            args[at] = operands[i].reshape(shape)
        for at, shape in out_at:
            args[at] = out if shape is None else out.reshape(shape)
        if ops_mod._run is not own_run:   # replaced (instrumented): called by name
            ops_mod._run(proc, **{n: v for n, v in zip(names, args) if v is not None})
        elif len(kernel) == 2:
            _enter(kernel, args)
        else:   # the kernel of the recipe's backend (part of its key), kept
            k = ops_mod._kernel(proc)
            k(*args)
            kernel[:] = [k, *_entry_of(k, args)]
        return out
    return execute


def _entry_of(k, args: list) -> list:
    """``[entry]``: the fast-path entry kernel ``k`` kept for a call of ``args`` (one
    whose signature every later call of the recipe shares: operands of the recipe's
    signature, viewed the same way, and a new result of one shape and dtype), or ``[]``
    when it kept none (that call then goes through ``k`` each time)."""
    key, _ = k._key(tuple(args), {})
    hit = k._fast.get(key) if key is not None and k.trace is None else None
    return [] if hit is None else [hit[0]]


def _enter(kernel: list, args: list) -> None:
    """Run the kept entry on ``args``; a call it cannot take (:class:`Miss`: e.g. a
    written operand overlapping another) goes through the kernel: its full path judges."""
    try:
        printed = kernel[1](args)
    except Miss:
        kernel[0](*args)
    else:
        if printed:
            _print(printed)


def allocator(like, dtype=np.float32):
    """``alloc(like, shape)``: the ops' ``_empty`` for arrays of ``like``'s kind."""
    if type(like) is np.ndarray:
        dtype = np.dtype(dtype)
        return lambda like, shape: np.empty(shape, dtype)
    if hasattr(like, "new_empty") and is_device(like):   # torch CUDA: its dtype found once
        tdt = torch_dtype(dtype)
        return lambda like, shape: like.new_empty(shape, dtype=tdt)
    return lambda like, shape: _ops()._empty(like, shape, dtype)


def contiguous(x) -> bool:
    """Whether the ops' ``_contig`` returns ``x`` itself, for every array of ``x``'s
    signature: a C-contiguous numpy array (not a subclass: ``_contig`` makes it an
    ``ndarray``) or CUDA tensor.  False for other kinds: the recipe calls ``_contig``
    on them each time, as the ops do."""
    if type(x) is np.ndarray:
        return bool(x.flags.c_contiguous)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor) and x.is_cuda:
        return bool(x.is_contiguous())
    return False


__all__ = ["key_of", "lookup", "remember", "forget", "binary_recipe", "unary_recipe",
           "executor", "allocator", "contiguous"]
