"""Arrives on every block of a cluster (SPEC 2.9, docs/hopper.md (remote arrives)):
``arrive(bar[e], lo, hi, cluster=True)`` through every layer: parser and printer, the
interpreter (blocks that wait for each other), check() (orderings between blocks, the
placement, uniformity and early-arrive obligations, the target), codegen (mapa and the
cluster-scope arrive, NVRTC sm_90a SASS), the emulator and the primitives."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ProcError, SchedulingError, proc_from_source
from gpudsl.errors import InterpError, LaunchError
from gpudsl.ir.nodes import Arrive
from gpudsl.ir.visitor import walk

NS = vars(gpudsl)
SM90A = dict(target="sm_90a")

# block r of each cluster of 2 writes its half, arrives on both blocks' `done`, waits on
# its own, then reads its partner's half
RELAY = '''
@proc
def relay(n: size, x: f32[n] @ GLOBAL, y: f32[n] @ GLOBAL):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            done: barrier @ SHARED
            for t in par(0, 128) @ THREADS:
                x[b * 256 + r * 128 + t] = 1.0 * (r + 1) + 4.0 * b
            arrive(done, 0, 128, cluster=True)
            wait(done, 0, 128)
            for t in par(0, 128) @ THREADS:
                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]
'''

# k rounds over a ring of two: each round writes its own half, meets, reads the partner's
# half, and a sync_cluster() ends the round (the next round's arrives come after it)
RING = '''
@proc
def rounds(n: size, k: size, x: f32[n] @ GLOBAL, y: f32[n] @ GLOBAL):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            done: barrier[2] @ SHARED
            for it in seq(0, k):
                for t in par(0, 128) @ THREADS:
                    x[b * 256 + r * 128 + t] = x[b * 256 + r * 128 + t] + 1.0
                arrive(done[it % 2], 0, 128, cluster=True)
                wait(done[it % 2], 0, 128)
                for t in par(0, 128) @ THREADS:
                    y[b * 256 + r * 128 + t] = y[b * 256 + r * 128 + t] + x[b * 256 + (1 - r) * 128 + t]
                sync_cluster()
'''


def _p(src=RELAY, **subs):
    for k, v in subs.items():
        assert k in src, k
        src = src.replace(k, v)
    return proc_from_source(src, NS)


def _expected(n):
    b = np.arange(n) // 256
    r = np.arange(n) % 256 // 128
    return ((1 - r) + 1 + 4.0 * b).astype(np.float32)


def _run(p, n=1024, how="interp"):
    x = np.zeros(n, np.float32)
    y = np.zeros(n, np.float32)
    if how == "interp":
        gpudsl.interpret(p, n=n, x=x, y=y)
    else:
        p.compile("emulator", check=False)(n=n, x=x, y=y)
    return y


TWICE = {"            wait(done, 0, 128)\n":
         "            wait(done, 0, 128)\n            wait(done, 0, 128)\n"}


# ------------------------------------------------------------------ parser and printer


def test_prints_and_parses_back():
    p = _p()
    assert "arrive(done, 0, 128, cluster=True)" in str(p)
    assert proc_from_source(str(p), NS) == p
    arrives = [s for s in walk(p.ir.body) if isinstance(s, Arrive)]
    assert [a.cluster for a in arrives] == [True]
    q = _p(**{"cluster=True": "count=2, cluster=True"})
    assert "arrive(done, 0, 128, count=2, cluster=True)" in str(q)
    assert proc_from_source(str(q), NS) == q


@pytest.mark.parametrize("new, msg", [
    ("cluster=1", "True or False"),
    ("rank=1", "count= and cluster="),
])
def test_parser_refusals(new, msg):
    with pytest.raises(ProcError, match=msg):
        _p(**{"cluster=True": new})


# ------------------------------------------------------------------ interpreter


def test_interpreter_runs_the_blocks_until_they_wait_for_each_other():
    assert np.array_equal(_run(_p()), _expected(1024))


def test_interpreter_rounds_on_a_ring():
    n, k = 512, 3
    x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
    gpudsl.interpret(_p(RING), n=n, k=k, x=x, y=y)
    assert np.array_equal(x, np.full(n, k, np.float32))
    assert np.array_equal(y, np.full(n, k * (k + 1) / 2, np.float32))


def test_interpreter_reports_a_cluster_deadlock():
    with pytest.raises(InterpError, match="deadlock"):
        _run(_p(**TWICE))


ARRIVE_TWICE = {"            arrive(done, 0, 128, cluster=True)\n":
                "            arrive(done, 0, 128, cluster=True)\n"
                "            arrive(done, 0, 128, cluster=True)\n",
                "            wait(done, 0, 128)\n":
                "            wait(done, 0, 128)\n            wait(done, 0, 128)\n"}


def test_interpreter_reports_an_arrive_for_the_phase_after():
    # block 0's second arrive comes before block 1 made its first: its arrivals would
    # count toward the phase in progress on block 1's barrier
    with pytest.raises(InterpError, match="still waiting for other blocks"):
        _run(_p(**ARRIVE_TWICE))


def _races(p, n=512):
    from gpudsl.errors import RaceError
    try:
        gpudsl.interpret(p, n=n, x=np.zeros(n, np.float32), y=np.zeros(n, np.float32),
                         detect_races=True)
    except RaceError as e:
        return str(e)
    return None


def test_the_race_detector_orders_blocks_by_cluster_arrives():
    assert _races(_p()) is None
    msg = _races(_p(**{", cluster=True": ""}))
    assert "GLOBAL x[" in msg
    # the reason names what orders blocks of one cluster (it said "barriers do not
    # order blocks", wrong for a cluster's blocks)
    assert "only sync_cluster() or a cluster arrive orders blocks of one cluster" in msg
    # threads 64..127 read the partner's half without having waited
    assert "GLOBAL x[" in _races(_p(**{"            wait(done, 0, 128)\n":
                                       "            wait(done, 0, 64)\n"}))


def test_the_race_detector_runs_the_rounds():
    x, y = np.zeros(256, np.float32), np.zeros(256, np.float32)
    gpudsl.interpret(_p(RING), n=256, k=3, x=x, y=y, detect_races=True)
    assert np.array_equal(y, np.full(256, 6, np.float32))


# ------------------------------------------------------------------ check()


def test_check_proves_the_relay():
    r = _p().check(**SM90A)
    assert r.ok, r


def test_check_finds_the_race_with_an_arrive_of_one_block():
    r = _p(**{", cluster=True": ""}).check(**SM90A)
    races = [d for d in r.diagnostics if d.kind == "race"]
    assert races and races[0].witness["between"] == "blocks", r
    t1, t2 = races[0].witness["thread1"], races[0].witness["thread2"]
    assert t1["block"]["b"] == t2["block"]["b"] and t1["block"]["r"] != t2["block"]["r"]


def test_check_finds_the_race_of_threads_that_do_not_wait():
    src = RELAY.replace("            wait(done, 0, 128)\n", "            wait(done, 0, 64)\n")
    r = proc_from_source(src, NS).check(**SM90A)
    races = [d for d in r.diagnostics if d.kind == "race"]
    assert races and races[0].witness["between"] == "blocks", r
    assert "not ordered by an arrive on every block's barrier" in races[0].message
    assert "cluster=True" in races[0].hint
    # the reading thread is one that did not wait
    reader = [t for t in (races[0].witness["thread1"], races[0].witness["thread2"])
              if t["thread"]["t"] >= 64]
    assert reader, races[0].witness


def test_check_finds_the_race_of_a_read_before_the_wait():
    src = RELAY.replace(
        "            arrive(done, 0, 128, cluster=True)\n",
        "            arrive(done, 0, 128, cluster=True)\n"
        "            for t in par(0, 128) @ THREADS:\n"
        "                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]\n")
    r = proc_from_source(src, NS).check(**SM90A)
    assert any(d.kind == "race" for d in r.diagnostics), r


def test_check_refuses_a_wait_that_never_completes():
    r = _p(**TWICE).check(**SM90A)
    assert "divergence" in r.kinds(), r


def test_check_proves_rounds_separated_by_sync_cluster():
    r = _p(RING).check(**SM90A)
    assert r.ok, r


def test_check_does_not_prove_arrives_without_sync_cluster_between():
    r = _p(**ARRIVE_TWICE).check(**SM90A)
    assert not r.ok
    assert any(d.kind == "unknown" and "before that block's phase before it" in d.message
               for d in r.diagnostics), r
    r = _p(RING, **{"                sync_cluster()\n": ""}).check(**SM90A)
    assert not r.ok
    assert any(d.kind == "unknown" and "before that block's phase before it" in d.message
               for d in r.diagnostics), r


def test_check_refuses_an_arrive_only_some_blocks_make():
    src = RELAY.replace("            arrive(done, 0, 128, cluster=True)\n",
                        "            if r == 0:\n                arrive(done, 0, 128, cluster=True)\n")
    r = proc_from_source(src, NS).check(**SM90A)
    d = [d for d in r.diagnostics if d.kind == "divergence"]
    assert d and d[0].witness["block1"]["r"] != d[0].witness["block2"]["r"], r


def test_check_refuses_mixed_arrives():
    src = RELAY.replace("            wait(done, 0, 128)\n",
                        "            wait(done, 0, 128)\n            arrive(done, 0, 128)\n"
                        "            wait(done, 0, 128)\n")
    r = proc_from_source(src, NS).check(**SM90A)
    assert any(d.kind == "divergence" and "mix cluster=True" in d.message
               for d in r.diagnostics), r


def test_check_refuses_it_outside_a_cluster():
    r = _p(**{"@ CLUSTERS": "@ BLOCKS"}).check(**SM90A)
    assert any(d.kind == "mapping" and "outside any @ CLUSTERS loop" in d.message
               for d in r.diagnostics), r


@pytest.mark.parametrize("tgt", ["sm_80", "sm_90"])
def test_targets_without_clusters_refuse(tgt):
    r = _p().check(target=tgt)
    d = [d for d in r.diagnostics if d.kind == "target"]
    assert d and d[0].witness["feature"] == "clusters", r


# ------------------------------------------------------------------ codegen, NVRTC, emulator


def test_codegen_maps_the_barrier_into_every_block():
    src = _p().cuda_source()
    assert "gpudsl_mbar_init(&done, 256);" in src           # 128 threads x 2 blocks
    assert "mapa.shared::cluster.u32" in src
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" in src
    assert "fence.mbarrier_init.release.cluster" in src
    assert "gpudsl_mbar_wait_cluster(&done" in src
    assert "try_wait.parity.acquire.cluster" in src
    # after the initialisation and at the end of the block: a sync_cluster()
    body = src[src.index("relay_k0("):]
    assert body.count("gpudsl_sync_cluster();") == 2


def test_nvrtc_builds_it_for_sm_90a_with_remote_arrives_in_the_sass():
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin

    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    res = compile_cubin(_p().cuda_source(), arch="sm_90a")
    counts = sass.opcode_counts(sass.disassemble(res.cubin), full=True)
    remote = sum(v for k, v in counts.items() if k.startswith("SYNCS.ARRIVE") and ".RED" in k)
    assert remote >= 1, counts                 # the arrive on a block's barrier by address
    assert counts["UCGABAR_ARV"] == 2 and counts["UCGABAR_WAIT"] == 2
    assert any(k.startswith("SYNCS.PHASECHK") for k in counts), counts
    with pytest.raises(Exception, match="need sm_90"):
        compile_cubin(_p().cuda_source(), arch="sm_80")


def test_emulator_equals_the_interpreter():
    n = 256 * 6
    y = _run(_p(), n, how="emulator")
    assert np.array_equal(y, _run(_p(), n)) and np.array_equal(y, _expected(n))


def test_emulator_runs_the_rounds():
    n, k = 512, 4
    x, y = np.zeros(n, np.float32), np.zeros(n, np.float32)
    _p(RING).compile("emulator")(n=n, k=k, x=x, y=y)
    assert np.array_equal(y, np.full(n, k * (k + 1) / 2, np.float32))


def test_emulator_reports_a_cluster_deadlock():
    with pytest.raises(LaunchError, match="deadlock: every block of the cluster waits"):
        _run(_p(**TWICE), 512, how="emulator")


# ------------------------------------------------------------------ primitives


def test_primitives_keep_or_refuse_it():
    from gpudsl.schedule import divide_loop, rename, simplify

    p = _p()
    for q in (simplify(p), rename(p, "relay2")):
        assert "cluster=True" in str(q) and q.check(**SM90A).ok
    with pytest.raises(SchedulingError):
        divide_loop(_p(RING), "it", 2, ["io", "ii"], tail="guard")
    # a rewrite of the code of blocks that meet only at cluster arrives is refused too
    from gpudsl.schedule.cluster_guard import broken_clusters
    moved = _p(**{"y[b * 256 + r * 128 + t] = x": "y[b * 256 + (1 - r) * 128 + t] = x"})
    why = broken_clusters(p.ir, moved.ir, "fission")
    assert why is not None and "arrive on each other's barriers" in why[0]
    assert broken_clusters(p.ir, moved.ir, "rename") is None


def test_emulator_reports_a_block_that_waits_forever_in_a_cluster():
    # rank 0 waits on a barrier nobody arrives on; rank 1 finishes (or waits at the
    # closing sync_cluster()): a deadlock of the cluster, reported, never a hang
    src = RELAY.replace("            arrive(done, 0, 128, cluster=True)\n", "").replace(
        "            wait(done, 0, 128)\n",
        "            if r == 0:\n                wait(done, 0, 128)\n")
    for extra in ("", "            sync_cluster()\n"):
        p = proc_from_source(src + extra, NS)
        with pytest.raises(LaunchError, match="deadlock"):
            p.compile("emulator", check=False)(n=512, x=np.zeros(512, np.float32),
                                               y=np.zeros(512, np.float32))


def test_check_refuses_a_phase_of_too_many_arrivals():
    # 2 blocks x 128 threads x 5000 arrivals each: past an mbarrier's 2^20 - 1
    r = _p(**{"cluster=True": "count=5000, cluster=True"}).check(**SM90A)
    d = [d for d in r.diagnostics if d.kind == "resource"]
    assert d and d[0].witness["arrivals"] == 2 * 128 * 5000, r
    assert _p(**{"cluster=True": "count=4000, cluster=True"}).check(**SM90A).ok


INNER = '''
@proc
def inner(n: size, x: f32[n] @ GLOBAL, y: f32[n] @ GLOBAL):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            done: barrier @ SHARED
            s: f32[128] @ SHARED
            for t in par(0, 128) @ THREADS:
                s[t] = x[b * 256 + r * 128 + t]
            arrive(done, 0, 128, cluster=True)
            wait(done, 0, 64)
            for t in par(0, 128) @ THREADS:
                y[b * 256 + r * 128 + t] = s[127 - t]
'''


def test_the_race_detector_sees_a_race_inside_a_block_across_its_wait_for_another():
    # threads 64..127 did not wait: their reads of s meet the writes of threads 0..63.
    # The block yields at the wait (the other block has not arrived yet) and resumes in
    # the same barrier phase (a new phase at each turn hid the race)
    from gpudsl.errors import RaceError

    bad = _p(INNER)
    assert "race" in bad.check(**SM90A).kinds()
    with pytest.raises(RaceError, match="SHARED s"):
        gpudsl.interpret(bad, n=512, x=np.arange(512, dtype=np.float32),
                         y=np.zeros(512, np.float32), detect_races=True)
    good = _p(INNER, **{"wait(done, 0, 64)": "wait(done, 0, 128)"})
    assert good.check(**SM90A).ok
    y = np.zeros(512, np.float32)
    gpudsl.interpret(good, n=512, x=np.arange(512, dtype=np.float32), y=y, detect_races=True)
    assert y[0] == 127.0 and y[128] == 255.0
