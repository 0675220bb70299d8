"""The terms of the performance model read from the machine code (``sass``).

The roofline (``KernelPerf.time_memory_s`` / ``time_compute_s``) knows bytes and
FLOPs.  Three more terms come from the SASS of the kernel that runs:

- **issue slots**: executed warp instructions / (SMs x schedulers x clock), one warp
  instruction per clock per scheduler;
- **shared memory**: bytes moved to and from SHARED (LDS, STS, LDGSTS, LDSM, weighted as
  the instructions are) / (SMs x 128 B per clock x clock), bank conflicts not counted;
- **loads in flight** (memory-level parallelism): DRAM bytes read / (bytes in flight
  per SM x SMs / DRAM latency), Little's law (stores do not wait), where the bytes in flight per SM are the
  most global-load bytes one thread has issued and not yet used in the loop that
  carries the work (program order) times the threads resident on an SM.

Executed instructions: the SASS loops are not the IR loops (unrolled, rotated), so
their trip counts are estimated from what the IR counts (``counts``): the loop
that carries the work (``sass.hot_loop``) runs ``FLOPs / its FLOPs per
iteration`` times in all threads when it does floating-point work, else
``global bytes accessed / the global bytes per iteration of the innermost loops that
access global memory`` (those loops taken to run equally often); every other
instruction runs once per thread.  An estimate, stated as one.
"""
from __future__ import annotations


def _innermost_global(figs: list) -> list:
    loops = [f for f in figs[1:] if f.global_bytes]
    return [f for f in loops
            if not any(g is not f and f.start <= g.start and g.end <= f.end for g in loops)]


def _weights(figs: list, threads: int, flops: float, accessed: float) -> list:
    """[(LoopFigures, times it runs in all threads)] for the parts whose sum covers the
    kernel once: the loops that carry the work, and the rest of the kernel (as a
    LoopFigures difference: instructions and shared bytes only)."""
    from .sass import hot_loop

    kernel = figs[0]
    hot = hot_loop(figs)
    if hot is not None and hot.flops and flops:
        loops, iters = [hot], flops / hot.flops
    else:
        loops = _innermost_global(figs)
        per_iter = sum(f.global_bytes for f in loops)
        if not loops or not per_iter or not accessed:
            return [(kernel.instructions, kernel.shared_bytes, threads)]
        iters = accessed / per_iter
    rest_i = kernel.instructions - sum(f.instructions for f in loops)
    rest_s = kernel.shared_bytes - sum(f.shared_bytes for f in loops)
    return [(f.instructions, f.shared_bytes, iters) for f in loops] + \
        [(max(0, rest_i), max(0, rest_s), threads)]


def executed_instructions(figs: list, threads: int, flops: float, accessed: float) -> float:
    """Instructions executed by all ``threads`` of a launch (see the module text)."""
    return sum(n * times for n, _, times in _weights(figs, threads, flops, accessed))


def shared_traffic(figs: list, threads: int, flops: float, accessed: float) -> float:
    """Bytes all ``threads`` move to and from shared memory, weighted as instructions."""
    return sum(b * times for _, b, times in _weights(figs, threads, flops, accessed))


def in_flight(figs: list) -> tuple:
    """(loads, bytes) in flight per thread where the work is: the innermost loops that
    access global memory (the least of them), else the whole kernel."""
    inner = [f for f in _innermost_global(figs) if f.loads or f.loads_in_flight]
    if not inner:
        return figs[0].loads_in_flight, figs[0].bytes_in_flight
    worst = min(inner, key=lambda f: f.bytes_in_flight)
    return worst.loads_in_flight, worst.bytes_in_flight


def add_machine_terms(kp, figs: list, dev, occ, grid, block, accessed: float,
                      read_bytes: float) -> None:
    """Fill ``kp``'s (a ``KernelPerf``) issue-slot and loads-in-flight terms."""
    threads_per_block = 1
    for b in block:
        threads_per_block *= b
    blocks = 1
    for g in grid:
        blocks *= max(g, 1)
    threads = threads_per_block * blocks  # one launch, as the roofline terms
    kp.machine = figs
    kp.instructions = executed_instructions(figs, threads, kp.flops, accessed)
    kp.time_issue_s = kp.instructions / 32 / (dev.sms * dev.schedulers * dev.clock_hz)
    kp.shared_traffic = shared_traffic(figs, threads, kp.flops, accessed)
    kp.time_shared_s = kp.shared_traffic / (dev.sms * dev.shared_bytes_per_clock * dev.clock_hz)
    loads, nbytes = in_flight(figs)
    kp.loads_in_flight, kp.bytes_in_flight = loads, nbytes
    resident = occ.warps_per_sm * 32 if occ is not None else threads_per_block
    resident = min(resident, max(threads // max(dev.sms, 1), 1)) if threads else resident
    if nbytes and resident:
        rate = nbytes * resident * dev.sms / dev.dram_latency_s
        kp.time_mlp_s = read_bytes / rate
    else:
        kp.time_mlp_s = 0.0


__all__ = ["add_machine_terms", "executed_instructions", "in_flight"]
