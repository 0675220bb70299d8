"""The machine code of a kernel, read without a GPU: NVRTC builds a cubin for an sm
target, ``nvdisasm`` (the ``nvidia-cuda-nvdisasm`` wheel, extra ``gpudsl[sass]``)
disassembles it with line information, and this module counts, per kernel and per
loop (a backward ``BRA``: the range [target, branch]):

- instructions by class (FFMA, HMMA, other FP, integer, LDG/LDS/STS/STG by width,
  LDGSTS, BAR, SHFL, branches, the rest);
- the distance, in instructions, from each global load to the first instruction that
  reads its destination registers, and the most global loads (and their bytes) in
  flight at once in one thread: issued and not yet used, in program order;
- the source lines (``#line`` directives of the proc) the loop's instructions carry.

The figures are static: program order within a loop, one pass (a load used only in the
next iteration is found by wrapping around the back edge).  Predicated instructions
count as executed; subroutines reached by ``CALL`` (the slow paths of division and
math functions, taken for rare operands) are left out.  ``sass_report`` adds ptxas' registers and spills and the
occupancy on a device table; ``Kernel.sass()`` and ``gpudsl perf --sass`` show it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from ..errors import Error

EXTRA_HINT = "pip install 'gpudsl[sass]' (the nvidia-cuda-nvdisasm and nvidia-cuda-cuobjdump wheels)"

# ------------------------------------------------------------------ the tool


def nvdisasm_path() -> str | None:
    """The ``nvdisasm`` of the CUDA 13 wheel, else one on ``PATH``, else None."""
    try:
        import nvidia.cu13 as cu13

        for root in cu13.__path__:
            cand = os.path.join(root, "bin", "nvdisasm")
            if os.access(cand, os.X_OK):
                return cand
    except ImportError:
        pass
    return shutil.which("nvdisasm")


def have_disassembler() -> bool:
    return nvdisasm_path() is not None


def disassemble(cubin: bytes, key: str = "") -> str:
    """The SASS text of ``cubin`` with line information (``nvdisasm -c -g``); with the
    compiled unit's cache ``key`` (``CubinResult.key``) the text is kept in gpudsl's
    disk cache next to the cubin."""
    cache = None
    if key:
        from ..runtime.artifact_cache import cache_key, default_cache

        cache = default_cache()
        # an entry of its own (the cubin's key holds the cubin's metadata)
        key = cache_key(key, "sass", "", ("-c", "-g"), nvdisasm_path() or "")
        hit = cache.lookup(key, "sass")
        if hit is not None:
            try:
                return hit[0].decode()
            except UnicodeDecodeError:
                pass
    text = _disassemble(cubin)
    if cache is not None:
        cache.try_put(key, "sass", text.encode())
    return text


def _disassemble(cubin: bytes) -> str:
    tool = nvdisasm_path()
    if tool is None:
        raise Error("reading machine code needs nvdisasm, which is not installed",
                    hint=EXTRA_HINT)
    with tempfile.TemporaryDirectory(prefix="gpudsl-sass-") as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        r = subprocess.run([tool, "-c", "-g", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise Error(f"nvdisasm failed: {r.stderr.strip()[:400]}")
    return r.stdout


# ------------------------------------------------------------------ parsing


@dataclass
class Instr:
    addr: int
    pred: str  # "@P0", "@!P1" or ""
    op: str  # the full opcode, e.g. "LDG.E.128.CONSTANT"
    operands: list
    file: str = ""
    line: int = 0
    target: int | None = None  # a branch's target address

    @property
    def base(self) -> str:
        return self.op.split(".", 1)[0]


_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)\s*(.*?)\s*;")
_FILE = re.compile(r'//## File "([^"]*)", line (\d+)')
_FUNC = re.compile(r"^\s*//-+ \.text\.(\S+)\s+-+")
_LABEL = re.compile(r"^((?:\.L_|\$)[\w$.]+):")
_REG = re.compile(r"(?<![A-Za-z_])R(\d+)(\.64)?\b")


def _split_operands(text: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_sass(text: str) -> dict:
    """``{kernel name: [Instr]}`` from nvdisasm's output (branch targets as addresses)."""
    funcs: dict = {}
    all_labels: dict = {}
    cur, labels, pending = None, {}, []
    file, line = "", 0
    for raw in text.splitlines():
        m = _FUNC.match(raw)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            labels = all_labels.setdefault(m.group(1), {})
            pending, file, line = [], "", 0
            continue
        if cur is None:
            continue
        m = _FILE.search(raw)
        if m:
            file, line = m.group(1), int(m.group(2))
            continue
        m = _LABEL.match(raw.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = _INSTR.search(raw)
        if m:
            ins = Instr(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3),
                        _split_operands(m.group(4)), file, line)
            for lb in pending:
                labels[lb] = ins.addr
            pending = []
            if ins.base in ("BRA", "BRX", "JMP", "CALL"):
                t = re.search(r"\(((?:\.L_|\$)[\w$.]+)\)", m.group(4))
                if t:
                    ins.target = t.group(1)  # a label until resolved below
            cur.append(ins)
    for name, instrs in funcs.items():
        for ins in instrs:
            if isinstance(ins.target, str):
                ins.target = all_labels[name].get(ins.target)
    return funcs


def opcode_counts(text: str, full: bool = False) -> "Counter":
    """How many instructions of each base opcode (``"HGMMA"``, ``"UTMALDG"``; ``full``:
    each whole opcode, ``"HGMMA.64x256x16.F32"``) the SASS ``text`` holds, over all its
    kernels, predicated ones included; ``"DEPBAR"`` counts the warpgroup MMA waits
    (``WARPGROUP.DEPBAR``) besides."""
    from collections import Counter

    ops = Counter()
    for instrs in parse_sass(text).values():
        for ins in instrs:
            ops[ins.op if full else ins.base] += 1
            ops["DEPBAR"] += ins.op.startswith("WARPGROUP.DEPBAR")
    return ops


# ------------------------------------------------------------------ classes

_INT = {"IMAD", "IADD3", "IADD", "LEA", "SHF", "LOP3", "ISETP", "IMNMX", "IABS", "SEL", "PRMT",
        "POPC", "FLO", "BMSK", "SGXT", "UIADD3", "UIMAD", "ULEA", "USHF", "ULOP3", "UISETP",
        "USEL", "UPRMT", "IMUL", "ISCADD", "VIADD", "UMOV", "MOV", "VIMNMX"}
_FP = {"FADD", "FMUL", "FMNMX", "MUFU", "FSETP", "FSEL", "FCHK", "FRND", "F2F", "I2F", "F2I",
       "FSET", "DADD", "DMUL", "DFMA", "HADD2", "HMUL2", "HFMA2", "FFMA2", "FADD2", "FMUL2"}
_NO_DEST = {"STG", "STS", "ST", "STL", "RED", "BAR", "BRA", "EXIT", "RET", "CALL", "NOP",
            "MEMBAR", "DEPBAR", "LDGSTS", "WARPSYNC", "BSYNC", "BSSY", "YIELD", "ERRBAR",
            "LDGDEPBAR", "ARRIVES", "SYNCS", "STAS", "UTMASTG", "UTMALDG", "UBLKCP"}


_WIDTHS = {"128": 128, "64": 64, "32": 32, "U8": 8, "S8": 8, "U16": 16, "S16": 16}


def _width(op: str) -> int:
    """The access width in bits of a load or store opcode (32 unless it says)."""
    for part in op.split(".")[1:]:
        if part in _WIDTHS:
            return _WIDTHS[part]
    return 32


def klass(ins: Instr) -> str:
    """The class an instruction counts in (``LDG.128``, ``FFMA``, ``int``...)."""
    b = ins.base
    if b in ("LDG", "LDS", "STS", "STG", "LD", "ST"):
        w = _width(ins.op)
        return b if w == 32 else f"{b}.{w}"
    if b in ("FFMA", "HMMA", "SHFL", "LDGSTS", "LDSM", "DEPBAR", "MUFU"):
        return b
    if b == "BAR":
        return "BAR"
    if b in _INT:
        return "int"
    if b in _FP:
        return "fp"
    if b in ("BRA", "EXIT", "BSSY", "BSYNC", "RET", "CALL", "WARPSYNC"):
        return "branch"
    if b in ("LDL", "STL"):
        return "local"
    return "other"


def flops(ins: Instr) -> int:
    """Floating-point operations one thread's instruction does (FMA = 2)."""
    b = ins.base
    if b == "FFMA":
        return 2
    if b in ("FADD", "FMUL"):
        return 1
    if b == "HMMA":  # warp-wide m x n x k, shared by 32 threads
        m = re.search(r"HMMA\.(\d)(\d)(\d+)", ins.op)
        if m:
            mm, nn, kk = {"1688": (16, 8, 8), "16816": (16, 8, 16), "884": (8, 8, 4)}.get(
                m.group(1) + m.group(2) + m.group(3), (16, 8, 8))
            return 2 * mm * nn * kk // 32
    return 0


def is_global_load(ins: Instr) -> bool:
    return ins.base in ("LDG", "LD")


def global_bytes(ins: Instr) -> int:
    """Bytes one thread moves to or from global memory with this instruction."""
    if ins.base in ("LDG", "STG", "LD", "ST", "LDGSTS", "RED", "ATOMG"):
        return _width(ins.op) // 8
    return 0


def shared_bytes(ins: Instr) -> int:
    """Bytes one thread moves to or from shared memory with this instruction."""
    if ins.base in ("LDS", "STS", "LDGSTS", "ATOMS"):
        return _width(ins.op) // 8
    if ins.base == "LDSM":  # ldmatrix: .x1/.x2/.x4 8x8 b16 matrices per warp
        m = re.search(r"\.M88\.(\d)", ins.op)
        return 4 * int(m.group(1)) if m else 16
    return 0


def _regs(text: str) -> set:
    out = set()
    for m in _REG.finditer(text):
        n = int(m.group(1))
        out.add(n)
        if m.group(2):
            out.add(n + 1)
    return out


def sources(ins: Instr) -> set:
    ops = ins.operands if ins.base in _NO_DEST else ins.operands[1:]
    regs = set()
    for o in ops:
        regs |= _regs(o)
    if ".WIDE" in ins.op and ops:  # the addend of a wide multiply is a register pair
        last = _regs(ops[-1])
        regs |= {r + 1 for r in last}
    return regs


def dests(ins: Instr) -> set:
    if ins.base in _NO_DEST or not ins.operands:
        return set()
    d = ins.operands[0]
    regs = _regs(d)
    if regs and (ins.base in ("LDG", "LDS", "LD", "LDL", "LDSM") or ".WIDE" in ins.op
                 or ins.base == "HMMA"):
        n = min(regs)
        width = _width(ins.op) // 32 if ins.base != "HMMA" else 4
        if ".WIDE" in ins.op:
            width = 2
        regs = set(range(n, n + max(width, 1)))
    return regs


# ------------------------------------------------------------------ figures


@dataclass
class LoadUse:
    addr: int
    op: str
    distance: int | None  # instructions between the load and its first use; None: none
    line: int = 0


@dataclass
class LoopFigures:
    """One loop of a kernel (or the whole kernel: ``start`` = its first address)."""

    start: int
    end: int
    depth: int
    instructions: int
    counts: dict  # class -> count
    flops: int  # per thread per iteration
    global_bytes: int  # per thread per iteration (loads, stores, async copies)
    loads: list = field(default_factory=list)  # [LoadUse]
    loads_in_flight: int = 0
    bytes_in_flight: int = 0
    lines: tuple = ()  # (file, first line, last line) of the proc's source
    shared_bytes: int = 0  # per thread per iteration (LDS, STS, LDGSTS, LDSM)

    def count(self, *classes) -> int:
        return sum(self.counts.get(c, 0) for c in classes)

    @property
    def label(self) -> str:
        if self.depth < 0:
            return "kernel"
        return f"loop {self.start:#06x}-{self.end:#06x}" if self.depth == 0 else \
            "  " * self.depth + f"loop {self.start:#06x}-{self.end:#06x}"

    @property
    def source(self) -> str:
        if not self.lines:
            return ""
        f, a, b = self.lines
        name = f.rsplit("/", 1)[-1]
        return f"{name}:{a}" + (f"-{b}" if b != a else "")


def _in_flight(body: list, wrap: bool):
    """(loads, max loads in flight, max bytes in flight) over the instructions ``body``
    in program order; with ``wrap`` a load's use may come after the back edge."""
    loads, intervals = [], []
    n = len(body)
    for i, ins in enumerate(body):
        if not is_global_load(ins):
            continue
        pending = dests(ins)
        dist = None
        order = list(range(i + 1, n)) + (list(range(0, i + 1)) if wrap else [])
        for step, j in enumerate(order):
            other = body[j]
            if sources(other) & pending:
                dist = step
                break
            pending -= dests(other)
            if not pending:
                break
        loads.append(LoadUse(ins.addr, ins.op, dist, ins.line))
        end = i + 1 + dist if dist is not None else n
        intervals.append((i, end, global_bytes(ins)))
    best_n = best_b = 0
    for x in range(n):
        live = [b for (s, e, b) in intervals if s <= x < e]
        best_n = max(best_n, len(live))
        best_b = max(best_b, sum(live))
    an, ab = _async_in_flight(body)
    return loads, best_n + an, best_b + ab


def _async_in_flight(body: list) -> tuple:
    """(copies, bytes) of the asynchronous copies (LDGSTS) in flight: a wait that lets
    ``N`` groups stay pending (``DEPBAR.LE SB0, N``) keeps ``N + 1`` groups of the
    copies of ``body`` in flight (``N = 0`` where no wait is seen)."""
    copies = [ins for ins in body if ins.base == "LDGSTS"]
    if not copies:
        return 0, 0
    depths = []
    for ins in body:
        if ins.base == "DEPBAR" and ins.operands and "SB0" in ins.operands[0]:
            try:
                depths.append(int(ins.operands[-1], 0))
            except ValueError:
                pass
    groups = min(depths) + 1 if depths else 1
    return len(copies) * groups, sum(global_bytes(ins) for ins in copies) * groups


def _lines(body: list, proc_file: str | None) -> tuple:
    files: dict = {}
    for ins in body:
        if ins.line and ins.file and not ins.file.endswith(".cu"):
            files.setdefault(ins.file, []).append(ins.line)
    if not files:
        return ()
    f = proc_file if proc_file in files else max(files, key=lambda k: len(files[k]))
    return (f, min(files[f]), max(files[f]))


def figures(body: list, depth: int, wrap: bool, proc_file: str | None = None) -> LoopFigures:
    counts: dict = {}
    for ins in body:
        k = klass(ins)
        counts[k] = counts.get(k, 0) + 1
    loads, n, b = _in_flight(body, wrap)
    return LoopFigures(body[0].addr if body else 0, body[-1].addr if body else 0, depth,
                       len(body), counts, sum(flops(i) for i in body),
                       sum(global_bytes(i) for i in body), loads, n, b,
                       _lines(body, proc_file), sum(shared_bytes(i) for i in body))


def loops(instrs: list) -> list:
    """The loops of one kernel: [(start, end)] of each backward branch, outermost first."""
    out = set()
    for ins in instrs:
        if ins.target is not None and ins.target < ins.addr:
            out.add((ins.target, ins.addr))
    return sorted(out, key=lambda r: (r[0], -r[1]))


def subroutines(instrs: list) -> list:
    """[(start, end)] of the code reached by ``CALL`` (the slow paths of division and
    math functions, for rare operands): from the call's target to the next ``RET``."""
    out = []
    for t in sorted({i.target for i in instrs if i.base == "CALL" and i.target is not None}):
        end = next((i.addr for i in instrs if i.addr >= t and i.base == "RET"), None)
        if end is not None:
            out.append((t, end))
    return out


def kernel_figures(instrs: list) -> list:
    """[the whole kernel (depth -1), each loop (depth = loops around it)]; the
    subroutines reached by ``CALL`` are left out (``subroutines``)."""
    subs = subroutines(instrs)
    body = [i for i in instrs if not (i.base == "BRA" and i.target == i.addr) and i.op != "NOP"
            and not any(s <= i.addr <= e for s, e in subs)]
    out = [figures(body, -1, False)]
    ranges = loops(body)
    for s, e in ranges:
        depth = sum(1 for (s2, e2) in ranges if (s2, e2) != (s, e) and s2 <= s and e <= e2)
        out.append(figures([i for i in body if s <= i.addr <= e], depth, True))
    return out


def hot_loop(figs: list):
    """The loop that carries the work: among the innermost loops that do floating-point
    work or access global memory, the one with the most FLOPs per iteration, else the
    most global bytes; None when there is no such loop."""
    cands = [f for f in figs[1:] if f.flops or f.global_bytes]
    if not cands:
        return None
    inner = [f for f in cands
             if not any(g is not f and f.start <= g.start and g.end <= f.end for g in cands)]
    return max(inner, key=lambda f: (f.flops > 0, f.flops, f.global_bytes, f.depth))


__all__ = ["disassemble", "parse_sass", "opcode_counts", "kernel_figures", "hot_loop", "LoopFigures",
           "LoadUse", "Instr", "klass", "have_disassembler", "nvdisasm_path", "EXTRA_HINT"]
