"""``gpudsl.torch.op``: register a proc or Kernel as a torch operator;
``gpudsl.torch.backward``: its gradient, through ``torch.library.register_autograd``."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import torch

from ..errors import Error
from ..ir.procdef import as_procdef
from .custom import Signature, output_dtypes, output_shapes, signature

_SPECS: dict = {}  # "ns::name" -> Signature (of the ops registered here)
_KERNELS: dict = {}  # (id(proc), target) -> (proc, Kernel)
_LOCK = threading.Lock()


def op(name: str, proc=None, *, outputs=None, mutates=()):
    """Register ``proc`` (a ``@proc`` or a compiled ``Kernel``) as the torch operator
    ``name`` (``"namespace::op"``, as ``torch.library.custom_op`` names them) and return
    it (a ``torch.library.CustomOpDef``: call it, or ``torch.ops.namespace.op``).

    The proc's parameters become the operator's (``gpudsl.torch.custom``): read-only
    tensors are arguments, tensors it writes and reads (or named in ``mutates``) are
    mutated arguments, tensors it only writes (or named in ``outputs``) are returned,
    allocated zeroed; sizes come from the inputs' shapes.  CPU tensors run on the
    emulator, CUDA tensors on the GPU on torch's current stream; a ``@proc`` is
    compiled once per target (a ``Kernel`` is used on its own target, recompiled with
    its bindings for the other).  The fake implementation derives the outputs' shapes
    from the proc's, so ``torch.compile(fullgraph=True)`` traces the operator.

    Used as a decorator when ``proc`` is omitted: ``@gpudsl.torch.op("mylib::f")``
    above ``@proc``."""
    if proc is None:
        return lambda p: op(name, p, outputs=outputs, mutates=mutates)
    if not isinstance(name, str) or name.count("::") != 1:
        raise Error(f"a torch operator's name is 'namespace::name', not {name!r}")
    sig = signature(proc, outputs, tuple(mutates))
    impl = _implementation(sig)
    custom = torch.library.custom_op(name, impl, mutates_args=sig.mutated,
                                     schema=sig.schema())
    custom.register_fake(_fake(sig))
    _SPECS[name] = sig
    return custom


def _arguments(sig: Signature, args: tuple) -> dict:
    return {n: a for (n, _, _), a in zip(sig.args, args)}


def _outputs(sig: Signature, given: dict, alloc) -> dict:
    """The proc's written-only tensors, made by ``alloc`` (``torch.zeros`` for a run,
    ``torch.empty`` for the fake) on the inputs' device, shaped by the proc."""
    device = _device(given)
    shapes, dtypes = output_shapes(sig, given), output_dtypes(sig)
    return {n: alloc(shapes[n], dtype=dtypes[n], device=device) for n in sig.outputs}


def _implementation(sig: Signature):
    def impl(*args):
        given = _arguments(sig, args)
        outs = _outputs(sig, given, torch.zeros)
        mutated = set(sig.mutated)  # written in place: passed as they are
        call = {n: (v if n in mutated else v.detach().contiguous())
                if isinstance(v, torch.Tensor) else v for n, v in given.items()}
        device = _device(given)
        _kernel(sig.proc, "cuda" if device.type == "cuda" else "emulator")(**call, **outs)
        return _result(sig, outs)
    return impl


def _device(given: dict):
    tensors = [v for v in given.values() if isinstance(v, torch.Tensor)]
    return tensors[0].device if tensors else torch.device("cpu")


def _fake(sig: Signature):
    def fake(*args):
        return _result(sig, _outputs(sig, _arguments(sig, args), torch.empty))
    return fake


def _result(sig: Signature, outs: dict):
    if not sig.outputs:
        return None
    if len(sig.outputs) == 1:
        return outs[sig.outputs[0]]
    return tuple(outs[n] for n in sig.outputs)


def _kernel(proc, target: str):
    """``proc``'s kernel for ``target``: a Kernel of that target as it is, else
    compiled once (a Kernel's bindings kept)."""
    if getattr(proc, "target", None) == target:
        return proc
    key = (id(proc), target)
    hit = _KERNELS.get(key)
    if hit is None or hit[0] is not proc:
        with _LOCK:
            source = getattr(proc, "proc", proc)
            kernel = source.compile(target, **(getattr(proc, "bindings", None) or {}))
            hit = _KERNELS[key] = (proc, kernel)
    return hit[1]


def backward(custom, setup=None):
    """Decorator: the gradient of operator ``custom`` (returned by ``op``, or any
    functional ``CustomOpDef``), registered with ``torch.library.register_autograd``.

    The decorated function is called as ``fn(ctx, *grads)``: ``grads`` one per output;
    ``ctx`` has the operator's inputs and outputs as attributes by parameter name
    (``ctx.x``, ``ctx.out``; a single output of a gpudsl op by its parameter name, of
    another op as ``ctx.result``).  It returns the inputs' gradients: a dict by name
    (a missing name: no gradient) or a tuple in argument order.  It may call any
    differentiable torch or gpudsl.torch operators, so double backward works where
    they have gradients too.

    Or it decorates a backward ``@proc`` (or Kernel), registered as the operator
    ``NAME_backward``: its parameters are the operator's inputs and outputs by name and
    ``grad_OUT`` for the gradient of output ``OUT``; it writes ``grad_IN`` for each
    input ``IN`` that has a gradient."""
    def register(fn):
        names, outs = _names(custom)
        if as_procdef(fn) is not None:  # a backward proc: registered, called by names
            fn = _proc_backward(custom, fn, names, outs)
        if any(a.alias_info is not None and a.alias_info.is_write
               for a in custom._opoverload._schema.arguments):
            raise Error(f"{custom._qualname} mutates its arguments; torch registers "
                        "gradients only for functional operators",
                        hint="return the written tensor as an output instead (outputs=...)")

        def setup_context(ctx, inputs, output):
            values = dict(zip(names, inputs))
            res = output if isinstance(output, tuple) else (output,)
            values.update(zip(outs, res))
            tensors = {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}
            ctx.tensor_names = tuple(tensors)
            ctx.save_for_backward(*tensors.values())
            ctx.others = {k: v for k, v in values.items() if k not in tensors}

        def bwd(ctx, *grads):
            ns = SimpleNamespace(**ctx.others, **dict(zip(ctx.tensor_names,
                                                          ctx.saved_tensors)))
            got = fn(ns, *grads)
            if isinstance(got, dict):
                unknown = set(got) - set(names)
                if unknown:
                    raise Error(f"the backward of {custom._qualname} returned gradients "
                                f"for {sorted(unknown)}, which are not its inputs "
                                f"({', '.join(names)})")
                return tuple(got.get(n) for n in names)
            got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
            if len(got) != len(names):
                raise Error(f"the backward of {custom._qualname} returned {len(got)} "
                            f"gradient(s) for its {len(names)} inputs ({', '.join(names)})")
            return got

        custom.register_autograd(bwd, setup_context=setup_context if setup is None
                                 else setup)
        return fn
    return register


def _proc_backward(custom, proc, names: tuple, outs: tuple):
    """A backward proc as a backward function: registered as the operator
    ``NAME_backward``; its parameters are the forward's inputs and outputs by name and
    ``grad_OUT`` (the gradient of output ``OUT``); it writes ``grad_IN`` for the inputs
    that have a gradient."""
    grads = tuple(p.name for p in as_procdef(proc).params
                  if p.name.startswith("grad_") and p.name[5:] in names)
    sig = signature(proc, grads)
    known = set(names) | set(outs) | {f"grad_{o}" for o in outs}
    missing = [n for n, _, _ in sig.args if n not in known]
    if missing or not sig.outputs:
        raise Error(f"the backward proc {as_procdef(proc).name} of {custom._qualname} "
                    + (f"takes {missing}, which are neither inputs nor outputs of the "
                       f"operator nor grad_OUTPUT" if missing else
                       "writes no grad_INPUT"),
                    hint=f"its parameters: the inputs ({', '.join(names)}), the outputs "
                    f"({', '.join(outs)}), grad_OUTPUT; it writes grad_INPUT")
    bwd = op(custom._qualname + "_backward", proc, outputs=grads)

    def run(ctx, *grads):
        values = {**vars(ctx), **{f"grad_{o}": g for o, g in zip(outs, grads)}}
        got = bwd(*(values[n] for n, _, _ in sig.args))
        got = got if isinstance(got, tuple) else (got,)
        return {n[5:]: g for n, g in zip(sig.outputs, got)}
    return run


def _names(custom) -> tuple[tuple, tuple]:
    """The argument names of ``custom`` and its outputs' names (a gpudsl op's output
    parameters; ``result`` for a single output of another op)."""
    schema = custom._opoverload._schema
    names = tuple(a.name for a in schema.arguments)
    sig = _SPECS.get(custom._qualname)
    if sig is not None:
        return names, sig.outputs
    n = len(schema.returns)
    return names, ("result",) if n == 1 else tuple(f"result{i}" for i in range(n))


__all__ = ["op", "backward"]
