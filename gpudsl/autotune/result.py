"""What ``autotune.tune`` returns: the winner, the table of every configuration with its
fraction of the device's roofline, a plot, and the winning schedule as source."""
from __future__ import annotations

import json
import math

from ..errors import Error
from ..proc import Proc
from . import candidate_pipeline as pl
from .space import Config


def _deciding(rec: dict):
    """The figure that ranks ``rec`` (its re-timed median, else its median)."""
    if rec.get("retimed_ms") is not None:
        return rec["retimed_ms"]
    return rec.get("median_ms")


class Best:
    """The winner: ``config``, ``time_ms`` (the figure that picked it: the re-timed
    median when it was re-timed), ``record`` and the built ``proc``."""

    def __init__(self, build, record: dict):
        self._build = build
        self.record = record
        self.config = Config(record["params"])
        self.time_ms = _deciding(record)

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
    def __init__(self, build, task, records, best, backend, env, shapes, emulated):
        self._build = build
        self.task = task
        self.records = records          # one dict per configuration tried, in trial order
        self.best = best                # None when no configuration ran correctly
        self.backend = backend          # where the candidates ran: "cuda" / "emulator"
        self.env = env
        self.shapes = shapes
        self.emulated = emulated
        #: configurations another process held when the wait for them ended (unmeasured)
        self.missing: list[dict] = []

    @property
    def target(self) -> str:
        """Deprecated: ``backend`` (a target is an architecture now)."""
        import warnings

        warnings.warn("Result.target is deprecated: it names the backend; use "
                      "Result.backend", DeprecationWarning, stacklevel=2)
        return self.backend

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

    def _rows(self, device=None) -> tuple[list[str], list[list[str]]]:
        """The table's header and rows: the winner first, then the correct
        configurations by the figure that ranks them (re-timed median, else median),
        then the others."""
        names = list(self.records[0]["params"]) if self.records else []
        head = names + ["status", "median ms", "re-timed ms", "spread", "rate", "roofline",
                        "note"]
        rows = []
        for r in sorted(self.records, key=lambda r: (r["status"] != pl.OK,
                                                     not r.get("winner"),
                                                     _deciding(r) or math.inf)):
            med, again = r.get("median_ms"), r.get("retimed_ms")
            spread = r.get("retimed_spread_ms") if again is not None else r.get("spread_ms")
            frac = self.roofline(r, device)
            status = r["status"] + (" (cached)" if r.get("cached") else "")
            rows.append([str(r["params"].get(n)) for n in names] + [
                "WINNER " + status if r.get("winner") else status,
                f"{med:.4g}" if med is not None else "-",
                f"{again:.4g}" if again is not None else "-",
                f"{spread:.2g}" if spread is not None else "-",
                f"{r['rate']:.3g} {r['unit']}" if r.get("rate") else "-",
                f"{100 * frac:.2g}%" if frac is not None else "-",
                (r.get("error") or "")[:60].replace("\n", " ")])
        return head, rows

    def _label(self, device=None) -> str:
        label = "EMULATED times (CPU emulator: for testing the tuner, not performance)" \
            if self.emulated else f"device {self.env.get('device')}"
        if device is not None:
            label += f"; roofline of {device}"
        return f"{self.task} on {label}"

    def winner_line(self) -> str:
        """What picked the winner, in one line (the same figures as the table)."""
        if self.best is None:
            return "no configuration ran correctly"
        how = "re-timed median" if self.best.record.get("retimed_ms") is not None \
            else "median"
        return (f"winner: {dict(self.best.config)} {self.best.time_ms:.4g} ms ({how}"
                f"{', emulated' if self.emulated else ''}); the fastest few are re-timed "
                "interleaved, and among those within 2% of the fastest the simplest wins")

    def table(self, device=None) -> str:
        """Every configuration with status, time, rate and fraction of the roofline
        (emulated times are labelled; ``device`` names the peak to compare with): the
        winner first, then by the figure that ranks them; the re-timed column is the
        median of all of a configuration's times, the interleaved re-timing included."""
        head, rows = self._rows(device)
        widths = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h)
                  for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        return f"{self._label(device)}\n" + "\n".join(lines) + "\n" + self.winner_line()

    def _repr_html_(self) -> str:
        """The table as HTML (a notebook shows it)."""
        import html

        head, rows = self._rows()
        cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        body = "".join(
            "<tr" + (' style="font-weight:bold"' if row[len(head) - 7].startswith("WINNER")
                     else "") + ">" + "".join(f"<td>{html.escape(c)}</td>" for c in row) +
            "</tr>" for row in rows)
        return (f"<div><p>{html.escape(self._label())}</p><table><thead><tr>{cells}</tr>"
                f"</thead><tbody>{body}</tbody></table><p>{html.escape(self.winner_line())}"
                "</p></div>")

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
        """The winning schedule as Python source to check in: it imports the build
        function from its module, or, when that was ``__main__`` (a script, a notebook),
        carries the function's own source and what it uses; ``proc`` is then the
        winning proc, in a fresh process."""
        if self.best is None:
            raise Error(f"autotune: no configuration of {self.task} ran correctly")
        header, expr = build_source(self._build)
        proc_text = "\n".join("# " + ln for ln in str(self.best.proc).splitlines())
        return (f"# gpudsl autotune winner for {self.task}, shapes {self.shapes}\n"
                f"# on {json.dumps(self.env, sort_keys=True)}: {self.best.time_ms:.4g} ms"
                f"{' (emulated)' if self.emulated else ''}\n"
                f"{header}\n"
                "from gpudsl.autotune import Config\n\n"
                f"CONFIG = Config({dict(self.best.config)!r})\n"
                f"proc = {expr}(CONFIG)\n\n# the winning proc:\n{proc_text}\n")


def _importable(obj) -> str | None:
    """``obj``'s module when ``from module import name`` finds it there, else None."""
    import importlib

    mod = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", "")
    if not mod or mod == "__main__" or "<" in name or "." in name:
        return None
    try:
        return mod if getattr(importlib.import_module(mod), name, None) is obj else None
    except Exception:
        return None


def _literal(value) -> bool:
    """Whether ``repr(value)`` is a literal that evaluates back to ``value``."""
    import ast

    try:
        return ast.literal_eval(repr(value)) == value
    except Exception:
        return False


def _public_name(name: str, value) -> str | None:
    """The public gpudsl module that exports ``value`` as ``name``, if one does."""
    import importlib

    for mod in ("gpudsl", "gpudsl.schedule", "gpudsl.autotune", "gpudsl.graph"):
        m = importlib.import_module(mod)
        if name in getattr(m, "__all__", ()) and getattr(m, name, None) is value:
            return mod
    return None


def build_source(build) -> tuple[str, str]:
    """(lines that define what ``build`` needs, an expression for ``build``) for a fresh
    process: an import where ``build`` (or its class) lives in an importable module,
    else the function's source with the imports and helpers it uses."""
    import types

    if not isinstance(build, (types.FunctionType, type)):  # a callable object
        return _object_source(build)
    mod = _importable(build)
    if mod is not None:
        return f"from {mod} import {build.__name__}\n", build.__name__
    src = _ScriptSource()
    src.need(build)
    return src.text(), build.__name__


def _object_source(build) -> tuple[str, str]:
    """A callable object: an import of its class and its repr, where that rebuilds it."""
    cls = type(build)
    mod = _importable(cls)
    text = repr(build)
    if mod is not None:
        try:
            ok = type(eval(text, {cls.__name__: cls})) is cls  # noqa: S307
        except Exception:
            ok = False
        if ok:
            return f"from {mod} import {cls.__name__}\n", text
    raise Error(f"autotune: cannot write source that rebuilds {text}", None,
                "pass a function or an object of an importable class whose repr "
                "rebuilds it")


class _ScriptSource:
    """The source of functions of a script that no module exports: the import and
    assignment lines (``lines``) and the definitions (``defs``) that :meth:`need` finds
    they use, each written once (``done``: the names written)."""

    def __init__(self):
        self.lines: list[str] = []
        self.defs: list[str] = []
        self.done: set[str] = set()

    def need(self, fn) -> None:
        """The imports and definitions the function ``fn`` uses, then its source."""
        if fn.__name__ in self.done:
            return
        self.done.add(fn.__name__)
        for name in sorted(_names_used(fn)):
            if name not in fn.__globals__ or name in self.done:
                continue
            self._global(fn, name, fn.__globals__[name])
        self.defs.append(_function_source(fn))

    def _global(self, fn, name: str, value) -> None:
        """The global ``name`` of ``fn``: an import or an assignment line, or its
        definition (a function of the script, a proc's printed source)."""
        import types

        line = _import_line(name, value)
        if line is None:
            if isinstance(value, types.FunctionType):
                self.need(value)
                return
            if isinstance(value, Proc):  # a proc of the script: its printed source
                if "from gpudsl import *" not in self.lines:
                    self.lines.insert(0, "from gpudsl import *")
                self.defs.append(str(value).rstrip("\n") + (
                    "" if value.name == name else f"\n{name} = {value.name}"))
                self.done.add(name)
                return
            if not _literal(value):
                raise Error(f"autotune: cannot write source for {fn.__name__}: it uses "
                            f"{name!r} ({type(value).__name__})", None,
                            "define the build function in a module and import it")
            line = f"{name} = {value!r}"
        self.done.add(name)
        if line not in self.lines:
            self.lines.append(line)

    def text(self) -> str:
        """The imports (sorted), the values, then the definitions."""
        body = "\n\n\n".join(d.rstrip("\n") for d in self.defs)
        imports = sorted(ln for ln in self.lines if ln.startswith(("import ", "from ")))
        values = [ln for ln in self.lines if ln not in imports]
        head = "\n".join(["from __future__ import annotations", *imports, *values])
        return f"{head}\n\n\n{body}\n\n"


def _names_used(fn) -> set[str]:
    """The global names the code of ``fn`` and of the functions nested in it uses."""
    import types

    names = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        names |= set(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def _import_line(name: str, value) -> str | None:
    """The line that imports ``value`` as ``name`` (a module, a name a public gpudsl
    module exports, an object of an importable module), or None."""
    import types

    if isinstance(value, types.ModuleType):
        real = value.__name__
        return f"import {real}" if real == name else \
            (f"from {real.rpartition('.')[0]} import {real.rpartition('.')[2]}"
             + ("" if real.rpartition('.')[2] == name else f" as {name}")
             if "." in real else f"import {real} as {name}")
    if _public_name(name, value) is not None:  # BLOCKS, f32, a primitive...
        return f"from {_public_name(name, value)} import {name}"
    if _importable(value) is not None:
        return f"from {_importable(value)} import {value.__qualname__}" + (
            "" if value.__qualname__ == name else f" as {name}")
    return None


def _function_source(fn) -> str:
    """The source of ``fn``, dedented."""
    import inspect

    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        raise Error(f"autotune: the source of {fn.__name__} is not available", None,
                    "define the build function in a module and import it") from None
    return inspect.cleandoc("\n" + src) if src.startswith((" ", "\t")) else src
