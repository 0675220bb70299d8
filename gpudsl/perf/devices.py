"""Device tables for the performance report (docs/performance.md): the figures occupancy and
the roofline need.  Peak figures are the vendors' published ones (FP32 on CUDA
cores, HBM bandwidth); ``copy_bandwidth`` is what a device-to-device copy reaches
(notes/performance.md: ~3.0 TB/s measured on H100; H200 scaled by 4.8/3.35).
The tensor-core peaks are the dense (no sparsity) TF32 and FP16/BF16 figures of the
vendors' data sheets (H100/H200 SXM: 494.7 and 989.4 TFLOP/s; A100: 156 and 312).
The clock is the boost clock the FP32 peak is computed from (H100: 132 SMs x 128
lanes x 2 x 1.98 GHz = 66.9 TFLOP/s)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Error
from ..targets import Target, target


@dataclass(frozen=True)
class Device:
    """One GPU product: its SM count, peaks and clocks; its architecture's limits
    (registers, threads, blocks and shared memory per SM and per block) come from the
    ``gpudsl.targets`` description named by ``arch``."""

    name: str
    arch: str
    sms: int
    fp32_flops: float  # FLOP/s, FMA counted as 2
    bandwidth: float  # bytes/s, HBM peak
    copy_bandwidth: float  # bytes/s a device-to-device copy reaches
    # the issue-slot and loads-in-flight terms of the model (perf/perf_model.py): boost
    # clock, warp schedulers per SM (one instruction per clock each), and the DRAM
    # latency under load (notes/machine-code.md: 500-900 ns; the central figure)
    clock_hz: float = 1.98e9
    schedulers: int = 4
    dram_latency_s: float = 700e-9
    shared_bytes_per_clock: int = 128  # per SM: 32 banks x 4 B
    tf32_flops: float | None = None  # dense tensor-core peaks, FLOP/s
    half_flops: float | None = None  # f16/bf16 inputs, f32 accumulate

    @property
    def target(self) -> Target:
        return target(self.arch)

    regs_per_sm = property(lambda self: self.target.registers_per_sm)
    max_regs_per_thread = property(lambda self: self.target.max_registers_per_thread)
    reg_alloc_unit = property(lambda self: self.target.register_alloc_unit)
    max_threads_per_sm = property(lambda self: self.target.max_threads_per_sm)
    max_blocks_per_sm = property(lambda self: self.target.max_blocks_per_sm)
    shared_per_sm = property(lambda self: self.target.shared_per_sm)
    shared_per_block = property(lambda self: self.target.max_shared_bytes)
    shared_reserved_per_block = property(lambda self: self.target.shared_reserved_per_block)
    max_warps_per_sm = property(lambda self: self.target.max_warps_per_sm)


DEVICES = {
    "H100": Device("H100 SXM 80GB", "sm_90", 132, 66.9e12, 3.35e12, 3.0e12,
                   tf32_flops=494.7e12, half_flops=989.4e12),
    "H200": Device("H200 SXM 141GB", "sm_90", 132, 66.9e12, 4.8e12, 4.3e12,
                   tf32_flops=494.7e12, half_flops=989.4e12),
    "A100": Device("A100 SXM 80GB", "sm_80", 108, 19.5e12, 2.039e12, 1.8e12,
                   clock_hz=1.41e9, tf32_flops=156e12, half_flops=312e12),
}


def device(name: "str | Device") -> Device:
    """The table of a named device (``"H100"``, ``"H200"``, ``"A100"``)."""
    if isinstance(name, Device):
        return name
    key = str(name).upper().replace("NVIDIA", "").strip().split()[0] if name else "H100"
    if key not in DEVICES:
        raise Error(f"unknown device {name!r} for the performance report",
                    hint="devices: " + ", ".join(DEVICES))
    return DEVICES[key]


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    fraction: float  # resident warps / the SM's maximum
    limited_by: str  # "threads", "registers", "shared", "blocks"

    def __str__(self):
        return f"{self.fraction:.0%} ({self.blocks_per_sm} blocks/SM, {self.limited_by})"


def occupancy(dev: Device, threads: int, registers: int | None, shared_bytes: int) -> Occupancy:
    """Resident blocks and warps per SM, as the CUDA occupancy calculator computes them."""
    warps = -(-threads // 32)
    limits = {"threads": dev.max_warps_per_sm // warps if warps else 0,
              "blocks": dev.max_blocks_per_sm}
    if registers:
        per_warp = -(-registers * 32 // dev.reg_alloc_unit) * dev.reg_alloc_unit
        limits["registers"] = (dev.regs_per_sm // per_warp) // warps
    if shared_bytes:
        need = shared_bytes + dev.shared_reserved_per_block
        limits["shared"] = dev.shared_per_sm // need if shared_bytes <= dev.shared_per_block else 0
    by = min(limits, key=lambda k: (limits[k], k != "threads"))
    blocks = limits[by]
    return Occupancy(blocks, blocks * warps, blocks * warps / dev.max_warps_per_sm, by)
