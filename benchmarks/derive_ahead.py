"""Derive, on this machine, the kernels a GPU campaign will run, into ``.derived/`` (the
derivation cache, gpudsl/stdlib/derivation_cache.py), to carry with the tree: the
campaign reads them back instead of deriving them on the GPU machine's CPU (the
2026-11-29 H200 run lost part 2's bench and LLaMA steps to it: 30-50 s per GEMM row,
on device time).

    python benchmarks/derive_ahead.py            # then carry [".whl", ".derived"]
    python benchmarks/derive_ahead.py --list     # what it derives; derives nothing

An entry is keyed by gpudsl's sources (not the folder, not the Python, numpy or z3
versions), so derive after the last commit: a change of any source file misses, and the
campaign then derives as before.  Nothing here is trusted for safety: every kernel is
proved again (check()) when the campaign compiles it.  ``benchmarks/README.md`` has the
order of the commands.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDER = ROOT / ".derived"


def plans() -> list[tuple[str, object]]:
    """(label, call) for each kernel the campaign's rows and steps plan on an sm_90a GPU
    (the bench's GEMM rows at both sizes, the batched rows, the sanitizer's hopper
    kernels) and for the sm_80 rows, which run on it too."""
    from gpudsl.bench import GEMM_SIZES
    from gpudsl.stdlib import matmul_sm80, matmul_sm90, matmul_sm90_nn, matmul_sm90_tf32

    wide = dict(bn=256, wgs=2, stages=4)
    out = []
    for n in GEMM_SIZES:
        sq = ((n, n), (n, n))
        for dt in ("f16", "bf16"):
            out.append((f"sm90 {dt} {n}^3", lambda sq=sq, dt=dt:
                        matmul_sm90.plan_matmul_sm90(*sq, dt)))
            out.append((f"sm90 nn {dt} {n}^3 (ops.matmul)", lambda sq=sq, dt=dt:
                        matmul_sm90_nn.plan_matmul_sm90_nn(*sq, dt)))
            out.append((f"sm80 {dt} {n}^3", lambda sq=sq, dt=dt:
                        matmul_sm80.plan_matmul_sm80(*sq, dt, "sm_80")))
        out.append((f"sm90 f16 {n}^3 persistent", lambda sq=sq:
                    matmul_sm90.plan_matmul_sm90(*sq, "f16", persistent=True)))
        out.append((f"sm90 f16 {n}^3 row order", lambda sq=sq:
                    matmul_sm90.plan_matmul_sm90(*sq, "f16", **wide, bk=64, raster=0)))
        out.append((f"sm90 f16 {n}^3 256x128", lambda sq=sq:
                    matmul_sm90.plan_matmul_sm90(*sq, "f16", **matmul_sm90.TALL)))
        out.append((f"sm90 tf32 {n}^3", lambda sq=sq:
                    matmul_sm90_tf32.plan_matmul_sm90_tf32(*sq)))
        out.append((f"sm90 tf32 {n}^3 row order", lambda sq=sq:
                    matmul_sm90_tf32.plan_matmul_sm90_tf32(*sq, **wide, bk=32, columns=0)))
    batched = ((16, 1024, 1024), (16, 1024, 1024))
    out.append(("sm90 f16 16x1024^3", lambda: matmul_sm90.plan_matmul_sm90(*batched, "f16")))
    out.append(("sm90 tf32 16x1024^3",
                lambda: matmul_sm90_tf32.plan_matmul_sm90_tf32(*batched)))
    for m, n, k, dt in ((200, 136, 64, "f16"), (130, 100, 64, "bf16")):  # the sanitizer's
        out.append((f"sm90 {dt} {m}x{n}x{k}", lambda m=m, n=n, k=k, dt=dt:
                    matmul_sm90.plan_matmul_sm90((m, k), (n, k), dt)))
    out.append(("sm90 tf32 136x72x32",
                lambda: matmul_sm90_tf32.plan_matmul_sm90_tf32((136, 32), (72, 32))))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print what it derives")
    ap.add_argument("--folder", default=str(FOLDER), help="where (default .derived/)")
    args = ap.parse_args()
    os.environ["GPUDSL_DERIVATION_CACHE"] = args.folder
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    todo = plans()
    if args.list:
        print("\n".join(label for label, _ in todo))
        return 0
    failed = 0
    start = time.perf_counter()
    for label, call in todo:
        t = time.perf_counter()
        try:
            call()
            print(f"derived {label:36} {time.perf_counter() - t:6.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - the campaign derives it (and says why)
            failed += 1
            print(f"FAILED  {label:36} {type(e).__name__}: {e}", flush=True)
    entries = len(list(pathlib.Path(args.folder).glob("*.pickle")))
    print(f"{entries} kernels in {args.folder} ({time.perf_counter() - start:.0f} s); "
          f"carry it with the tree", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
