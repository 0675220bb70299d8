"""A producer warpgroup and setmaxnreg in the derived sm_90a GEMM (issue 36; docs/hopper.md
"A main loop derived by primitives"): ``warp_specialize(..., issuers=)`` keeps a whole
producer warpgroup in the block with one thread issuing the TMA loads, ``set_registers``
places setmaxnreg (check()'s register-file proof), and code generation writes one branch
per role so that ptxas honours it (no ``C7507``), which leaves room for the swizzled
epilogue tile of the 128 x 256 tile without spills."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gpudsl import SchedulingError
from gpudsl.ir.nodes import SetMaxNReg
from gpudsl.ir.visitor import walk
from gpudsl.perf import sass as sass_mod
from gpudsl.schedule import set_registers
from gpudsl.stdlib.matmul_sm90 import register_split, sm90_kernel, sm90_space

from .cases import roles

SMALL_WG = dict(bn=64, wgs=1, bk=32, stages=2, producer="warpgroup")
WIDE_WG = dict(bn=256, wgs=2, bk=64, stages=4, producer="warpgroup")


def test_set_registers_places_what_check_proves():
    bare = roles(regs=())
    p = set_registers(set_registers(bare, "b", 40, 0, 128), "b", 232, 128, 384)
    text = str(p)                              # lowered first, then raised, at the top
    assert text.index("setmaxnreg(40, 0, 128)") < text.index("setmaxnreg(232, 128, 384)") < \
        text.index("s: f32[384] @ SHARED")
    assert p.check(target="sm_90a").ok


@pytest.mark.parametrize("args, msg", [
    ((240, 128, 384), "registers"),          # 40 + 240 + 240 > 3 x 168
    ((232, 128, 300), "warpgroups"),         # not whole warpgroups
    ((236, 128, 384), "multiple of 8"),
])
def test_set_registers_refuses_what_check_refuses(args, msg):
    p = set_registers(roles(regs=()), "b", 40, 0, 128)
    with pytest.raises(SchedulingError, match=msg):
        set_registers(p, "b", *args)
    with pytest.raises(SchedulingError, match="innermost @ BLOCKS"):
        set_registers(p, "t", 40, 0, 128)


def test_register_split_is_the_register_file_arithmetic():
    assert register_split(2) == (40, 232)      # 40 + 2 x 232 = 504 = 3 x 168
    assert register_split(1) is None           # 256 threads start with 255 each


def test_the_producer_warpgroup_is_derived_and_proved():
    text = str(sm90_kernel("f16", **SMALL_WG))
    assert "for idle in par(128, 256) @ THREADS:" in text
    assert "wait(empty[po % 2], 128, 129)" in text and "arrive(full[po % 2], 128, 129)" in text
    assert "tma_load(As[po % 2" in text and "setmaxnreg" not in text
    wide = sm90_kernel("f16", **WIDE_WG)
    regs = [(s.regs, s.lo.val, s.hi.val) for s in walk(wide.ir.body) if isinstance(s, SetMaxNReg)]
    assert regs == [(40, 256, 384), (232, 0, 256)]
    assert "Cs: f16[128, 64] @ SHARED(swizzle=128)" in str(wide)   # the slab swizzled
    assert "Cs: f16[128, 64] @ SHARED\n" in str(sm90_kernel("f16", **dict(WIDE_WG, producer="thread")))
    for p in (sm90_kernel("f16", **SMALL_WG), wide):
        r = p.check(target="sm_90a")
        assert r.ok, r


def test_issuers_must_lie_inside_the_producers():
    from gpudsl.stdlib import matmul_sm90 as M
    from gpudsl.schedule import warp_specialize
    with pytest.raises(SchedulingError, match="inside producers"):
        orig = M.warp_specialize
        M.warp_specialize = lambda p, loop, **kw: warp_specialize(
            p, loop, **dict(kw, issuers=(160, 161)))
        try:
            M.schedule_matmul_sm90(M.matmul_nt_algorithm("f16", (64, 64, 32)), bn=64, wgs=1,
                                   bk=32, stages=2, producer="thread")
        finally:
            M.warp_specialize = orig


def _operands(m, n, k, dt, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(dt)
    bt = rng.integers(-3, 4, (n, k)).astype(dt)
    return a, bt, (a.astype(np.float32) @ bt.astype(np.float32).T)


@pytest.mark.parametrize("dt, cfg, shape", [
    ("f16", SMALL_WG, (128, 192, 96)), ("bf16", SMALL_WG, (64, 64, 32)),
    ("f16", WIDE_WG, (128, 256, 128)), ("bf16", dict(WIDE_WG, clip=True), (130, 248, 64)),
    ("bf16", dict(WIDE_WG, clip=True, tma_store=False), (130, 250, 64))],
    ids=["64x64-f16", "64x64-bf16", "128x256-f16", "128x256-clipped-tma-store-bf16",
         "128x256-clipped-bf16"])
def test_the_warpgroup_variants_equal_numpy_on_the_emulator(dt, cfg, shape):
    """The emulator runs the generated C, role branches included."""
    import ml_dtypes
    npdt = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    a, bt, want = _operands(*shape, npdt, seed=sum(shape))
    c = np.full(shape[:2], 7, npdt)
    sm90_kernel(dt, **cfg).compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want.astype(npdt)).all()


def test_code_generation_writes_one_branch_per_role():
    from gpudsl.codegen import generate
    src = generate(sm90_kernel("f16", **WIDE_WG).ir, {}).source
    consumers = src.index("if (0 <= gpudsl_warp && gpudsl_warp < 8) {  // threads [0, 256)")
    producer = src.index("} else {  // threads [256, 384)")
    # each branch runs its own setmaxnreg; the other one's is decided false there
    assert src.index("      gpudsl_setmaxnreg_inc<232>();") < producer
    assert src.index("      gpudsl_setmaxnreg_dec<40>();") > producer > consumers
    assert "if (false) gpudsl_setmaxnreg_dec<40>();" in src[consumers:producer]
    # the SHARED tiles are carved out of one dynamic buffer: both branches name its bytes
    assert src.count("reinterpret_cast<__half (*)[4][128][64]>(gpudsl_smem + 0)") == 2
    # without setmaxnreg the roles are the wgmma warps and the others (the producer
    # thread's branch on threadIdx.x is not warp-uniform: C7518 in one body)
    bare = generate(sm90_kernel("f16", **dict(WIDE_WG, registers=False)).ir, {}).source
    assert "} else {  // threads [256, 384)" in bare and "setmaxnreg" not in bare
    # a producer thread (257 threads, not whole warps): one body, as before
    one = generate(sm90_kernel("f16", **dict(WIDE_WG, producer="thread")).ir, {}).source
    assert "// threads [" not in one and "__launch_bounds__(257)" in one


def _ops(text: str) -> Counter:
    from gpudsl.perf.sass import opcode_counts
    return opcode_counts(text)


@pytest.mark.parametrize("cfg", [WIDE_WG, dict(WIDE_WG, tma_store=False),
                                 dict(WIDE_WG, registers=False),
                                 dict(bn=128, wgs=1, bk=64, stages=4, producer="warpgroup")],
                         ids=["128x256", "128x256-direct", "128x256-no-setmaxnreg", "64x128"])
def test_sm90a_build_honours_setmaxnreg_without_spills(cfg):
    """Regression: in one straight-line body ptxas dropped the setmaxnreg (C7507: the
    producer could reach the consumers' code) and serialized the wgmmas (C7518: the
    producer thread's branch was not warp-uniform)."""
    from gpudsl.codegen import generate
    from gpudsl.runtime.nvrtc import compile_cubin
    r = compile_cubin(generate(sm90_kernel("f16", **cfg).ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    for code in ("C7507", "C7518", "C7519", "serialized"):
        assert code not in r.log, r.log
    if not sass_mod.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    text = sass_mod.disassemble(r.cubin)
    ops = _ops(text)
    moves = 2 if cfg["wgs"] == 2 and cfg.get("registers", True) else 0  # 232 and 40
    assert ops["USETMAXREG"] == moves
    if moves:
        assert "USETMAXREG.DEALLOC.CTAPOOL 0x28" in text and "TRY_ALLOC.CTAPOOL" in text
    assert ops["HGMMA"] == cfg["bk"] // 16 and ops["UTMALDG"] == 2
    assert ops["LDS"] == ops["LDSM"] == ops["LDG"] == ops["LDL"] == ops["STL"] == 0
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text
    slabs = cfg["bn"] // 64 if cfg.get("tma_store", True) else 0
    assert ops["UTMASTG"] == slabs


def test_the_space_offers_both_producers():
    space = sm90_space()
    # two consumer warpgroups: the default (a warpgroup with setmaxnreg) and the thread
    assert {c.get("producer") for c in space if c["wgs"] == 2} == {None, "thread"}
    assert {c.get("producer") for c in space if c["wgs"] == 1} == {None}
    assert sm90_kernel("f16", bn=256, wgs=2, bk=64, stages=4) is sm90_kernel("f16", **WIDE_WG)
    assert "idle" not in str(sm90_kernel("f16", **dict(WIDE_WG, producer="thread", bk=32)))
