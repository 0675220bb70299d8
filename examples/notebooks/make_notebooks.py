"""Writes the tutorial notebooks of this folder from the cells below (run it after
editing them: ``python examples/notebooks/make_notebooks.py``).  The notebooks are
executed by tests/ux/test_notebooks.py (nbclient) so that they cannot rot."""
from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).parent

MD = "<!-- -->\n"  # marks a markdown cell that does not start with a heading

SETUP = ("from __future__ import annotations   # proc annotations stay text\n"
         "import numpy as np\n"
         "import gpudsl\n"
         "from gpudsl import proc, par, seq, BLOCKS, THREADS, SHARED, f32, size, sync")

NOTEBOOKS = {
    "01_write_and_check.ipynb": [
        "# Write and check a kernel\n\nA proc is a Python function gpudsl reads; `check()` "
        "proves it safe or shows a counterexample, and `compile()` refuses what is not "
        "proved.",
        SETUP,
        "@proc\n"
        "def reverse_blocks(n: size, x: f32[n], y: f32[n]):\n"
        "    assert n % 32 == 0\n"
        "    for b in par(0, n // 32) @ BLOCKS:\n"
        "        s: f32[32] @ SHARED\n"
        "        for t in par(0, 32) @ THREADS:\n"
        "            s[t] = x[32 * b + t]\n"
        "        for t in par(0, 32) @ THREADS:\n"
        "            y[32 * b + t] = s[31 - t]\n"
        "reverse_blocks",
        "## The checker finds the missing barrier\n\nThe report shows both accesses and a "
        "witness: the two threads that conflict.",
        "report = reverse_blocks.check()\n"
        "assert report.kinds() == {'race'}\n"
        "report",
        MD + "`compile()` proves first, so the racy kernel is refused with the same report:",
        "try:\n"
        "    reverse_blocks.compile('emulator')\n"
        "except gpudsl.CheckError as e:\n"
        "    print(type(e).__name__, '-', str(e).splitlines()[0])",
        "## Fixed: a `sync()` between the two phases",
        "from gpudsl.schedule import insert_sync, diff\n"
        "fixed = insert_sync(reverse_blocks, reverse_blocks.find_loop('t #1').before())\n"
        "assert fixed.check().ok\n"
        "diff(reverse_blocks, fixed)",
        "k = fixed.compile('emulator')   # 'cuda' on a machine with a GPU\n"
        "x = np.arange(64, dtype=np.float32)\n"
        "y = np.zeros(64, np.float32)\n"
        "k(x=x, y=y)\n"
        "assert (y == np.concatenate([x[31::-1], x[:31:-1]])).all()\n"
        "k",
    ],
    "02_schedule.ipynb": [
        "# Schedule a naive kernel into a fast one\n\nEvery primitive keeps the meaning "
        "or refuses; `check()` after each milestone proves the parallel version safe.",
        SETUP,
        "from gpudsl.schedule import divide_loop, parallelize_loop, reorder_loops, "
        "stage_mem, insert_sync, pad_dim, diff\n\n"
        "@proc\n"
        "def transpose(n: size, m: size, x: f32[n, m], y: f32[m, n]):\n"
        "    assert n % 32 == 0 and m % 32 == 0\n"
        "    for i in seq(0, n):\n"
        "        for j in seq(0, m):\n"
        "            y[j, i] = x[i, j]",
        "## 1. 32x32 tiles on blocks and threads",
        "p = divide_loop(transpose, 'i', 32, ['bi', 'ti'], tail='perfect')\n"
        "p = divide_loop(p, 'j', 32, ['bj', 'tj'], tail='perfect')\n"
        "p = reorder_loops(p, 'ti')\n"
        "for loop, where in (('bi', BLOCKS), ('bj', BLOCKS), ('ti', THREADS), ('tj', THREADS)):\n"
        "    p = parallelize_loop(p, loop, where)\n"
        "assert p.check().ok\n"
        "diff(transpose, p)",
        "## 2. Stage the tile in shared memory, with a barrier",
        "threads = p.find_loop('ti')\n"
        "q = stage_mem(p, threads, 'x[32*bi:32*bi+32, 32*bj:32*bj+32]', 'tile', SHARED)\n"
        "q = parallelize_loop(q, 'i0', THREADS)\n"
        "q = parallelize_loop(q, 'i1', THREADS)\n"
        "q = insert_sync(q, q.forward(threads).before())\n"
        "assert q.check().ok\n"
        "diff(p, q)",
        "## 3. Coalesced writes, padded tile",
        "q = reorder_loops(q, q.forward(threads))\n"
        "q = pad_dim(q, 'tile', 1, 33)\n"
        "assert q.check().ok\n"
        "q",
        MD + "The barrier is needed: `delete_sync` refuses, with a witness, and quotes the "
        "`sync()` as the primitive call that made it:",
        "from gpudsl.schedule import delete_sync\n"
        "try:\n"
        "    delete_sync(q, q.find('sync()'))\n"
        "except gpudsl.SchedulingError as e:\n"
        "    print(e)",
        "## Run it and compare with numpy",
        "x = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)\n"
        "y = np.zeros((96, 64), np.float32)\n"
        "k = q.compile('emulator')\n"
        "k(x=x, y=y)\n"
        "np.testing.assert_array_equal(y, x.T)\n"
        "k",
        "## Snapshot its CUDA\n\nIn a test, `gpudsl.testing`'s `cuda_snapshot` fixture "
        "keeps this text as a reviewable `.cu` file (`assert cuda_snapshot == q`).",
        "src = q.cuda_source()\n"
        "assert '__syncthreads' in src and '__shared__' in src\n"
        "print(src[:600])",
    ],
    "03_graph_nodes.ipynb": [
        "# Graph nodes with `gpudsl.ops`\n\nThe standard library's proved kernels on numpy "
        "arrays (GPU when there is one, else the CPU emulator), with numpy's conventions.",
        "import numpy as np\nimport gpudsl\nfrom gpudsl import ops\nops.backend()",
        "a = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
        "h = ops.relu(ops.add(ops.matmul(a, ops.permute(a, (-1, 0))), 1.0))\n"
        "np.testing.assert_allclose(h, np.maximum(a @ a.T + 1, 0))\n"
        "h",
        "x = np.zeros((5, 3), np.float32)\n"
        "ops.replace_slice(x, np.ones((2, 3), np.float32), 1, 3)\n"
        "ops.reshape(x, (-1,))",
        MD + "Refusals are `gpudsl.Error`s that name the op and the argument:",
        "for bad in (lambda: ops.reshape(a, (-1, -1)), lambda: ops.slice(a, 0.5, 2),\n"
        "            lambda: ops.permute(a, '10')):\n"
        "    try:\n"
        "        bad()\n"
        "    except gpudsl.Error as e:\n"
        "        print(e)",
    ],
    "04_tune.ipynb": [
        "# Tune a schedule's parameters\n\n`gpudsl.autotune` builds every configuration "
        "of a `Space`, proves it with `check()` (an unproved candidate never runs), "
        "compiles, verifies it against a reference and only then times it. Here a small "
        "matmul on the CPU emulator: a dry run of the whole pipeline (emulated times say "
        "nothing about a GPU; use `backend='cuda'` on one).",
        "import tempfile, importlib.util\n"
        "import numpy as np\n"
        "from gpudsl import autotune\n"
        "from gpudsl.stdlib.matmul import MatmulBuild, matmul_space\n"
        "db = tempfile.mkdtemp() + '/tune.sqlite'   # default: the cache directory's\n"
        "space = matmul_space(bm=[32], bn=[32], bk=[8], tm=[4, 8], tn=[4, 8])\n"
        "space, len(space)",
        "## Tune\n\nEach configuration is one record of an Optuna study (SQLite here; a "
        "database URL shares one study among machines).",
        "build = MatmulBuild((32, 32), (32, 32))\n"
        "res = autotune.tune(build, space, shapes={'a': (32, 32), 'b': (32, 32), "
        "'c': (32, 32)},\n"
        "                    reference=lambda a, b, c: a @ b, backend='emulator', db=db,\n"
        "                    strategy='grid', seed=0, reps=3, flops=2 * 32**3, "
        "task='matmul-tutorial')\n"
        "assert res.best is not None and res.counts().get('ok') == len(space)\n"
        "print(res.table(device='H100'))   # the roofline column: against H100's peak",
        "## Resume\n\nTuning again is a lookup: nothing is compiled or timed again.",
        "again = autotune.tune(build, space, shapes={'a': (32, 32), 'b': (32, 32), "
        "'c': (32, 32)},\n"
        "                      reference=lambda a, b, c: a @ b, backend='emulator', db=db,\n"
        "                      seed=0, reps=3, task='matmul-tutorial')\n"
        "assert all(r.get('cached') for r in again.records)\n"
        "dict(again.best.config), dict(res.best.config)",
        "## The winner\n\nIts proc, and its schedule as source to check in.",
        "p = res.best.proc\n"
        "a, b = np.ones((32, 32), np.float32), np.eye(32, dtype=np.float32)\n"
        "c = np.zeros((32, 32), np.float32)\n"
        "p.compile('emulator')(a=a, b=b, c=c)\n"
        "assert (c == a).all()\n"
        "print(res.source()[:300])",
        "if importlib.util.find_spec('matplotlib'):   # pip install 'gpudsl[plot]'\n"
        "    res.plot()",
    ],
    "05_synchronization.ipynb": [
        "# Synchronization beyond `sync()`\n\nBarriers over a range of threads, split "
        "arrive/wait barriers, warp collectives, and a pipeline made by primitives: each "
        "proved by `check()` for all sizes, or refused with a witness.",
        SETUP + "\nfrom gpudsl import arrive, barrier, wait, warp_sum",
        "## A warp-specialized producer and consumer\n\nWarp 0 stages step `i` into "
        "`buf[i % 2]`, warp 1 consumes it; `sync(0, 64)` is a named barrier of those 64 "
        "threads only.",
        "@proc\n"
        "def pipeline(n: size, x: f32[n, 32], y: f32[n, 32]):\n"
        "    for b in par(0, 1) @ BLOCKS:\n"
        "        buf: f32[2, 32] @ SHARED\n"
        "        for i in seq(0, n):\n"
        "            for t in par(0, 32) @ THREADS:\n"
        "                buf[i % 2, t] = x[i, t]\n"
        "            sync(0, 64)\n"
        "            for t in par(32, 64) @ THREADS:\n"
        "                y[i, t - 32] = buf[i % 2, t - 32] * 2.0\n"
        "assert pipeline.check().ok\n"
        "pipeline.check()",
        MD + "With one buffer the producers of step `i + 1` overwrite what the consumers of "
        "step `i` may still read: a race, with the two threads and the steps as witness.",
        "one_buffer = gpudsl.proc_from_source(str(pipeline).replace('i % 2', '0'))\n"
        "report = one_buffer.check()\n"
        "assert report.kinds() == {'race'}\n"
        "report",
        "## A split barrier: arrive now, wait later",
        "@proc\n"
        "def overlap(n: size, x: f32[n, 64], y: f32[n, 64], z: f32[n, 64]):\n"
        "    for b in par(0, 1) @ BLOCKS:\n"
        "        s: f32[2, 64] @ SHARED\n"
        "        bar: barrier @ SHARED\n"
        "        for i in seq(0, n):\n"
        "            for t in par(0, 64) @ THREADS:\n"
        "                s[i % 2, t] = x[i, t]\n"
        "            arrive(bar, 0, 64)\n"
        "            for t in par(0, 64) @ THREADS:\n"
        "                z[i, t] = x[i, t] + 1.0\n"
        "            wait(bar, 0, 64)\n"
        "            for t in par(0, 64) @ THREADS:\n"
        "                y[i, t] = s[i % 2, 63 - t]\n"
        "assert overlap.check().ok\n"
        "x = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)\n"
        "y, z = np.zeros_like(x), np.zeros_like(x)\n"
        "overlap.compile('emulator')(x=x, y=y, z=z)   # an mbarrier on sm_80+\n"
        "assert (y == x[:, ::-1]).all() and (z == x + 1).all()",
        "## A block reduction with `warp_sum`\n\nEach warp reduces its 32 values with "
        "shuffles; one SHARED exchange and a last `warp_sum` give the block's sum.",
        "@proc\n"
        "def block_sum(nb: size, x: f32[nb, 256], out: f32[nb]):\n"
        "    for b in par(0, nb) @ BLOCKS:\n"
        "        part: f32[8] @ SHARED\n"
        "        for t in par(0, 256) @ THREADS:\n"
        "            s: f32\n"
        "            s = warp_sum(x[b, t])\n"
        "            if t % 32 == 0:\n"
        "                part[t // 32] = s\n"
        "        sync()\n"
        "        for t in par(0, 32) @ THREADS:\n"
        "            v: f32\n"
        "            v = 0.0\n"
        "            if t < 8:\n"
        "                v = part[t]\n"
        "            total: f32\n"
        "            total = warp_sum(v)\n"
        "            if t == 0:\n"
        "                out[b] = total\n"
        "assert block_sum.check().ok\n"
        "x = np.random.default_rng(1).standard_normal((3, 256)).astype(np.float32)\n"
        "out = np.zeros(3, np.float32)\n"
        "block_sum.compile('emulator')(x=x, out=out)\n"
        "assert np.allclose(out, x.sum(1), atol=1e-4)\n"
        "out",
        MD + "A shuffle under a lane-dependent `if` is refused: the lanes that skip it "
        "would leave the others waiting.",
        "bad = gpudsl.proc_from_source(str(block_sum).replace('s = warp_sum(x[b, t])',\n"
        "                                                     'if t < 16:\\n                s = warp_sum(x[b, t])'))\n"
        "report = bad.check()\n"
        "assert not report.ok\n"
        "report",
        "## Double buffering by primitives\n\n`rotate_loop` moves the next step's copy "
        "into the current step, `expand_dim` gives each step its own buffer, and "
        "`delete_sync` drops the barrier the two buffers make needless: check() proves it "
        "through `i % 2`.",
        "from gpudsl.schedule import delete_sync, diff, expand_dim, rotate_loop\n"
        "@proc\n"
        "def staged(n: size, x: f32[n, 256], y: f32[256]):\n"
        "    for b in par(0, 1) @ BLOCKS:\n"
        "        buf: f32[256] @ SHARED\n"
        "        acc: f32[256] @ SHARED\n"
        "        for t in par(0, 256) @ THREADS:\n"
        "            acc[t] = 0.0\n"
        "        for i in seq(0, n):\n"
        "            for t in par(0, 256) @ THREADS:\n"
        "                buf[t] = x[i, t]\n"
        "            sync()\n"
        "            for t in par(0, 256) @ THREADS:\n"
        "                acc[t] += buf[255 - t]\n"
        "            sync()\n"
        "        for t in par(0, 256) @ THREADS:\n"
        "            y[t] = acc[t]\n"
        "d = rotate_loop(expand_dim(staged, 'buf', '2', 'i % 2'), 'i', 1)\n"
        "d = delete_sync(d, d.find('sync()', many=True)[1])\n"
        "assert d.check().ok\n"
        "diff(staged, d)",
    ],
}


def build() -> None:
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell(c.removeprefix(MD))
                    if c.startswith(("#", MD)) else nbformat.v4.new_code_cell(c)
                    for c in cells]
        nbformat.write(nb, HERE / name)


if __name__ == "__main__":
    build()
