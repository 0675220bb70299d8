"""Thread block clusters (SPEC 2.9, docs/hopper.md (clusters)): ``par(0, c) @ CLUSTERS`` and
``sync_cluster()`` through every layer: parser and printer, interpreter and race detector,
check() (the exchange proved, its race and divergence witnesses, the target refusal, the
structure), codegen (``__cluster_dims__``, the PTX barrier pair, NVRTC sm_90a SASS), the
emulator and the primitives."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ProcError, SchedulingError, proc_from_source
from gpudsl.errors import InterpError, RaceError
from gpudsl.ir.nodes import For, SyncCluster
from gpudsl.ir.visitor import walk

NS = vars(gpudsl)
SM90A = dict(target="sm_90a")

# block r of each cluster of 2 writes its half, then reads its partner's half
EXCHANGE = '''
@proc
def xchg(n: size, x: f32[n] @ GLOBAL, y: f32[n] @ GLOBAL):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            for t in par(0, 128) @ THREADS:
                x[b * 256 + r * 128 + t] = 1.0 * (r + 1) + 4.0 * b
            sync_cluster()
            for t in par(0, 128) @ THREADS:
                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]
'''


def _p(src=EXCHANGE, **subs):
    for k, v in subs.items():
        src = src.replace(k, v)
    return proc_from_source(src, NS)


def _expected(n):
    b = np.arange(n) // 256
    r = np.arange(n) % 256 // 128
    return ((1 - r) + 1 + 4.0 * b).astype(np.float32)


def _interp(p, n=1024, **kw):
    x = np.zeros(n, np.float32)
    y = np.zeros(n, np.float32)
    gpudsl.interpret(p, n=n, x=x, y=y, **kw)
    return y


NO_SYNC = {"            sync_cluster()\n": ""}


# ------------------------------------------------------------------ parser and printer


def test_prints_and_parses_back():
    p = _p()
    text = str(p)
    assert "for r in par(0, 2) @ CLUSTERS:" in text and "sync_cluster()" in text
    assert proc_from_source(text, NS) == p
    loops = [s for s in walk(p.ir.body) if isinstance(s, For)]
    assert [s.cluster for s in loops] == [False, True, False, False]
    assert loops[1].mapping == gpudsl.BLOCKS   # a BLOCKS loop to every other layer
    assert sum(isinstance(s, SyncCluster) for s in walk(p.ir.body)) == 1


@pytest.mark.parametrize("old, new, msg", [
    ("par(0, 2) @ CLUSTERS", "par(0, 16) @ CLUSTERS", "from 1 to 8"),
    ("par(0, 2) @ CLUSTERS", "par(0, n) @ CLUSTERS", "from 1 to 8"),
    ("par(0, 2) @ CLUSTERS", "par(0, 2, unroll=True) @ CLUSTERS", "takes no keywords"),
    ("par(0, 2) @ CLUSTERS", "seq(0, 2) @ CLUSTERS", "only par loops"),
    ("sync_cluster()", "sync_cluster(0, 64)", "takes no arguments"),
])
def test_parser_refusals(old, new, msg):
    with pytest.raises(ProcError, match=msg):
        _p(**{old: new})


# ------------------------------------------------------------------ interpreter, race detector


def test_interpreter_runs_the_cluster_together():
    assert np.array_equal(_interp(_p()), _expected(1024))
    assert np.array_equal(_interp(_p(), detect_races=True), _expected(1024))


def test_race_detector_finds_the_exchange_without_sync_cluster():
    with pytest.raises(RaceError, match="two blocks of one kernel"):
        _interp(_p(**NO_SYNC), detect_races=True)


def test_race_detector_orders_only_blocks_of_one_cluster():
    # each block reads the other cluster's element: sync_cluster() does not order it
    p = _p(**{"x[b * 256 + (1 - r) * 128 + t]": "x[(b + 1) % (n // 256) * 256 + r * 128 + t]"})
    with pytest.raises(RaceError):
        _interp(p, detect_races=True)


def test_interpreter_reports_a_divergent_cluster():
    p = _p(**{"            sync_cluster()\n": "            if r == 0:\n                sync_cluster()\n"})
    with pytest.raises(InterpError, match="divergence"):
        _interp(p)


# ------------------------------------------------------------------ check()


def test_check_proves_the_exchange():
    r = _p().check(**SM90A)
    assert r.ok, r


def test_check_finds_the_race_without_sync_cluster():
    r = _p(**NO_SYNC).check(**SM90A)
    races = [d for d in r.diagnostics if d.kind == "race"]
    assert races and races[0].witness["between"] == "blocks"
    assert "two blocks of one cluster" in races[0].message and "sync_cluster()" in races[0].hint
    t1, t2 = races[0].witness["thread1"], races[0].witness["thread2"]
    assert t1["block"]["b"] == t2["block"]["b"] and t1["block"]["r"] != t2["block"]["r"]


def test_check_finds_a_read_in_the_same_cluster_phase():
    # the partner's half read before the barrier, then written after it: one phase apart
    # would be fine, here the read and the partner's write meet
    p = _p(**{"x[b * 256 + (1 - r) * 128 + t]": "x[b * 256 + r * 128 + t]"})
    assert p.check(**SM90A).ok            # its own half: no other block touches it
    src = EXCHANGE.replace(
        "            sync_cluster()\n",
        "            for t in par(0, 128) @ THREADS:\n"
        "                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]\n"
        "            sync_cluster()\n")
    r = _p(src).check(**SM90A)
    assert any(d.kind == "race" for d in r.diagnostics), r


def test_check_orders_across_sync_cluster_in_a_seq_loop():
    src = '''
@proc
def ring(n: size, k: size, x: f32[n] @ GLOBAL):
    assert n % 512 == 0
    for b in par(0, n // 512) @ BLOCKS:
        for r in par(0, 4) @ CLUSTERS:
            for it in seq(0, k):
                for t in par(0, 128) @ THREADS:
                    x[b * 512 + r * 128 + t] = x[b * 512 + r * 128 + t] + 1.0
                sync_cluster()
                for t in par(0, 128) @ THREADS:
                    x[b * 512 + (r + 1) % 4 * 128 + t] = x[b * 512 + (r + 1) % 4 * 128 + t] * 0.5
                sync_cluster()
'''
    assert proc_from_source(src, NS).check(**SM90A).ok
    one = src.replace("* 0.5\n                sync_cluster()\n", "* 0.5\n")
    r = proc_from_source(one, NS).check(**SM90A)
    assert any(d.kind == "race" for d in r.diagnostics), r


def test_divergence_witness():
    p = _p(**{"            sync_cluster()\n": "            if r == 0:\n                sync_cluster()\n"})
    r = p.check(**SM90A)
    d = [d for d in r.diagnostics if d.kind == "divergence"]
    assert d, r
    assert d[0].witness["block1"]["r"] != d[0].witness["block2"]["r"]
    assert d[0].witness["block1"]["b"] == d[0].witness["block2"]["b"]
    # a condition the blocks of one cluster share is uniform
    ok = _p(**{"            sync_cluster()\n": "            if b < n // 512:\n                sync_cluster()\n"
                                                 "            else:\n                sync_cluster()\n"})
    assert not [d for d in ok.check(**SM90A).diagnostics if d.kind == "divergence"]


def test_divergence_on_memory_is_refused():
    p = _p(**{"            sync_cluster()\n": "            if x[b * 256] > 0.0:\n                sync_cluster()\n"})
    assert any(d.kind in ("divergence", "unknown") for d in p.check(**SM90A).diagnostics)


@pytest.mark.parametrize("tgt", ["sm_80", "sm_90"])
def test_targets_without_clusters_refuse(tgt):
    r = _p().check(target=tgt)
    d = [d for d in r.diagnostics if d.kind == "target"]
    assert d and d[0].witness["feature"] == "clusters" and len(d[0].locations) == 2
    assert "sm_90a" in d[0].witness["targets_with_it"]


@pytest.mark.parametrize("src_old, src_new, msg", [
    ("            sync_cluster()\n", "", None),
    ("        for r in par(0, 2) @ CLUSTERS:", "        for r in par(0, 2) @ BLOCKS:",
     "sync_cluster() outside any @ CLUSTERS loop"),
])
def test_structure(src_old, src_new, msg):
    r = _p(**{src_old: src_new}).check(**SM90A)
    mapping = [d.message for d in r.diagnostics if d.kind == "mapping"]
    if msg is None:
        assert not mapping
    else:
        assert any(msg in m for m in mapping), r


def test_a_cluster_loop_must_be_innermost():
    src = '''
@proc
def outer(n: size, x: f32[n] @ GLOBAL):
    for r in par(0, 2) @ CLUSTERS:
        for b in par(0, n // 256) @ BLOCKS:
            for t in par(0, 128) @ THREADS:
                x[b * 256 + r * 128 + t] = 1.0
'''
    r = proc_from_source(src, NS).check(**SM90A)
    assert any("innermost" in d.message for d in r.diagnostics if d.kind == "mapping"), r


# ------------------------------------------------------------------ codegen, NVRTC, emulator


def test_codegen_declares_the_cluster_and_its_barrier():
    src = _p().cuda_source()
    assert "__cluster_dims__(2, 1, 1)" in src
    assert "barrier.cluster.arrive.release.aligned" in src and "gpudsl_sync_cluster();" in src
    assert "const int r = blockIdx.x;" in src     # the rank: the fastest block dimension
    assert "__cluster_dims__" not in _p(**{"@ CLUSTERS": "@ BLOCKS"}, **NO_SYNC).cuda_source()


def test_nvrtc_builds_it_for_sm_90a_and_the_sass_has_the_cluster_barrier():
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin

    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    src = _p().cuda_source()
    counts = sass.opcode_counts(sass.disassemble(compile_cubin(src, arch="sm_90a").cubin))
    assert counts["UCGABAR_ARV"] == 1 and counts["UCGABAR_WAIT"] == 1
    with pytest.raises(Exception, match="need sm_90"):
        compile_cubin(src, arch="sm_80")


def test_emulator_equals_the_interpreter():
    k = _p().compile("emulator")
    n = 256 * 6
    x = np.zeros(n, np.float32)
    y = np.zeros(n, np.float32)
    k(n=n, x=x, y=y)
    assert np.array_equal(y, _interp(_p(), n)) and np.array_equal(y, _expected(n))


def test_emulator_reports_a_divergent_cluster():
    from gpudsl.errors import LaunchError

    p = _p(**{"            sync_cluster()\n": "            if r == 0:\n                sync_cluster()\n"})
    k = p.compile("emulator", check=False)
    with pytest.raises(LaunchError, match="cluster barrier divergence"):
        k(n=512, x=np.zeros(512, np.float32), y=np.zeros(512, np.float32))


# ------------------------------------------------------------------ primitives

FLAT = '''
@proc
def flat(n: size, x: f32[n] @ GLOBAL, y: f32[n] @ GLOBAL):
    assert n % 256 == 0
    for b in seq(0, n // 128):
        for t in par(0, 128) @ THREADS:
            y[b * 128 + t] = x[b * 128 + t] * 2.0
'''


def test_parallelize_loop_makes_a_cluster_from_a_divided_blocks_loop():
    from gpudsl.schedule import divide_loop, parallelize_loop

    p = proc_from_source(FLAT, NS)
    q = divide_loop(p, "b", 2, ["bo", "bi"], perfect=True)
    q = parallelize_loop(q, "bo", gpudsl.BLOCKS)
    q = parallelize_loop(q, "bi", gpudsl.CLUSTERS)
    assert "for bi in par(0, 2) @ CLUSTERS:" in str(q)
    assert q.check(**SM90A).ok
    assert "__cluster_dims__(2, 1, 1)" in q.cuda_source()
    n = 1024
    x = np.arange(n, dtype=np.float32)
    y1, y2 = np.zeros(n, np.float32), np.zeros(n, np.float32)
    gpudsl.interpret(p, n=n, x=x, y=y1)
    gpudsl.interpret(q, n=n, x=x, y=y2)
    assert np.array_equal(y1, y2)
    # the outer loop counts clusters: it cannot be one
    with pytest.raises(SchedulingError, match="innermost"):
        parallelize_loop(q, "bo", gpudsl.CLUSTERS)


def test_parallelize_loop_refuses_a_cluster_of_unknown_size():
    from gpudsl.schedule import parallelize_loop

    p = parallelize_loop(proc_from_source(FLAT, NS), "b", gpudsl.BLOCKS)
    with pytest.raises(SchedulingError, match="from 1 to 8"):
        parallelize_loop(p, "b", gpudsl.CLUSTERS)


def test_primitives_keep_or_refuse_the_construct():
    from gpudsl.schedule import (delete_sync, divide_loop, insert_sync, parallelize_loop,
                                 reorder_loops, rename, simplify)

    p = _p()
    with pytest.raises(SchedulingError, match="orders the blocks of a cluster"):
        delete_sync(p, "sync_cluster()")
    with pytest.raises(SchedulingError, match="innermost"):
        reorder_loops(p, "b")
    with pytest.raises(SchedulingError):   # a BLOCKS loop again: sync_cluster() outside it
        parallelize_loop(p, "r", gpudsl.BLOCKS)
    for q in (simplify(p), rename(p, "xchg2"), insert_sync(p, p.find("sync_cluster()").after())):
        assert "@ CLUSTERS" in str(q) and "sync_cluster()" in str(q)
        assert q.check(**SM90A).ok, q
    # dividing the rank loop would nest a cluster in a cluster: refused, or check() says so
    try:
        q = divide_loop(p, "r", 2, ["ro", "ri"], perfect=True)
    except SchedulingError:
        pass
    else:
        assert not q.check(**SM90A).ok


RING = '''
@proc
def ring(n: size, k: size, x: f32[n, 8], y: f32[n, 8]):
    for b in par(0, n) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            for it in seq(0, k):
                for t in par(0, 4) @ THREADS:
                    x[b, r * 4 + t] = x[b, r * 4 + t] * 2.0 + 1.0
                sync_cluster()
                for t in par(0, 4) @ THREADS:
                    y[b, r * 4 + t] += x[b, (r + 1) % 2 * 4 + t]
                sync_cluster()
'''


def test_rewrites_of_a_meeting_cluster_are_refused():
    """Found by the differential test (GPUDSL_DIFF_FAMILY=clusters): fission, stage_mem and
    cut_loop reason about one block's code and changed what a block reads from another."""
    from gpudsl.schedule import cut_loop, fission

    p = proc_from_source(RING, NS)
    assert p.check(**SM90A).ok
    with pytest.raises(SchedulingError, match="meet at sync_cluster"):
        fission(p, p.find("sync_cluster()").after())
    with pytest.raises(SchedulingError, match="meet at sync_cluster"):
        cut_loop(p, "r", 1)
    # without sync_cluster(), a cut that leaves a cluster of unknown size (reparse failed)
    q = _p(**NO_SYNC)
    with pytest.raises(SchedulingError, match="CLUSTERS loop 'r'"):
        cut_loop(q, "r", "min(n // 256, 2)")
