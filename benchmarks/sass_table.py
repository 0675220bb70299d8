"""The GPU-less performance table: for every standard-library kernel at its bench shape
(``gpudsl bench``'s largest), the machine code of the kernel ``gpudsl.ops`` runs (sizes
as parameters; NVRTC for sm_90, ``nvdisasm``), read per loop, and the performance
model's estimate as a fraction of copy bandwidth (bandwidth nodes) or of cuBLAS
(matmul), on the H100 table of ``gpudsl/perf/devices.py``.

    python benchmarks/sass_table.py [--out benchmarks/results/sass-table.md]
        [--docs docs/performance.md] [--nodes permute2d,...]

Needs ``pip install 'gpudsl[sass]'``.  No GPU: every figure is static (machine code
and the model), none is a measurement on a GPU.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
import time

R, C = 8192, 8192  # gpudsl.bench.GPU_SIZES[-1]
CUBE = (64, 1024, 1024)  # gpudsl.bench.GPU_CUBES[-1]
MM = 4096
CUBLAS_FP32 = 51.9e12  # shared/notes/performance.md, H100 SXM, 4096^3
CUBLAS_TF32 = 402e12
CUBLAS_F16 = 753e12  # issue 36: cuBLAS f16 4096^3 on H100 SXM (our run)
TF32_DENSE = 494.7e12  # H100 SXM dense TF32 tensor-core peak (vendor)
F16_DENSE = 989.4e12  # H100 SXM dense f16/bf16 tensor-core peak, f32 accumulate (vendor)
LATENCIES = (500e-9, 700e-9, 900e-9)  # loaded DRAM latency: low, central, high


def sizes_from_shapes(proc, shapes: dict, given: dict | None = None) -> dict:
    """Bind the proc's sizes from its arrays' shapes (as a call would, no arrays)."""
    from gpudsl.ir.binding import solve
    from gpudsl.ir.control import control_names

    env = dict(given or {})
    dims = [(d, shapes[p.name][i]) for p in proc.ir.params if p.name in shapes
            for i, d in enumerate(p.shape)]
    progress = True
    while progress:
        progress = False
        for d, actual in dims:
            free = sorted(control_names(d) - set(env))
            if len(free) == 1:
                v = solve(d, free[0], actual, env)
                if v is not None:
                    env[free[0]] = v
                    progress = True
    return {p.name: env[p.name] for p in proc.ir.params if p.kind in ("size", "index")}


def cases(only=None):
    """(node, shape label, proc, bindings, reference) for each node."""
    from gpudsl.stdlib import complex as cx
    from gpudsl.stdlib import pointwise, rms_norm, slices, softmax
    from gpudsl.stdlib.matmul import options_kernel
    from gpudsl.stdlib.matmul_f16 import matmul_half_kernel
    from gpudsl.stdlib.matmul_sm80 import matmul_sm80_kernel
    from gpudsl.stdlib.matmul_tf32 import matmul_tf32_kernel
    from gpudsl.stdlib.permute import permute_kernel

    out = []

    def add(node, label, p, binds, ref, elements=R * C):
        if only is None or node in only:
            out.append((node, label, p, binds, ref, elements))

    shape2 = f"{R}x{C}"
    p, b = options_kernel((MM, MM), (MM, MM))
    add("matmul", f"{MM}^3", p, b, "cuBLAS fp32")
    p, b = matmul_tf32_kernel((MM, MM), (MM, MM))
    add("matmul_tf32", f"{MM}^3", p, b, "cuBLAS tf32")
    if only is None or "matmul_f16" in only:
        p, b = matmul_half_kernel((MM, MM), (MM, MM), "f16")
        add("matmul_f16", f"{MM}^3", p, b, "cuBLAS f16")
    if only is None or "matmul_f16_sm80" in only:
        p, b = matmul_sm80_kernel((MM, MM), (MM, MM), "f16")
        add("matmul_f16_sm80", f"{MM}^3", p, b, "cuBLAS f16")
    for op in ("add", "mul"):
        p, dims, bdims = pointwise.plan_binary(op, (R, C), (R, C))
        add(op, shape2, p, sizes_from_shapes(p, {"a": dims, "b": bdims, "out": dims}), "copy")
    p, dims, bdims = pointwise.plan_binary("add", (R, C), (R, 1))
    add("add_bcast", shape2, p, sizes_from_shapes(p, {"a": dims, "b": bdims, "out": dims}),
        "copy")
    for op in ("relu", "silu"):
        p = pointwise.plan_unary(op, R * C)
        add(op, shape2, p, sizes_from_shapes(p, {"x": (R * C,), "out": (R * C,)}), "copy")
    for node, shape, perm in (("permute2d", (R, C), (1, 0)), ("permute3d_021", CUBE, (0, 2, 1)),
                              ("permute3d_210", CUBE, (2, 1, 0))):
        p, b, _ = permute_kernel(shape, perm)
        add(node, "x".join(map(str, shape)), p, b, "copy", math.prod(shape))
    h = R // 2
    p = slices.plan_slice(C)
    add("slice", shape2, p, sizes_from_shapes(p, {"x": (R, C), "out": (h, C)},
                                              {"begin": R // 4}), "copy", h * C)
    p = slices.plan_replace_slice(C)
    add("replace_slice", shape2, p, sizes_from_shapes(p, {"x": (R, C), "r": (h, C)}), "copy",
        h * C)
    p = rms_norm.plan_rms_norm(C)
    add("rms_norm", shape2, p, sizes_from_shapes(p, {"x": (R, C), "w": (C,)}), "copy")
    p = softmax.plan_sliced_softmax(C)
    add("sliced_softmax", shape2, p, sizes_from_shapes(p, {"x": (R, C)}), "copy")
    p, ca, cb = cx.plan_complex_mul((R, C // 2, 2), (1, C // 2, 2))
    add("complex_hadamard", shape2, p, sizes_from_shapes(p, {"a": ca, "b": cb}), "copy")
    # matmul: per FMA (elements unused)
    return out


RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def gpu_runs(root: str | None = None) -> list:
    """(device, run folder, tree commit, bench results) of every committed GPU campaign
    whose timings are trustworthy: only results whose every repetition was covered by
    the spin kernel (no host time inside the events, ``covered == reps``) and that carry
    no note; the first H100 run (no ``covered`` field: host-bound timings) drops out."""
    import glob
    import json
    import re

    def order(path):  # a folder's later runs (-run2, ...) after it
        run = os.path.basename(os.path.dirname(os.path.dirname(path)))
        m = re.match(r"(.*?)(?:-run(\d+))?$", run)
        return (m.group(1), int(m.group(2) or 1), path)

    out = []
    root = root or RESULTS
    for path in sorted(glob.glob(os.path.join(root, "*", "part*", "bench.json")), key=order):
        run = os.path.basename(os.path.dirname(os.path.dirname(path)))
        with open(path) as f:
            j = json.load(f)
        readme = os.path.join(os.path.dirname(os.path.dirname(path)), "README.md")
        tree = ""
        if os.path.exists(readme):
            m = re.search(r"commit ([0-9a-f]{7,})\b", open(readme).read())
            tree = m.group(1) if m else ""
        good = [r for r in j.get("results", [])
                if r.get("status") == "ok" and r.get("ratio") is not None
                and r["timing"].get("covered") == j.get("reps") and not r["timing"]["notes"]]
        dev = j.get("device", "?").replace("NVIDIA ", "").replace(" 80GB HBM3", "")
        out.append((dev, run, tree, good))
    return out


BENCH_NODE = {"permute3d_021": None, "permute3d_210": None}  # not in the bench rows


def measured(node: str, label: str, runs) -> str:
    """The ratio each trustworthy GPU run measured for ``node`` at the bench shape
    (cold L2), the latest run per device first: ``0.69 H200 (affa7d2)``."""
    name = BENCH_NODE.get(node, node)
    if name is None:
        return "-"
    per_device = {}
    for dev, run, tree, results in runs:  # sorted by folder: later runs overwrite
        for r in results:
            if r["node"] == name and r["size"].split(" ")[0] == label and \
                    r.get("l2") in (None, "cold"):
                per_device[dev] = f"{r['ratio']:.2f} {dev} ({tree or run})"
    return "; ".join(per_device[d] for d in sorted(per_device, reverse=True)) or "-"


def _widths(f, base):
    parts = []
    for w in ("", ".128", ".64"):
        n = f.counts.get(base + w, 0)
        if n:
            parts.append(f"{n}" + (f"x{w[1:]}" if w else ""))
    return "+".join(parts) or "0"


def estimate(report, ref: str, latency: float):
    """(model time over the node's kernels at ``latency``, reference time, limiter)."""
    from gpudsl.perf.devices import device

    dev = device("H100")
    total, flops, nbytes, limiters = 0.0, 0, 0, []
    for k in report.kernels:
        mem = k.bytes / dev.copy_bandwidth  # the copy rate is what a kernel can reach
        comp = k.time_compute_s
        if k.machine and any(f.count("HMMA") for f in k.machine):
            comp = k.flops / (F16_DENSE if ref == "cuBLAS f16" else TF32_DENSE)
        terms = {"memory": mem, "compute": comp, "issue": k.time_issue_s or 0.0,
                 "shared": k.time_shared_s or 0.0,
                 "loads in flight": (k.time_mlp_s or 0.0) * latency / dev.dram_latency_s}
        lim = max(terms, key=terms.get)
        total += terms[lim] * k.launches
        limiters.append(lim)
        flops += k.flops * k.launches
        nbytes += k.bytes * k.launches
    if ref == "copy":
        want = nbytes / dev.copy_bandwidth
    else:
        want = flops / {"cuBLAS fp32": CUBLAS_FP32, "cuBLAS f16": CUBLAS_F16}.get(
            ref, CUBLAS_TF32)
    return total, want, max(set(limiters), key=limiters.count)


def row(node, label, p, binds, ref, elements, runs=()):
    from gpudsl.perf.sass import hot_loop

    rep = p.perf("H100", **binds)
    main = max(rep.kernels, key=lambda k: k.bytes + k.flops)
    figs = main.machine or []
    hot = hot_loop(figs) or (figs[0] if figs else None)
    fr = []
    for lat in LATENCIES:
        t, want, lim = estimate(rep, ref, lat)
        fr.append(min(1.0, want / t) if t else float("nan"))
    _, _, lim = estimate(rep, ref, LATENCIES[1])
    executed = sum(k.instructions or 0 for k in rep.kernels)
    per = (f"{executed / elements:.2f}/elem" if ref == "copy" else
           f"{executed / max(main.flops, 1) * 2:.3f}/FMA")
    work = hot.count("FFMA") + hot.count("HMMA")
    dists = [u.distance for u in hot.loads if u.distance is not None]
    return {
        "node": node, "shape": label, "kernel": main.name + (f" (+{len(rep.kernels) - 1})"
                                                            if len(rep.kernels) > 1 else ""),
        "loop": hot.label.strip() if hot else "-", "source": hot.source if hot else "",
        "instr": hot.instructions, "FFMA/HMMA": f"{work} ({work / hot.instructions:.0%})"
        if work else "0",
        "LDG": _widths(hot, "LDG"), "LDS": _widths(hot, "LDS"), "LDGSTS": hot.count("LDGSTS"),
        "STS": _widths(hot, "STS"), "STG": _widths(hot, "STG"), "BAR": hot.count("BAR"),
        "SHFL": hot.count("SHFL"), "int": hot.count("int"),
        "loads in flight": f"{main.loads_in_flight} ({main.bytes_in_flight} B)",
        "LDG->use": (f"{min(dists)}-{max(dists)}" if dists else "-"),
        "regs": main.registers, "spills": main.spills,
        "occupancy": f"{main.occupancy:.0%}" if main.occupancy is not None else "?",
        "executed": per, "limit": lim, "ref": ref,
        "estimate": f"{fr[1]:.2f} ({min(fr):.2f}-{max(fr):.2f})",
        "measured": measured(node, label, runs),
    }, rep


COLUMNS = ["node", "shape", "kernel", "loop", "source", "instr", "FFMA/HMMA", "LDG", "LDS",
           "LDGSTS", "STS", "STG", "BAR", "SHFL", "int", "loads in flight", "LDG->use",
           "regs", "spills", "occupancy", "executed", "limit", "ref", "estimate",
           "measured"]


DOC_COLUMNS = ["node", "shape", "instr", "FFMA/HMMA", "LDG", "LDS", "STS", "STG", "BAR", "int",
               "loads in flight", "LDG->use", "regs", "spills", "occupancy", "executed",
               "limit", "ref", "estimate", "measured"]
DOC_MARK = ("<!-- sass-table: begin (benchmarks/sass_table.py --docs) -->",
            "<!-- sass-table: end -->")


HALF_MARK = ("<!-- sass-half: begin (benchmarks/sass_table.py --docs) -->",
             "<!-- sass-half: end -->")
HALF_COLUMNS = ["kernel", "arch", "loop instr", "HMMA", "LDSM", "LDS", "LDGSTS", "LDG", "STS",
                "BAR", "int", "instr/HMMA", "regs", "spills", "shared", "occupancy"]


def half_kernels():
    """(label, proc, bindings) of the f16 GEMMs at 4096^3: today's kernel (1 stage)
    and the sm_80 multistage kernel (gpudsl/stdlib/matmul_sm80.py) in its tiles."""
    from gpudsl.stdlib.matmul_f16 import matmul_half_kernel
    from gpudsl.stdlib.matmul_sm80 import matmul_sm80_kernel

    mm = ((MM, MM), (MM, MM), "f16")
    out = [("today's: 64x128x32, 4 warps, 1 stage", *matmul_half_kernel(*mm))]
    for bn, stages in ((256, 3), (128, 4)):
        p, b = matmul_sm80_kernel(*mm, bn=bn, stages=stages)
        out.append((f"sm80: 128x{bn}x32, {bn // 32} warps of 64x64, {stages} stages", p, b))
    return out


def half_rows(archs=("sm_80", "sm_90")):
    """The machine code of the f16 GEMMs' main loop (per k tile, one warp) on each
    arch: the rows of the before/after table of docs/performance.md."""
    from gpudsl.perf.sass import hot_loop

    rows = []
    for label, p, binds in half_kernels():
        kern = p.compile("emulator", check=False)
        for arch in archs:
            (k,) = kern.sass(arch, **binds).kernels
            h = hot_loop(k.figures)
            rows.append({
                "kernel": label, "arch": arch, "loop instr": h.instructions,
                "HMMA": h.count("HMMA"), "LDSM": h.counts.get("LDSM", 0),
                "LDS": _widths(h, "LDS"), "LDGSTS": h.count("LDGSTS"), "LDG": _widths(h, "LDG"),
                "STS": _widths(h, "STS"), "BAR": h.count("BAR"), "int": h.count("int"),
                "instr/HMMA": f"{h.instructions / max(h.count('HMMA'), 1):.2f}",
                "regs": k.registers, "spills": k.spill_bytes, "shared": k.shared_bytes,
                "occupancy": str(k.occupancy).split(" (")[0] if k.occupancy else "?"})
    return rows


FP32_MARK = ("<!-- sass-fp32: begin (benchmarks/sass_table.py --docs) -->",
             "<!-- sass-fp32: end -->")
FP32_COLUMNS = ["kernel", "arch", "loop instr", "FFMA", "FFMA share", "instr/FFMA", "LDS",
                "LDG", "STS", "BAR per 1024 FFMA", "int", "LDG->use", "regs", "spills",
                "shared", "occupancy"]
# the fp32 big-tile kernel's options: today's default, then bk = 16 at 2 and 1 blocks/SM
FP32_KERNELS = (("default: 128x128x8, 2 stages, 2 blocks/SM", {}),
                ("128x128x16, 2 stages, 2 blocks/SM", {"bk": 16}),
                ("128x128x16, 2 stages, 1 block/SM", {"bk": 16, "min_blocks": 1}),
                ("128x128x16, 1 stage, 2 blocks/SM", {"bk": 16, "stages": 1}),
                ("128x128x8, 4 warps of 64x64, 8x16/thread", {"tn": 16, "wm": 64, "wn": 64}),
                ("128x128x16, 4 warps of 64x64, 8x16/thread (W64)",
                 {"tn": 16, "bk": 16, "wm": 64, "wn": 64}))


def fp32_rows(archs=("sm_90", "sm_80")):
    """The machine code of the fp32 SGEMM's main loop (per k tile, one thread) at
    4096^3 for the options of ``FP32_KERNELS`` on each arch: the rows of the table of
    docs/performance.md (issue 36)."""
    from gpudsl.perf.sass import hot_loop
    from gpudsl.stdlib.matmul import options_kernel

    rows = []
    for label, opts in FP32_KERNELS:
        p, binds = options_kernel((MM, MM), (MM, MM), **opts)
        kern = p.compile("emulator", check=False)
        for arch in archs:
            (k,) = kern.sass(arch, **binds).kernels
            h = hot_loop(k.figures)
            ff = h.count("FFMA")
            d = sorted(u.distance for u in h.loads if u.distance is not None)
            rows.append({
                "kernel": label, "arch": arch, "loop instr": h.instructions, "FFMA": ff,
                "FFMA share": f"{ff / h.instructions:.1%}",
                "instr/FFMA": f"{h.instructions / ff:.3f}", "LDS": _widths(h, "LDS"),
                "LDG": _widths(h, "LDG"), "STS": _widths(h, "STS"),
                "BAR per 1024 FFMA": f"{1024 * h.count('BAR') / ff:g}", "int": h.count("int"),
                "LDG->use": f"{d[0]}-{d[-1]}" if d else "-",
                "regs": k.registers, "spills": k.spill_bytes, "shared": k.shared_bytes,
                "occupancy": str(k.occupancy).split(" (")[0] if k.occupancy else "?"})
    return rows


HOPPER_MARK = ("<!-- sass-hopper: begin (benchmarks/sass_table.py --docs) -->",
               "<!-- sass-hopper: end -->")
HOPPER_COLUMNS = ["kernel", "instr", "HGMMA", "UTMALDG", "UTMASTG", "LDS", "LDSM", "STS",
                  "LDG", "STG", "DEPBAR", "regs", "spills", "stack"]


def hopper_kernels():
    """(label, proc) of the sm_90a kernels (wgmma, TMA, barrier rings): the derived
    GEMMs at their default tile, exact and clipped, and the attention prefill."""
    from gpudsl.stdlib.attention_sm90 import plan_prefill
    from gpudsl.stdlib.matmul_sm90 import DEFAULTS, TALL, WIDE, sm90_kernel
    from gpudsl.stdlib.matmul_sm90_nn import sm90_nn_kernel
    from gpudsl.stdlib.matmul_sm90_tf32 import sm90_tf32_kernel

    nn = {k: v for k, v in WIDE.items() if k != "swizzle"}
    out = [("a @ bt^T (TN), 128x256x64, 4 slots (producer warpgroup, setmaxnreg 40/232)",
            sm90_kernel("f16", **WIDE)),
           ("a @ bt^T (TN), 128x256x64, producer thread (257 threads)",
            sm90_kernel("f16", **WIDE, producer="thread")),
           ("a @ bt^T (TN), 256x128x64, two m64 tiles a warpgroup (setmaxnreg 40/232)",
            sm90_kernel("f16", **TALL)),
           ("a @ bt^T (TN), 64x128x64, producer thread", sm90_kernel("f16", **DEFAULTS)),
           ("a @ bt^T (TN), clipped edges", sm90_kernel("f16", **WIDE, clip=True)),
           ("a @ b (NN, MN-major B), 128x256x64", sm90_nn_kernel("f16", **nn)),
           ("a @ b (NN), clipped edges", sm90_nn_kernel("f16", **nn, clip=True)),
           ("a @ b (NN), batched, clipped", sm90_nn_kernel("f16", **nn, clip=True,
                                                          batched=True)),
           ("a @ b (NN), batched", sm90_nn_kernel("f16", **nn, batched=True)),
           ("a @ bt^T (TN), batched", sm90_kernel("f16", **WIDE, batched=True)),
           ("TF32 a @ bt^T, 128x256x32", sm90_tf32_kernel(bn=256, wgs=2)),
           ("TF32 a @ bt^T, clipped edges", sm90_tf32_kernel(bn=256, wgs=2, clip=True)),
           ("TF32 a @ bt^T, batched", sm90_tf32_kernel(bn=256, wgs=2, batched=True))]
    for d, causal in ((128, False), (128, True)):
        p = plan_prefill(4096, d, causal, heads=16, keys=4096, dt="f16", target="sm_90a")
        out.append((f"attention prefill, d {d}{', causal' if causal else ''}", p))
    return out


def hopper_rows():
    """Whole-kernel counts of the sm_90a kernels' machine code (NVRTC sm_90a): their
    main loops are not unrolled, so HGMMA / UTMALDG / DEPBAR are per ring slot."""
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin

    rows = []
    for label, p in hopper_kernels():
        r = compile_cubin(generate(p.ir, {}).source, "sm_90a")
        (res,) = r.resources.values()
        ops = sass.opcode_counts(sass.disassemble(r.cubin))
        rows.append({"kernel": label, "instr": sum(v for k, v in ops.items() if k != "DEPBAR"),
                     **{k: ops[k] for k in ("HGMMA", "UTMALDG", "UTMASTG", "LDS", "LDSM",
                                            "STS", "LDG", "STG", "DEPBAR")},
                     "regs": res.registers,
                     "spills": res.spill_stores_bytes + res.spill_loads_bytes,
                     "stack": res.stack_bytes})
    return rows


def markdown(rows, columns=COLUMNS) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join(str(r[c]).replace("|", "/") for c in columns) + " |")
    return "\n".join(out)


def update_docs(path: str, rows, half=None, fp32=None, hopper=None) -> None:
    """Replace the summary table between the markers of ``path`` (and the f16 GEMMs',
    the fp32 SGEMM's main-loop tables and the sm_90a kernels' between their own, when
    ``half`` / ``fp32`` / ``hopper`` rows are given)."""
    text = open(path).read()
    for (start, end), table in ((DOC_MARK, rows and markdown(rows, DOC_COLUMNS)),
                                (HALF_MARK, half and markdown(half, HALF_COLUMNS)),
                                (FP32_MARK, fp32 and markdown(fp32, FP32_COLUMNS)),
                                (HOPPER_MARK, hopper and markdown(hopper, HOPPER_COLUMNS))):
        if table:
            a, b = text.index(start), text.index(end)
            text = text[:a] + start + "\n" + table + "\n" + text[b:]
    with open(path, "w") as f:
        f.write(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="write the markdown table there")
    ap.add_argument("--nodes", default=None, help="comma-separated node names")
    ap.add_argument("--hopper-only", action="store_true",
                    help="only the sm_90a kernels' table (into --docs)")
    ap.add_argument("--docs", default=None, metavar="FILE.md",
                    help="also replace the summary table between the markers of FILE.md "
                    "(docs/performance.md)")
    ns = ap.parse_args(argv)
    from gpudsl.perf.sass import have_disassembler

    if not have_disassembler():
        print("sass_table: nvdisasm absent: pip install 'gpudsl[sass]'", file=sys.stderr)
        return 2
    if ns.hopper_only:
        hopper = hopper_rows()
        print(markdown(hopper, HOPPER_COLUMNS))
        if ns.docs:
            update_docs(ns.docs, [], hopper=hopper)
        return 0
    only = set(ns.nodes.split(",")) if ns.nodes else None
    rows, details = [], []
    t0 = time.time()
    runs = gpu_runs()
    for node, label, p, binds, ref, elements in cases(only):
        r, rep = row(node, label, p, binds, ref, elements, runs)
        rows.append(r)
        print(f"{node}: {r['estimate']} of {ref} ({r['limit']})", file=sys.stderr)
        details.append((node, rep))
    import gpudsl.runtime.nvrtc as nv

    head = [
        "# Machine code and model estimates of the standard library (no GPU)",
        "",
        f"Generated by `python benchmarks/sass_table.py` on "
        f"{datetime.date.today().isoformat()} ({nv.compiler_version()}, sm_90, nvdisasm; "
        f"{time.time() - t0:.0f} s). Each row: the kernel `gpudsl.ops` runs at the bench "
        "shape (sizes as parameters), its loop that carries the work (most FLOPs per "
        "iteration, else the innermost loops with global accesses), read from the SASS. "
        "LDG/LDS/STS/STG: count x width in bits (no width: 32). `loads in flight`: the "
        "most global loads one thread has issued and not yet used (program order), with "
        "their bytes. `LDG->use`: instructions from each global load to its first use. "
        "`executed`: the model's executed instructions (all threads, all kernels of the "
        "node) per output element, or per FMA (matmul). `estimate`: the model's time against the reference "
        "(a device copy of the same bytes at 3.0 TB/s; cuBLAS 51.9 / 402 / 753 TFLOP/s "
        "for fp32 / TF32 / f16), at a "
        "loaded DRAM latency of 700 ns (500-900 ns in brackets), H100 SXM: the largest of "
        "bytes / copy bandwidth, FLOPs / peak (TF32 dense 494.7 TFLOP/s for HMMA, f16 "
        "dense 989.4 against cuBLAS f16), "
        "executed warp instructions / (132 SMs x 4 x 1.98 GHz), shared-memory bytes / "
        "(132 x 128 B x 1.98 GHz), and bytes read / "
        "(bytes in flight per thread x resident threads x 132 / latency). `measured`: "
        "the ratio to the same reference that `gpudsl bench` measured on a GPU at this "
        "shape (cold L2), per device, from the committed runs under benchmarks/results/ "
        "whose every repetition was timed without host time (the tree each ran in "
        "brackets). Those runs timed the kernels of their tree: where a kernel changed "
        "after them (see docs/performance.md) the figure is the previous kernel's.",
        "",
    ]
    half = half_rows() if only is None or "matmul_f16" in only else None
    fp32 = fp32_rows() if only is None or "matmul" in only else None
    hopper = hopper_rows() if only is None or "matmul_f16" in only else None
    body = [markdown(rows), ""]
    if hopper:
        body += ["## The sm_90a kernels (whole kernel; per ring slot for HGMMA, UTMALDG, "
                 "DEPBAR)", "", markdown(hopper, HOPPER_COLUMNS), ""]
    if half:
        body += ["## The f16 GEMMs' main loop (per k tile of 32, one warp)", "",
                 markdown(half, HALF_COLUMNS), ""]
    if fp32:
        body += ["## The fp32 SGEMM's main loop (per k tile, one thread)", "",
                 markdown(fp32, FP32_COLUMNS), ""]
    body += ["## Per kernel and per loop", ""]
    for node, rep in details:
        body.append(f"### {node}")
        body.append("")
        body.append("```")
        for k in rep.kernels:
            from gpudsl.perf.sass_report import figure_row

            body.append(f"{k.name}: {k.registers} registers, {k.spills} B spills, "
                        f"occupancy {k.occupancy:.0%}, model {k.limiter}-bound")
            for f in k.machine or []:
                r = figure_row(f)
                body.append("  " + "  ".join(str(c) for c in r))
        body.append("```")
        body.append("")
    text = "\n".join(head + body)
    if ns.docs:
        update_docs(ns.docs, rows, half, fp32, hopper)
    if ns.out:
        with open(ns.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
