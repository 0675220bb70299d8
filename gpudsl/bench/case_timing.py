"""How ``gpudsl bench`` times one case and its references (issue 34).

Every row names its reference (``reference``), the backend or library that ran it
(``reference_backend``) and, on a GPU, the kernels it launched (``reference_kernels``,
read once with ``torch.profiler``).  A flops row times every candidate reference of its
case (the SDPA backends of an attention case; ``torch.matmul`` for a GEMM), records each
in ``references`` (status, raw times, error) and keeps the fastest correct one as the
reference (whose kernels alone are read: the profiler costs time in the window).  A
bytes row is measured against a device copy of as many bytes (``copy_fraction``); a
decode attention row is too, beside its FLOP rate.  Every timing
keeps its repetitions' raw times (``timing.times_ms``, ``reference_timing.times_ms``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Ref:
    """One reference a row is measured against: its name, the backend or library that
    runs it, and the call (or, a string: why it is skipped); ``view`` reshapes its
    result to the node's before the check."""
    name: str
    backend: str
    run: Callable | str
    view: Callable | None = None


@dataclass
class Case:
    node: str
    size: str
    kind: str  # "flops" or "bytes"
    amount: float  # FLOPs, or bytes read + written
    run: Callable  # the gpudsl node; returns its result
    want: Callable  # the expected result (reference library)
    reference: Callable | None  # always None: flops rows list theirs in ``refs``
    elements: int = 0  # elements of the copy reference (flops rows: their bytes / 8)
    l2_resident: bool = False  # its arrays fit in the L2 together (recorded as fits_l2)
    tol: float = 1e-4  # largest relative error accepted
    refs: list = field(default_factory=list)  # flops rows: every Ref timed, fastest kept
    extra: dict = field(default_factory=dict)  # fields copied into the row


def kernel_names(target: str, fn) -> list[str]:
    """The GPU kernels (and copies) one call of ``fn`` launches, as the profiler names
    them; [] on the emulator or when the profiler is unavailable."""
    if target != "cuda":
        return []
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events()
                 if str(getattr(e, "device_type", "")).endswith("CUDA")]
        return sorted(set(names))[:8]
    except Exception as e:  # a missing CUPTI is a note, not a failed row
        return [f"(profiler: {type(e).__name__}: {e})"[:160]]


class Run:
    """One benchmark run: how it times (``measure`` with these repetitions), the device's
    peaks, where it logs, and the copy references timed so far (``copies``)."""

    def __init__(self, target: str, env, reps: int, warmup: int, dev, log, peak):
        self.target, self.env, self.reps, self.warmup = target, env, reps, warmup
        self.dev, self.log, self.peak = dev, log, peak
        self.copies: dict = {}
        self.want = None  # the case being timed: its expected result

    def timed(self, fn, flush=True):
        from ..runtime.timing import measure

        return measure(fn, backend=self.target, warmup=self.warmup, reps=self.reps,
                       flush=flush)

    def copy_rate(self, elements: int, flush: bool) -> dict:
        """The copy reference of ``elements`` float32, timed once per (size, flush)."""
        key = (elements, flush)
        if key not in self.copies:
            env = self.env
            src, dst = env.randn(elements), env.empty(elements)
            fn = (lambda: dst.copy_(src)) if self.target == "cuda" else \
                (lambda: env.np.copyto(dst, src))
            t = self.timed(fn, flush)
            self.copies[key] = {
                "elements": elements, "flushed": flush, "median_ms": t.median_ms,
                "spread_ms": t.spread_ms, "bytes_per_s": t.rate(8 * elements),
                "times_ms": t.times_ms, "kernels": kernel_names(self.target, fn)}
        return self.copies[key]

    def rows(self, c) -> list[dict]:
        """The case's rows: one that says why when it fails or is wrong, else one per
        L2 state it is timed in: cold, and for bandwidth nodes warm too, at every size
        (``fits_l2`` says whether its arrays fit in the L2; no state is the headline)."""
        row = self.checked(c)
        if "status" in row:
            return [row]
        if c.kind == "bytes":
            row["fits_l2"] = c.l2_resident
        return [self.timed_row(c, row, flush)
                for flush in ([True, False] if c.kind == "bytes" else [True])]

    def checked(self, c) -> dict:
        """The case's row after comparing its result with the expected one once: with
        ``status`` ``error`` or ``wrong`` (and the reason, logged) when it fails."""
        row = {"node": c.node, "size": c.size, "kind": c.kind, "amount": c.amount,
               **c.extra}
        self.want = None
        try:
            self.want = c.want()  # once per case: every reference is checked against it
            err = self.env.rel_error(c.run(), self.want)
        except Exception as e:  # a node that fails is a row, not the end of the run
            row.update(status="error", reason=f"{type(e).__name__}: {e}"[:500])
            self.log(f"{c.node:16} {c.size:>14}  ERROR {row['reason'][:80]}")
            return row
        row.update(rel_error=err, tolerance=c.tol)
        if not err <= c.tol:
            row.update(status="wrong", reason=f"relative error {err:.3g} > {c.tol}")
            self.log(f"{c.node:16} {c.size:>14}  WRONG {row['reason']}")
        return row

    def timed_row(self, c, row: dict, flush: bool) -> dict:
        """The case timed (the L2 flushed before each repetition or not) beside its
        reference, timed the same way; logged."""
        r = dict(row, status="ok", l2="cold" if flush else "warm")
        t = self.timed(c.run, flush)
        rate = t.rate(c.amount)
        r.update(timing=t.to_dict(), median_ms=t.median_ms, spread_ms=t.spread_ms,
                 rate=rate, unit="FLOP/s" if c.kind == "flops" else "B/s",
                 host_ms=t.host_ms)
        peak = self.peak(self.dev, c.kind, c.node)
        r["roofline_fraction"] = rate / peak if peak else None
        if c.kind == "flops":
            self.flops_reference(r, c, t, flush)
        if c.elements and ("bytes" in r or c.kind == "bytes"):
            self.copy_reference(r, c, t, flush)
        self.log_row(r, c, t)
        return r

    def copy_reference(self, r: dict, c, t, flush: bool) -> None:
        """The row's rate against a device copy of as many bytes (``copy_fraction``);
        for a bytes row that copy is its reference."""
        cp = self.copy_rate(c.elements, flush)
        nbytes = r.get("bytes", c.amount)
        r["bandwidth"] = nbytes / (t.median_ms * 1e-3)
        r["copy_fraction"] = r["bandwidth"] / cp["bytes_per_s"]
        r["copy_reference"] = {k: cp[k] for k in ("elements", "median_ms", "bytes_per_s")}
        if c.kind != "bytes":
            return
        cuda = self.target == "cuda"
        r.update(reference=f"device copy of {c.elements} float32 (read + write)" if cuda
                 else "numpy copy", reference_backend="torch copy_ (cudaMemcpyAsync "
                 "device to device)" if cuda else "numpy copyto",
                 reference_kernels=cp["kernels"], reference_median_ms=cp["median_ms"],
                 reference_rate=cp["bytes_per_s"],
                 reference_timing={"times_ms": cp["times_ms"]}, ratio=r["copy_fraction"])

    def flops_reference(self, r: dict, c, t, flush: bool) -> None:
        """Every candidate reference timed the same way (``references``); the fastest
        correct one is the row's ``reference`` and ``ratio`` is its time over ours."""
        cands = [self.candidate(ref, c, flush) for ref in c.refs]
        r["references"] = [{k: v for k, v in x.items() if k not in ("_t", "_fn")}
                           for x in cands]
        ok = [x for x in cands if x["status"] == "ok"]
        if not ok:
            r.update(reference=None, reference_backend=None, ratio=None,
                     status="no reference", reason="; ".join(
                         f"{x['backend']}: {x.get('reason')}" for x in cands)[:500])
            return
        best = min(ok, key=lambda x: x["median_ms"])
        rt = best["_t"]
        r.update(reference=best["name"], reference_backend=best["backend"],
                 reference_kernels=kernel_names(self.target, best["_fn"]),
                 reference_median_ms=rt.median_ms,
                 reference_rate=rt.rate(c.amount), reference_host_ms=rt.host_ms,
                 reference_timing=rt.to_dict(), ratio=rt.median_ms / t.median_ms)

    def candidate(self, ref, c, flush: bool) -> dict:
        """One reference checked against the case's expected result, then timed."""
        x = {"name": ref.name, "backend": ref.backend}
        if isinstance(ref.run, str):
            return {**x, "status": "skipped", "reason": ref.run}
        try:
            got = ref.run()
            err = self.env.rel_error(ref.view(got) if ref.view else got, self.want)
        except Exception as e:  # the backend refuses this case: recorded, not timed
            return {**x, "status": "unavailable", "reason": f"{type(e).__name__}: {e}"[:300]}
        if not err <= c.tol:
            return {**x, "status": "wrong", "rel_error": err,
                    "reason": f"relative error {err:.3g} > {c.tol}"}
        t = self.timed(ref.run, flush)
        return {**x, "status": "ok", "rel_error": err, "median_ms": t.median_ms,
                "times_ms": t.times_ms, "_t": t, "_fn": ref.run}

    def log_row(self, r: dict, c, t) -> None:
        scale, unit = (1e12, "TF/s") if c.kind == "flops" else (1e9, "GB/s")
        roof = f"{r['roofline_fraction']:6.1%}" if r["roofline_fraction"] else "   n/a"
        ratio = f"{r['ratio']:6.1%}" if r.get("ratio") is not None else "   n/a"
        host = f"  host {t.host_ms * 1e3:.0f} us/call" if t.host_ms is not None else ""
        cf = f"  copy {r['copy_fraction']:5.1%}" if "copy_fraction" in r and \
            c.kind == "flops" else ""
        self.log(f"{c.node:16} {c.size:>14} {r['l2']:4} {r['rate'] / scale:9.2f} {unit}  "
                 f"roofline {roof}  vs {r.get('reference_backend') or 'ref'} {ratio}{cf}  "
                 f"({t.median_ms:.4f} ms +- {t.spread_ms:.4f}){host}")
