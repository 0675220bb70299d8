"""What ``autotune.tune`` returns: the winner, the table of every configuration with its
fraction of the device's roofline, a plot, and the winning schedule as source."""
from __future__ import annotations

import json
import math

from ..errors import Error
from . import pipeline as pl
from .space import Config


class Best:
    """The winner: ``config``, ``time_ms``, ``record`` and the built ``proc``."""

    def __init__(self, build, record: dict):
        self._build = build
        self.record = record
        self.config = Config(record["params"])
        self.time_ms = record["median_ms"]

    @property
    def proc(self):
        return self._build(self.config)

    def __repr__(self):
        return f"Best({dict(self.config)}, {self.time_ms:.4g} ms)"


def roofline_peak(device, unit: str | None) -> float | None:
    """The device's peak in the record's unit (GFLOP/s: FP32; GB/s: HBM), or None."""
    if device is None or unit not in ("GFLOP/s", "GB/s"):
        return None
    from ..perf.devices import device as lookup

    try:
        dev = lookup(device)
    except Exception:
        return None
    return (dev.fp32_flops if unit == "GFLOP/s" else dev.bandwidth) / 1e9


class Result:
    def __init__(self, build, task, records, best, target, env, shapes, emulated):
        self._build = build
        self.task = task
        self.records = records          # one dict per configuration tried, in trial order
        self.best = best                # None when no configuration ran correctly
        self.target = target
        self.env = env
        self.shapes = shapes
        self.emulated = emulated
        #: configurations another process held when the wait for them ended (unmeasured)
        self.missing: list[dict] = []

    def counts(self) -> dict:
        out: dict[str, int] = {}
        for r in self.records:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out

    def roofline(self, rec: dict, device=None) -> float | None:
        """``rec``'s rate as a fraction of the device's peak (FP32 FLOP/s for GFLOP/s,
        HBM bandwidth for GB/s).  ``device``: a name of ``gpudsl.perf.devices``; default
        the tuned device (none for emulated times, which say nothing about a GPU)."""
        if device is None and not self.emulated:
            device = self.env.get("device")
        peak = roofline_peak(device, rec.get("unit"))
        if not peak or not rec.get("rate"):
            return None
        return rec["rate"] / peak

    def table(self, device=None) -> str:
        """Every configuration with status, time, rate and fraction of the roofline
        (emulated times are labelled; ``device`` names the peak to compare with)."""
        names = list(self.records[0]["params"]) if self.records else []
        head = names + ["status", "median ms", "spread", "rate", "roofline", "note"]
        rows = []
        for r in sorted(self.records, key=lambda r: (r["status"] != pl.OK,
                                                     r.get("median_ms") or math.inf)):
            med = r.get("median_ms")
            frac = self.roofline(r, device)
            rows.append([str(r["params"].get(n)) for n in names] + [
                r["status"] + (" (cached)" if r.get("cached") else ""),
                f"{med:.4g}" if med is not None else "-",
                f"{r['spread_ms']:.2g}" if r.get("spread_ms") is not None else "-",
                f"{r['rate']:.3g} {r['unit']}" if r.get("rate") else "-",
                f"{100 * frac:.2g}%" if frac is not None else "-",
                (r.get("error") or "")[:60].replace("\n", " ")])
        widths = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h)
                  for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        label = "EMULATED times (CPU emulator: for testing the tuner, not performance)" \
            if self.emulated else f"device {self.env.get('device')}"
        if device is not None:
            label += f"; roofline of {device}"
        return f"{self.task} on {label}\n" + "\n".join(lines)

    def __str__(self):
        return self.table()

    def plot(self, ax=None):
        """A bar chart of the correct configurations' median times with their spread
        (needs matplotlib: ``pip install 'gpudsl[plot]'``)."""
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise Error("Result.plot needs matplotlib", None,
                        "pip install 'gpudsl[plot]'") from None
        ok = sorted((r for r in self.records if r["status"] == pl.OK),
                    key=lambda r: r["median_ms"])
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 0.3 * len(ok) + 1.5))
        ax.barh([json.dumps(r["params"]) for r in ok], [r["median_ms"] for r in ok],
                xerr=[r.get("spread_ms") or 0 for r in ok])
        ax.invert_yaxis()
        ax.set_xlabel("median ms" + (" (EMULATED)" if self.emulated else ""))
        ax.set_title(f"{self.task}: {len(ok)} correct of {len(self.records)}")
        return ax

    def source(self) -> str:
        """The winning schedule as Python source to check in."""
        if self.best is None:
            raise Error(f"autotune: no configuration of {self.task} ran correctly")
        mod = getattr(self._build, "__module__", None) or "your_module"
        name = getattr(self._build, "__qualname__", None) or type(self._build).__name__
        build_expr = name
        if not hasattr(self._build, "__qualname__"):  # an instance: show its constructor
            build_expr = repr(self._build)
        proc_text = "\n".join("# " + ln for ln in str(self.best.proc).splitlines())
        return (f"# gpudsl autotune winner for {self.task}, shapes {self.shapes}\n"
                f"# on {json.dumps(self.env, sort_keys=True)}: {self.best.time_ms:.4g} ms"
                f"{' (emulated)' if self.emulated else ''}\n"
                f"from {mod} import {name.split('.')[0]}\n\n"
                f"CONFIG = {dict(self.best.config)!r}\n"
                f"proc = {build_expr}(CONFIG)\n\n# the winning proc:\n{proc_text}\n")
