"""One of several processes tuning into one shared study (run by test_shared_db.py):
``python -m tests.autotune.shared_worker URL SEED`` prints its records as JSON."""
from __future__ import annotations

import json
import sys

import numpy as np

from gpudsl import autotune

from .kernels import build, reference


def space():
    return autotune.Space(variant=["tiled", "wrong"], tm=[4, 8], bps=[2, 4],
                          where=lambda c: c.variant == "tiled" or (c.tm == 4 and c.bps == 2))


def full_build(c):
    return build(dict(c, bm=32, bn=32, bk=8, tn=c["tm"]))


def main():
    url, seed = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(0)
    args = {"a": rng.standard_normal((32, 32)).astype(np.float32),
            "b": rng.standard_normal((32, 32)).astype(np.float32),
            "c": np.zeros((32, 32), np.float32)}
    res = autotune.tune(full_build, space(), args, reference=reference, backend="emulator",
                        strategy="grid", seed=seed, db=url, task="shared-matmul", reps=3)
    print(json.dumps([{"params": r["params"], "status": r["status"],
                       "cached": bool(r.get("cached"))} for r in res.records]))


if __name__ == "__main__":
    main()
