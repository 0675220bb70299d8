"""``gpudsl.perf.sass.opcode_counts``: the SASS opcode counter the machine-code tests and
``benchmarks/sass_table.py`` share (it replaced copies that counted ``NOP;`` apart)."""
from gpudsl.perf.sass import opcode_counts

TEXT = """
        //--------------------- .text.k --------------------------
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @P0  HGMMA.64x256x16.F32 R24, gdesc[UR4], RZ, !UPT ;
        /*0020*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0030*/                   NOP;
        /*0040*/                   DEPBAR.LE SB0, 0x0 ;
        /*0050*/              @!P1 EXIT ;
"""


def test_counts_base_opcodes_predicated_ones_and_warpgroup_waits():
    ops = opcode_counts(TEXT)
    assert ops["LDC"] == 1 and ops["HGMMA"] == 1 and ops["EXIT"] == 1
    assert ops["NOP"] == 1 and "NOP;" not in ops
    assert ops["WARPGROUP"] == 1 and ops["DEPBAR"] == 2   # a DEPBAR and a warpgroup wait


def test_full_opcodes():
    ops = opcode_counts(TEXT, full=True)
    assert ops["HGMMA.64x256x16.F32"] == 1 and ops["WARPGROUP.DEPBAR.LE"] == 1


def test_parse_sass_keeps_whole_opcodes_with_lower_case_shapes():
    """The opcode pattern stopped at the first lower-case letter: ``HGMMA.64x256x16.F32``
    was read as ``HGMMA.64`` and the rest as an operand."""
    from gpudsl.perf.sass import parse_sass
    (instrs,) = parse_sass(TEXT).values()
    hg = next(i for i in instrs if i.base == "HGMMA")
    assert hg.op == "HGMMA.64x256x16.F32" and hg.operands[0] == "R24" and hg.pred == "@P0"
