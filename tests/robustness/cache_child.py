"""``python cache_child.py CACHE_DIR [damage]``: build a small emulator module with the cache
in CACHE_DIR (after damaging the entry the first build left there, if asked), launch it, and
print what happened.  Run in a child process: a damaged entry used to crash the process."""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

SRC = """
extern "C" __global__ void twice(int* x) { x[threadIdx.x] = 2 * threadIdx.x; }
"""
OTHER = """
extern "C" __global__ void other(int* x) { x[threadIdx.x] = 7; }
"""


def build(cache_dir, src=SRC, name="twice"):
    from gpudsl.runtime.artifact_cache import Cache
    from gpudsl.runtime.emulator import build_emulator_module
    from gpudsl.runtime.signature import KernelSig

    return build_emulator_module(src, [KernelSig(name, ["int*"])], cache=Cache(cache_dir))


def damage(cache_dir: Path, how: str) -> None:
    sos = [p for p in cache_dir.glob("*.so")]
    assert len(sos) == 1, sos
    so = sos[0]
    data = so.read_bytes()
    if how == "truncated":
        so.write_bytes(data[: len(data) // 3])
    elif how == "overwritten":
        so.write_bytes(bytes(b ^ 0x5A for b in data))
    elif how == "missing_symbol":
        # a loadable library without the kernel, with its hash recorded: only loading tells
        other = build(cache_dir / "other", OTHER, "other")
        good = Path(other.path).read_bytes()
        so.write_bytes(good)
        meta_p = so.with_suffix(".json")
        meta = json.loads(meta_p.read_text())
        import hashlib
        meta["sha256"] = hashlib.sha256(good).hexdigest()
        meta_p.write_text(json.dumps(meta))
    else:
        raise SystemExit(f"unknown damage {how}")


def main(argv) -> int:
    cache_dir = Path(argv[1])
    if len(argv) > 2:
        damage(cache_dir, argv[2])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mod = build(cache_dir)
        mod2 = build(cache_dir)
    x = np.zeros(4, np.int32)
    mod.launch("twice", 1, 4, [x])
    mod2.launch("twice", 1, 4, [x])
    print("cached:", mod.cached, mod2.cached)
    print("result:", x.tolist())
    for m in w:
        print("warning:", m.category.__name__, str(m.message).splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
