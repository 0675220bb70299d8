"""The result of ``proc.perf()``: ``PerfReport`` with ``KernelPerf`` per
kernel launch and ``AccessPerf`` per memory access; text and a notebook table."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..display import esc, table


@dataclass
class AccessPerf:
    location: tuple  # (file, line, column)
    buffer: str
    memory: str  # "GLOBAL" / "SHARED"
    kind: str  # "read" / "write"
    vector_width: int
    sectors: int | None = None  # global: sectors of the worst warp request
    min_sectors: int | None = None
    bank_conflict: int | None = None  # shared: 1 = none
    requests: int = 0  # warp requests enumerated
    note: str = ""
    statement: str = ""  # the statement, as gpudsl source
    banked: bool = False  # counted by banks (shared memory), not by sectors
    # the data-dependent guard(s) around the access: its figures are those of a warp
    # that takes this branch (the guard's value is known only at run time)
    assumes: str = ""
    layout: str = ""  # "swizzle 128" for a swizzled SHARED tile (docs/hopper.md)

    @property
    def coalesced(self) -> bool | None:
        if self.sectors is None:
            return None
        return self.sectors <= self.min_sectors

    @property
    def ok(self) -> bool:
        if self.banked:
            return self.bank_conflict in (None, 1)
        return self.coalesced is not False

    def figure(self) -> str:
        if self.note:
            return self.note
        if self.banked:
            fig = "no bank conflict" if self.bank_conflict == 1 else \
                f"{self.bank_conflict}-way bank conflict"
            return f"{fig} ({self.layout})" if self.layout else fig
        return f"{self.sectors} sectors (min {self.min_sectors})"


@dataclass
class KernelPerf:
    name: str
    grid: tuple
    block: tuple
    registers: int | None
    shared_bytes: int
    spills: int | None  # spill stores + loads, bytes
    occupancy: float | None
    occupancy_detail: str
    bytes: int
    flops: int
    time_memory_s: float
    time_compute_s: float
    accesses: list = field(default_factory=list)
    launches: int = 1
    serial: bool = False
    # the model's terms from the machine code (perf/perf_model.py); None without it
    time_issue_s: float | None = None  # executed warp instructions / issue rate
    time_mlp_s: float | None = None  # bytes / (bytes in flight per SM x SMs / latency)
    time_shared_s: float | None = None  # shared-memory bytes / shared bandwidth
    shared_traffic: float | None = None  # bytes to and from SHARED, all threads
    instructions: float | None = None  # executed instructions, all threads
    bytes_in_flight: int | None = None  # per thread, in the loop that carries the work
    loads_in_flight: int | None = None
    machine: list | None = None  # [sass.LoopFigures]: the kernel, then each loop

    @property
    def estimate_s(self) -> float:
        """The model's time: the largest of the roofline's memory and compute terms,
        the issue-slot, shared-memory and loads-in-flight terms (those known)."""
        return max(t for t in (self.time_memory_s, self.time_compute_s, self.time_issue_s,
                               self.time_shared_s, self.time_mlp_s) if t is not None)

    @property
    def limiter(self) -> str:
        """Which term of the model is the largest: "memory", "compute", "issue",
        "shared" or "loads in flight"."""
        terms = {"memory": self.time_memory_s, "compute": self.time_compute_s,
                 "issue": self.time_issue_s, "shared": self.time_shared_s,
                 "loads in flight": self.time_mlp_s}
        return max((k for k, v in terms.items() if v is not None), key=lambda k: terms[k])
    shuffles: int = 0  # warp instructions of collectives (shuffles, votes, reductions)
    # async copies (docs/async_copies.md): the pipeline's stages (0: no async copy) and the deepest
    # async_wait's depth (the groups a thread keeps in flight past it)
    async_stages: int = 0
    async_depth: int = 0

    @property
    def bound(self) -> str:
        return "memory" if self.time_memory_s >= self.time_compute_s else "compute"

    @property
    def time_s(self) -> float:
        return max(self.time_memory_s, self.time_compute_s)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    def problems(self) -> list:
        return [a for a in self.accesses if not a.ok]


def _escaped(rows):
    return [[esc(c) for c in r] for r in rows]


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _loc(loc) -> str:
    f, line, col = loc
    return f"{str(f).rsplit('/', 1)[-1]}:{line}:{col}"


def _si(x: float, unit: str) -> str:
    for p, s in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= p:
            return f"{x / p:.3g} {s}{unit}"
    return f"{x:.3g} {unit}"


@dataclass
class PerfReport:
    proc: str
    device: object
    bindings: dict
    kernels: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def kernel(self, name: str) -> KernelPerf:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    @property
    def accesses(self) -> list:
        return [a for k in self.kernels for a in k.accesses]

    def _kernel_rows(self, k):
        occ = "?" if k.occupancy is None else f"{k.occupancy:.0%} ({k.occupancy_detail})"
        return [
            ["grid x block", f"{k.grid} x {k.block}" + (f", {k.launches} launches"
                                                         if k.launches != 1 else "")],
            ["registers / shared / spills",
             f"{'?' if k.registers is None else k.registers} / {k.shared_bytes} B / "
             f"{'?' if k.spills is None else str(k.spills) + ' B'}"],
            [f"occupancy ({self.device.name})", occ],
            ["bytes / FLOPs", f"{_si(k.bytes, 'B')} / {_si(k.flops, 'FLOP')} "
                              f"({k.intensity:.3g} FLOP/B)"],
            ["roofline", f"{k.bound}-bound, >= {k.time_s * 1e6:.3g} us "
                         f"(memory {k.time_memory_s * 1e6:.3g} us, compute "
                         f"{k.time_compute_s * 1e6:.3g} us)"],
        ] + ([["model (machine code)",
               f"{k.limiter}-bound, ~{k.estimate_s * 1e6:.3g} us (issue "
               f"{k.time_issue_s * 1e6:.3g} us for {_si(k.instructions, 'instr')}; "
               f"shared {k.time_shared_s * 1e6:.3g} us for {_si(k.shared_traffic, 'B')}; "
               f"loads in flight {k.time_mlp_s * 1e6:.3g} us with {k.loads_in_flight} "
               f"loads / {k.bytes_in_flight} B per thread)"]]
             if k.time_issue_s is not None else []) + \
            ([["warp shuffles", f"{k.shuffles:,} warp instructions (shuffles, "
                                "votes, warp reductions)"]] if k.shuffles else []) + \
            ([["async copies", f"{k.async_stages}-stage pipeline (async_wait("
                               f"{k.async_depth}): {k.async_depth + 1} group(s) of copies "
                               "in flight while a stage is used)"
               if k.async_stages > 1 else "one stage (copies waited for before use)"]]
             if k.async_stages else [])

    def _access_rows(self, k):
        return [[_loc(a.location), _short(a.statement), a.buffer, a.memory, a.kind,
                 a.vector_width, a.figure() + (" (if taken)" if a.assumes else ""),
                 "ok" if a.ok else "!"] for a in k.accesses]

    def __str__(self):
        b = ", ".join(f"{n}={v}" for n, v in self.bindings.items())
        out = [f"performance of {self.proc}({b}) on {self.device.name}"]
        for k in self.kernels:
            out.append(f"kernel {k.name}" + (" (serial)" if k.serial else ""))
            for label, val in self._kernel_rows(k):
                out.append(f"  {label}: {val}")
            for row in self._access_rows(k):
                out.append("  {:<6} {:<6} {:<5} x{:<2} {:<24} {}{}".format(
                    *row[2:7], row[1], "" if row[7] == "ok" else "   <-- " + row[0]))
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def _repr_html_(self) -> str:
        parts = [f"<div><b>performance of {esc(self.proc)}</b> on {esc(self.device.name)}"]
        for k in self.kernels:
            parts.append(f"<p><code>{esc(k.name)}</code></p>")
            parts.append(table(_escaped(self._kernel_rows(k))))
            parts.append(table(_escaped(self._access_rows(k)),
                               ["location", "statement", "array", "memory", "kind", "vector", "figure", ""]))
        parts += [f"<p>{esc(n)}</p>" for n in self.notes]
        return "".join(parts) + "</div>"
