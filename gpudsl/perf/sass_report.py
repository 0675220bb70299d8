"""The machine-code report: ``Kernel.sass()`` / ``gpudsl perf --sass``.

``sass_report`` compiles a generated module (the one that runs: sizes as
parameters where the kernel takes them so) for an sm target with NVRTC, disassembles
it (``sass``) and gathers per kernel ptxas' registers and spills, the occupancy on
a device table, and the figures of the kernel and of each loop.  Text for the CLI,
an HTML table for notebooks."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..display import esc, table
from .devices import Device, device, occupancy
from .sass import disassemble, kernel_figures, parse_sass
from ..targets import arch_with

_COLUMNS = ["where", "source", "instr", "FFMA", "HMMA", "LDG", "LDS", "LDGSTS", "STS", "STG",
            "BAR", "SHFL", "int", "loads in flight", "load -> first use"]


def _by_width(f, base) -> str:
    parts = []
    for w in ("", ".128", ".64", ".16", ".8"):
        n = f.counts.get(base + w, 0)
        if n:
            parts.append(f"{n}" + (f"x{w[1:]}" if w else ""))
    return "+".join(parts) or "0"


def _distances(f) -> str:
    d = [u.distance for u in f.loads]
    if not d:
        return "-"
    known = [x for x in d if x is not None]
    txt = ",".join(str(x) for x in known[:8]) + ("..." if len(known) > 8 else "")
    if len(known) < len(d):
        txt += f"{',' if known else ''}{len(d) - len(known)} unused"
    return txt


def figure_row(f) -> list:
    return [f.label, f.source, f.instructions, f.count("FFMA"), f.count("HMMA"),
            _by_width(f, "LDG"), _by_width(f, "LDS"), f.count("LDGSTS"), _by_width(f, "STS"),
            _by_width(f, "STG"), f.count("BAR"), f.count("SHFL"), f.count("int"),
            f"{f.loads_in_flight} ({f.bytes_in_flight} B)", _distances(f)]


@dataclass
class KernelSass:
    name: str
    threads: int
    registers: int | None
    spill_bytes: int | None
    shared_bytes: int
    occupancy: object  # devices.Occupancy or None
    figures: list  # [LoopFigures]: the kernel, then each loop

    @property
    def loops(self) -> list:
        return self.figures[1:]


@dataclass
class SassReport:
    proc: str
    arch: str
    device: Device
    kernels: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def kernel(self, name: str) -> KernelSass:
        for k in self.kernels:
            if k.name == name or k.name.startswith(name):
                return k
        raise KeyError(name)

    def _head(self, k) -> str:
        occ = "?" if k.occupancy is None else str(k.occupancy)
        return (f"kernel {k.name}: {k.threads} threads/block, "
                f"{'?' if k.registers is None else k.registers} registers, "
                f"{'?' if k.spill_bytes is None else k.spill_bytes} B spills, "
                f"{k.shared_bytes} B shared, occupancy {occ} on {self.device.name}")

    def __str__(self):
        out = [f"machine code of {self.proc} ({self.arch}, NVRTC + nvdisasm)"]
        for k in self.kernels:
            out.append(self._head(k))
            rows = [_COLUMNS] + [[str(c) for c in figure_row(f)] for f in k.figures]
            widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
            for r in rows:
                out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        out.append("LDG/LDS/STS/STG: count x width in bits (no width: 32); loads in flight: "
                   "the most global loads issued and not yet used at once in one thread "
                   "(program order); load -> first use: instructions between each global "
                   "load and the first that reads its registers")
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        parts = [f"<div><b>machine code of {esc(self.proc)}</b> ({esc(self.arch)})"]
        for k in self.kernels:
            parts.append(f"<p>{esc(self._head(k))}</p>")
            parts.append(table([[esc(c) for c in figure_row(f)] for f in k.figures],
                               _COLUMNS))
        parts += [f"<p>{esc(n)}</p>" for n in self.notes]
        return "".join(parts) + "</div>"


def sass_report(module, arch: str | None = None, device_name: "str | Device | None" = None,
                name: str | None = None) -> SassReport:
    """The machine-code report of a generated module (``codegen.CudaModule``) built for
    ``arch`` (None: the default target, ``gpudsl.targets.DEFAULT_TARGET``)."""
    from .. import targets
    from ..runtime.nvrtc import compile_cubin

    arch = arch or targets.DEFAULT_TARGET

    if device_name is None:
        device_name = next((d for d in ("H100", "A100") if device(d).arch == arch), "H100")
    dev = device(device_name)
    # sm_90 code with setmaxnreg or wgmma: sm_90a
    arch = arch_with(arch, getattr(module, "features", ()))
    compiled = compile_cubin(module.source, arch)
    text = disassemble(compiled.cubin, compiled.key)
    funcs = parse_sass(text)
    report = SassReport(name or next(iter(module.kernels), "?"), arch, dev)
    for kname, info in module.kernels.items():
        instrs = funcs.get(kname)
        if instrs is None:
            report.notes.append(f"{kname}: not found in the cubin")
            continue
        r = compiled.resources.get(kname)
        shared = (r.shared_bytes if r else 0) + (info.dynamic_shared_bytes or 0)
        regs = r.registers if r else None
        occ = occupancy(dev, info.threads_per_block, regs, shared)
        report.kernels.append(KernelSass(
            kname, info.threads_per_block, regs,
            (r.spill_stores_bytes + r.spill_loads_bytes) if r else None, shared, occ,
            kernel_figures(instrs)))
    return report


__all__ = ["sass_report", "SassReport", "KernelSass", "figure_row"]
