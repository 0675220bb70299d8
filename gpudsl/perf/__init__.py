"""The performance report (docs/performance.md): ``proc.perf(**bindings)`` / ``gpudsl perf``.

What a kernel will cost, without a GPU: for each access to GLOBAL or SHARED
memory, the sectors one warp request touches against the minimum (coalescing), the
bank-conflict degree of a warp-wide shared access and the vector width (one warp's
addresses enumerated: ``warp``); per kernel, ptxas' registers, shared memory and
spills (NVRTC, no GPU needed), occupancy on a named device (``devices``), the
bytes and FLOPs of a launch (``counts``) and the roofline bound.

Sits above code generation and the runtime (it asks codegen for the kernels'
geometry and NVRTC for ptxas' figures); nothing below ``proc.py`` imports it.
"""
from __future__ import annotations

from ..codegen import NeedsBinding, generate
from ..codegen.host_plan import HostSplitter, walk_program
from ..errors import Error
from ..ir.control import NotConstant, evaluate
from ..ir.inline import inline_calls
from ..ir.procdef import as_procdef
from ..ir.types import GLOBAL, param_memory
from .counts import Counter
from .devices import DEVICES, Device, device, occupancy
from .perf_model import add_machine_terms
from .perf_report import AccessPerf, KernelPerf, PerfReport
from .warp import Buffer, WarpWalker, bank_conflict, elem_bytes, sectors, vector_width


def _buffers(ir, env) -> dict:
    out = {}
    for p in ir.params:
        if p.is_array:
            shape = tuple(evaluate(e, env) for e in p.shape)
            out[p.name] = Buffer(p.name, param_memory(p.mem), shape, elem_bytes(p.ty))
    return out


def running_module(ir, bindings: dict):
    """The module a kernel compiled without bindings runs (``proc.compile()``, what
    ``gpudsl.ops`` launches): sizes stay parameters, except those code generation
    needs as constants (thread loop bounds, SHARED shapes), bound from ``bindings``."""
    late: dict = {}
    while True:
        try:
            return generate(ir, late)
        except NeedsBinding as e:
            missing = [n for n in e.names if n not in late and n in bindings]
            if not missing:
                raise
            late.update({n: bindings[n] for n in missing})


def _compiled(source: str, dev: Device, notes: list, want_sass: bool, features=()):
    """(ptxas resources, {kernel: [LoopFigures]} or None) of ``source``, built for the
    device's architecture (with the ``features`` the code needs: sm_90a on an H100)."""
    try:
        from ..runtime.nvrtc import compile_cubin
        from ..targets import arch_with

        cub = compile_cubin(source, arch_with(dev.arch, features))
    except Exception as e:  # NVRTC absent or failing: the report says so
        notes.append(f"ptxas figures unavailable ({type(e).__name__}: {str(e)[:120]})")
        return {}, None
    if not want_sass:
        return cub.resources, None
    from .sass import disassemble, have_disassembler, kernel_figures, parse_sass

    if not have_disassembler():
        notes.append("no issue-slot or loads-in-flight terms: reading machine code needs "
                     "pip install 'gpudsl[sass]'")
        return cub.resources, None
    funcs = parse_sass(disassemble(cub.cubin, cub.key))
    return cub.resources, {k: kernel_figures(v) for k, v in funcs.items()}


def _access(rec) -> AccessPerf:
    loc = rec.loc
    location = (loc.file, loc.line, loc.col) if loc is not None else ("?", 0, 0)
    a = AccessPerf(location, rec.buf, rec.memory, rec.kind, 1, requests=len(rec.requests),
                   banked=rec.banked,
                   statement=rec.statement, assumes=rec.assumes, layout=rec.layout)
    if rec.unknown or not rec.requests:
        a.note = "data-dependent index" if rec.unknown else "not reached by warp 0"
        return a
    es = rec.elem_bytes
    a.vector_width = max(vector_width(r) for r in rec.requests)
    if rec.banked:
        a.bank_conflict = max(bank_conflict(r, es) for r in rec.requests)
    else:
        figs = [sectors(r, es) for r in rec.requests]
        a.sectors, a.min_sectors = max(figs, key=lambda f: (f[0] / max(f[1], 1), f[0]))
    return a


def perf(proc, device_name: "str | Device" = "H100", sass: bool = True,
         **bindings) -> PerfReport:
    """The performance report of ``proc`` with every size bound in ``bindings``, for
    the kernel that runs (sizes as parameters where it takes them so).  With ``sass``
    and the disassembler installed, the model adds the issue-slot and loads-in-flight
    terms read from the machine code (``model``)."""
    ir = as_procdef(proc) or proc
    dev = device(device_name)
    missing = [p.name for p in ir.params if p.is_control and p.name not in bindings]
    if missing:
        raise Error(f"perf() of {ir.name} needs every size and index bound; missing: "
                    + ", ".join(missing),
                    hint=f"{ir.name}.perf(" + ", ".join(f"{n}=..." for n in missing) + ")")
    env = dict(bindings)
    module = running_module(ir, bindings)
    body = inline_calls(ir).body
    splitter = HostSplitter(ir.name)
    splitter.block(body)
    buffers = _buffers(ir, env)
    for t in module.temporaries:
        buffers[t.name] = Buffer(t.name, GLOBAL, tuple(evaluate(e, env) for e in t.shape),
                                 elem_bytes(t.dtype))
    first_env: dict = {}
    launches: dict = {}
    for name, kenv in walk_program(module.program, env):
        first_env.setdefault(name, kenv)
        launches[name] = launches.get(name, 0) + 1
    report = PerfReport(ir.name, dev, dict(bindings))
    res, machine = _compiled(module.source, dev, report.notes, sass, module.features)
    for hk in splitter.kernels:
        info = module.kernels.get(hk.name)
        if info is None or hk.name not in first_env:
            continue
        kenv = first_env[hk.name]
        try:
            grid = tuple(evaluate(e, kenv) for e in info.grid)
        except NotConstant:
            grid = (0, 0, 0)
        counter = Counter(buffers, kenv)
        counter.run(hk.body, kenv)
        records = [] if hk.serial else WarpWalker(buffers, info.block, kenv).run(hk.body)
        r = res.get(hk.name)
        regs = r.registers if r is not None else None
        # static shared memory from ptxas, plus the dynamic shared memory of arrays
        # above 48 KiB (codegen/host_plan.py), which ptxas does not count
        shared = (r.shared_bytes + (getattr(info, "dynamic_shared_bytes", 0) or 0)
                  if r is not None else _shared_bytes(records, counter))
        spills = (r.spill_stores_bytes + r.spill_loads_bytes) if r is not None else None
        occ = occupancy(dev, info.threads_per_block, regs, shared)
        flops, nbytes = counter.flops, counter.total_bytes()
        accesses = [_access(rec) for rec in records]
        for guard in dict.fromkeys(a.assumes for a in accesses if a.assumes):
            report.notes.append(
                f"{hk.name}: figures marked 'if taken' sit under the data-dependent guard "
                f"`{guard}` and are those of a warp that takes that branch; bytes and "
                "FLOPs count the then-block of a data-dependent if, never its else-block")
        detail = f"{occ.blocks_per_sm} blocks/SM, {occ.limited_by}"
        kp = KernelPerf(
            hk.name, grid, info.block, regs, shared, spills, occ.fraction, detail, nbytes,
            flops, nbytes / dev.bandwidth, flops / dev.fp32_flops, accesses,
            launches[hk.name], hk.serial, shuffles=counter.shuffles)
        kp.async_stages, kp.async_depth = _async_stages(hk.body)
        if machine is not None and hk.name in machine and not hk.serial:
            add_machine_terms(kp, machine[hk.name], dev, occ, grid, info.block,
                              sum(counter.moved.values()), counter.total_bytes("r"))
        report.kernels.append(kp)
    return report


def _async_stages(body) -> tuple:
    """(stages, deepest async_wait) of a kernel's async copies (docs/async_copies.md): a kernel that
    commits groups in a loop and waits with depth ``d`` keeps ``d + 1`` groups in flight
    while it uses one: ``d + 2`` stages; without such a loop, one stage; (0, 0) without
    async copies."""
    from ..ir.nodes import AsyncCommit, AsyncCopy, AsyncWait, For
    from ..ir.visitor import walk

    nodes = list(walk(tuple(body)))
    if not any(isinstance(n, AsyncCopy) for n in nodes):
        return 0, 0
    depth = max([n.depth for n in nodes if isinstance(n, AsyncWait)] or [0])
    looped = any(isinstance(n, For) and n.kind == "seq" and n.mapping is None and
                 any(isinstance(m, AsyncCommit) for m in walk(n.body)) for n in nodes)
    return (depth + 2 if looped else 1), depth


def _shared_bytes(records, counter) -> int:
    return sum(b.elem_bytes * _prod(b.shape) for b in counter.buffers.values()
               if b.memory.per_block)


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


__all__ = ["perf", "PerfReport", "KernelPerf", "AccessPerf", "DEVICES", "Device", "device",
           "occupancy"]
