"""The sm_90a half prefill (issue 37, ``gpudsl.stdlib.attention_sm90``): TMA loads of Q
and of a K/V ring, S = Q K^T and O += P V by wgmma, the online softmax on the wgmma
fragment.  Proved by check(target="sm_90a") for every size (no assertion); equal to the
float64 reference within ``attention_mma_tolerance`` on the emulator (causal or not, D
64 / 128, f16 / bf16, odd and even lengths, prefixes, several heads, one or two
consumer warpgroups); twins with an edge of the ring or a barrier removed refused; NVRTC
builds it for sm_90a without spills, with HGMMA for both products and UTMALDG in the
key loop; ``plan_prefill`` picks it for sm_90a only; on an H100/H200 ``ops.attention``
runs it and equals torch's SDPA."""
from __future__ import annotations

import re
import types
from collections import Counter

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl.stdlib import attention_sm90 as a90
from gpudsl.stdlib.attention import attention_reference
from gpudsl.stdlib.attention_mma import attention_mma_tolerance

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def inputs(h, m, n, d, dt, seed=0):
    g = np.random.default_rng(seed + 1000 * h + 100 * m + n + d)
    return tuple(g.standard_normal(s, dtype=np.float32).astype(NP[dt])
                 for s in ((h, m, d), (h, n, d), (h, n, d)))


def run_emulator(p, q, k, v, prefix):
    out = np.zeros(q.shape, q.dtype)
    err = np.zeros(1, np.int32)
    p.compile("emulator")(q=q, k=k, v=v, prefix=np.array([prefix], np.int64),
                          scale=np.float32(q.shape[2] ** -0.5), out=out, err=err)
    return out, int(err[0])


# ---------------------------------------------------------------- proved


@pytest.mark.parametrize("d,causal,dt,wgs,stages", [
    (64, False, "f16", 1, 2), (64, True, "f16", 2, 3), (128, False, "bf16", 2, 2),
    (128, True, "f16", 1, 4), (128, True, "bf16", 2, 2)])
def test_proved_for_every_size_on_sm90a_only(d, causal, dt, wgs, stages):
    p = a90.attention_sm90_kernel(d, causal, dt, wgs, stages)
    assert "assert" not in str(p)           # every hh, m, n
    rep = p.check(target="sm_90a")
    assert rep.ok, str(rep)
    assert "target" in p.check(target="sm_90").kinds()   # TMA and wgmma are sm_90a's


# ---------------------------------------------------------------- the meaning

# (heads, query rows, keys, prefix): even and odd lengths, a prefix below the keys,
# several query blocks, a block whose rows run past m
SHAPES = [(1, 64, 64, 64), (2, 70, 70, 70), (3, 129, 200, 200), (1, 33, 97, 97),
          (2, 50, 130, 90), (1, 200, 131, 131)]


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_equal_to_the_reference_on_the_emulator(d, causal, dt):
    p = a90.attention_sm90_kernel(d, causal, dt, **a90.PLAN[d])
    for h, m, n, prefix in SHAPES:
        if causal and m > prefix:
            continue
        q, k, v = inputs(h, m, n, d, dt)
        got, err = run_emulator(p, q, k, v, prefix)
        want = attention_reference(q, k, v, causal, prefix)
        tol = attention_mma_tolerance(q, k, v, causal, prefix, dt=dt)
        assert err == 0
        bad = np.abs(got.astype(np.float64) - want) > tol
        assert not bad.any(), ((h, m, n, prefix), np.argwhere(bad)[:3])


@pytest.mark.parametrize("d,causal,wgs,stages", [(64, True, 1, 3), (128, False, 2, 4)])
def test_other_tiles_equal_the_reference(d, causal, wgs, stages):
    if True:
        p = a90.attention_sm90_kernel(d, causal, "f16", wgs, stages)
        q, k, v = inputs(2, 150, 150, d, "f16", seed=wgs * 10 + stages)
        got, err = run_emulator(p, q, k, v, 150)
        tol = attention_mma_tolerance(q, k, v, causal, 150, dt="f16")
        assert err == 0 and (np.abs(got - attention_reference(q, k, v, causal, 150))
                             <= tol).all()


@pytest.mark.parametrize("d,causal,wgs,stages", [(64, True, 1, 3), (128, False, 2, 2)])
def test_the_variant_with_v_transposed_is_proved_and_equal(d, causal, wgs, stages):
    """``v_major="k"``: V copied transposed by the consumers, K-major B (the kernel
    before wgmma read MN-major operands)."""
    p = a90.attention_sm90_kernel(d, causal, "bf16", wgs, stages, "k")
    assert p.name.endswith("_vt_bf16") and "vt[" in str(p)
    assert p.check(target="sm_90a").ok
    q, k, v = inputs(2, 100, 130, d, "bf16")
    prefix = 120
    got, err = run_emulator(p, q, k, v, prefix)
    tol = attention_mma_tolerance(q, k, v, causal, prefix, dt="bf16")
    want = attention_reference(q, k, v, causal, prefix)
    assert err == 0 and (np.abs(got.astype(np.float64) - want) <= tol).all()


def test_a_prefix_outside_its_bounds_raises_the_fault_flag():
    p = a90.attention_sm90_kernel(64, True, "f16", 1, 2)
    q, k, v = inputs(1, 70, 80, 64, "f16")
    for prefix in (0, 69, 81):          # below 1, below the rows (causal), above n
        assert run_emulator(p, q, k, v, prefix)[1] == 1
    assert run_emulator(p, q, k, v, 75)[1] == 0


# ---------------------------------------------------------------- twins

_W1 = dict(d=64, causal=True, dt="f16", wgs=1, stages=2)
_PV = ("                for t in par(0, 128) @ THREADS:\n"
       "                    for kk")
_RELEASE = "                arrive(empty[jt % 2], 0, 128)\n"
# (what the twin replaces: (old, new) pairs) per way of reading V
TWINS = {
    # the producer refills a slot the consumers may still read
    "no wait for a free slot": [("                wait(empty[jt % 2], 128, 129)\n", "")],
    # the consumers read a slot whose copies have not landed
    "no wait for the tile": [("                wait(full[jt % 2], 0, 128)\n", "")],
    # the block's Q rows read before their copy lands
    "no wait for Q": [("            wait(qbar, 0, 128)\n", "")],
    # P (and V^T) read by the wgmma before every thread of the warpgroup wrote them
    "no barrier before P V": [("                sync(0, 128)\n" + _PV, _PV)],
}
TWINS_OF = {
    "k": {**TWINS,
          # no wait for S = Q K^T: the slot handed back (and S read) while it runs
          "S in flight": [("                    wgmma_wait(0)\n" + _RELEASE, _RELEASE)],
          # the next tile's P and V^T written while the P V wgmma may read them
          "no barrier after P V": [("                    wgmma_wait(0)\n"
                                    "                sync(0, 128)\n",
                                    "                    wgmma_wait(0)\n")]},
    "mn": {**TWINS,
           # no wait for S = Q K^T before the softmax reads it
           "S in flight": [("                    wgmma_wait(0)\n"
                            "                for t in par(0, 128) @ THREADS:\n"
                            "                    if ",
                            "                for t in par(0, 128) @ THREADS:\n"
                            "                    if ")],
           # the slot (V) handed back before the P V wgmma that reads it
           "V released before P V": [(_RELEASE + "                sync(0, 128)\n",
                                      "                sync(0, 128)\n"),
                                     ("                sync(0, 128)\n" + _PV,
                                      "                sync(0, 128)\n" + _RELEASE + _PV)],
           # the next tile's P written while the P V wgmma may read it
           "no barrier after P V": [(_RELEASE + "                sync(0, 128)\n", _RELEASE)]},
}


@pytest.mark.parametrize("twin", sorted(TWINS_OF[a90.V_MAJOR]))
def test_twins_without_an_edge_are_refused(twin):
    text = a90.kernel_text(**_W1)
    assert a90.attention_sm90_kernel(**_W1).check(target="sm_90a").ok
    for old, new in TWINS_OF[a90.V_MAJOR][twin]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    p = gpudsl.proc_from_source(text, {k: getattr(gpudsl, k) for k in gpudsl.__all__})
    assert "race" in p.check(target="sm_90a").kinds()


@pytest.mark.slow
def test_the_interpreter_with_the_race_detector_agrees():
    p = a90.attention_sm90_kernel(**_W1)
    q, k, v = inputs(1, 70, 70, 64, "f16")
    out, err = np.zeros(q.shape, q.dtype), np.zeros(1, np.int32)
    gpudsl.interpret(p, q=q, k=k, v=v, prefix=np.array([70], np.int64),
                     scale=np.float32(0.125), out=out, err=err, detect_races=True)
    assert np.array_equal(out, run_emulator(p, q, k, v, 70)[0])


# ---------------------------------------------------------------- machine code


def _key_loop(d, causal, dt, wgs, stages):
    """(resources, opcode counts of the key loop: the innermost loop holding every
    HGMMA, full opcodes) of the sm_90a build."""
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin

    p = a90.attention_sm90_kernel(d, causal, dt, wgs, stages)
    r = compile_cubin(generate(p.ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm")
    text = sass.disassemble(r.cubin)
    (ins,) = sass.parse_sass(text).values()
    hg = [i.addr for i in ins if i.base == "HGMMA"]
    s, e = min(((s, e) for s, e in sass.loops(ins) if s <= min(hg) and max(hg) <= e),
               key=lambda r: r[1] - r[0])
    body = [i for i in ins if s <= i.addr <= e]
    ops = Counter()  # the whole opcode (the parser stops an HGMMA's at its shape)
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", line)
        if m and s <= int(m.group(1), 16) <= e:
            ops[m.group(2)] += 1
    return res, Counter(i.base for i in body), ops


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_nvrtc_sm90a_no_spills_hgmma_for_both_products(d, causal, dt):
    """Every kernel ``plan_prefill`` picks."""
    try:
        res, base, ops = _key_loop(d, causal, dt, **a90.PLAN[d])
    except ImportError as e:  # pragma: no cover - environments without NVRTC
        pytest.skip(f"NVRTC not available: {e}")
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    assert base["LDL"] == 0 and base["STL"] == 0
    t = ".BF16" if dt == "bf16" else ""
    # S: 4 k16 steps per 64 columns of D, m64n64; P V: 4 k16 steps, m64nD
    want = Counter({f"HGMMA.64x64x16.F32{t}": 4 * d // 64})
    want[f"HGMMA.64x{d}x16.F32{t}"] += 4
    assert {k: v for k, v in ops.items() if k.startswith("HGMMA")} == dict(want)
    # the K boxes and the V box(es): one for V^T's copy, D / 64 swizzled MN-major
    assert base["UTMALDG"] == d // 64 + (1 if a90.V_MAJOR == "k" else d // 64)
    assert base["MUFU"] >= 2 * (32 + 2)            # p and alpha, masked and not
    assert base["SHFL"] == 8                       # the row maxima, two branches
    assert base["LDSM"] == 0                       # the products read by descriptor


# ---------------------------------------------------------------- the choice


def test_plan_prefill_picks_it_for_sm90a_only():
    assert a90.plan_prefill(64, 128, True, 8, 64, dt="f16", target="sm_90a").name == \
        a90.attention_sm90_kernel(128, True, "f16", **a90.PLAN[128]).name
    assert a90.plan_prefill(300, 64, False, dt="bf16", target="sm_90a").name == \
        a90.attention_sm90_kernel(64, False, "bf16", **a90.PLAN[64]).name
    # other architectures: the mma.sync kernel; not a prefill, f32, other head
    # dimensions, options: the kernels that take them
    assert a90.plan_prefill(64, 128, True, dt="f16", target="sm_80").name == \
        "attention_mma_d128_causal_f16"
    for args, kw in (((64, 128, True), dict(dt="f16", target="emulator")),
                     ((64, 128, True), dict(dt="f16")),
                     ((64, 128, True), dict(target="sm_90a")),          # f32
                     ((64, 96, True), dict(dt="f16", target="sm_90a")),
                     ((3, 128, True), dict(dt="f16", target="sm_90a")),  # decode
                     ((64, 128, True), dict(dt="f16", target="sm_90a", window=16)),
                     ((64, 128, True), dict(dt="f16", target="sm_90a", alibi=True))):
        assert not a90.plan_prefill(*args, **kw).name.startswith("attention_sm90")


def test_ops_and_the_graph_node_plan_through_it(monkeypatch):
    """``ops.attention`` and the attention node ask :func:`plan_prefill` with the
    backend ``"cuda"``, which means the device's architecture."""
    import gpudsl.runtime.driver as drv

    monkeypatch.setattr(drv, "_arch", "sm_90a")
    assert a90.plan_prefill(128, 64, False, dt="f16", target="cuda").name.startswith(
        "attention_sm90")
    from gpudsl.bench.attention_cases import attention_cases, planned_kernel

    fa3 = (1, 16, 4096, 4096, 128, True)        # the bench's half prefill row
    assert planned_kernel("cuda", fa3, "float16") == \
        a90.attention_sm90_kernel(128, True, "f16", **a90.PLAN[128]).name
    monkeypatch.setattr(drv, "_arch", "sm_80")
    assert a90.plan_prefill(128, 64, False, dt="f16", target="cuda").name.startswith(
        "attention_mma")
    assert planned_kernel("cuda", fa3, "float16") == "attention_mma_d128_causal_f16"
    assert planned_kernel("emulator", fa3, "float32") is None
    env = types.SimpleNamespace(backend="emulator", randn=lambda *s: None,
                                cast=lambda x, dt: x)
    rows = attention_cases(env, False, {"attention"})
    assert [(c.extra["dtype"], c.extra["kernel"]) for c in rows][-1] == \
        ("float16", "attention_d128_causal_r4_f16")
    import inspect

    from gpudsl.stdlib import attention_op, node_table
    for mod in (attention_op, node_table):   # ops.attention's call lives in attention_op
        assert "from .attention_sm90 import plan_prefill" in inspect.getsource(mod)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_on_an_h100_through_ops_against_torch_sdpa(d, causal, dt):
    torch = pytest.importorskip("torch")
    from gpudsl import ops
    from gpudsl.runtime.driver import device_arch

    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    assert a90.plan_prefill(1000, d, causal, dt=dt, target="cuda").name.startswith(
        "attention_sm90")
    tt = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
    for h, m in ((3, 70), (4, 1000), (2, 2048)):
        q, k, v = (torch.from_numpy(np.asarray(x, np.float32)).to("cuda", tt)
                   for x in inputs(h, m, m, d, dt))
        got = ops.attention(q, k, v, causal=causal)
        want = torch.nn.functional.scaled_dot_product_attention(
            q[None], k[None], v[None], is_causal=causal)[0]
        q64, k64, v64 = (x.float().cpu().numpy() for x in (q, k, v))
        tol = attention_mma_tolerance(q64, k64, v64, causal, m, dt=dt)
        ref = attention_reference(q64, k64, v64, causal, m)
        got = got.float().cpu().numpy()
        assert (np.abs(got - ref) <= tol).all(), (h, m)
        # and torch's fused kernel (which rounds P to the half type too) agrees
        assert (np.abs(got - want.float().cpu().numpy()) <= 4 * tol).all(), (h, m)
