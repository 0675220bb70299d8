"""Non-ASCII identifiers (issue 28): they ran on the emulator (g++ takes UTF-8
identifiers) but NVRTC refuses them.  The generated CUDA is now pure ASCII: identifiers
mangled (``gpudslU...Z``, which no user name can take), comments escaped."""
from __future__ import annotations

import numpy as np

import gpudsl
from gpudsl.codegen.cexpr import ascii_ident, cname

SRC = '''
def échelle(données: f32[4], sortie: f32[4], gpudslUdonn_x00e9_esZ: f32[4]):
    for b in par(0, 1) @ BLOCKS:
        for tâche in par(0, 4) @ THREADS:
            sortie[tâche] = 2.0 * données[tâche] + gpudslUdonn_x00e9_esZ[tâche]
'''


def test_generated_cuda_is_ascii_and_runs():
    p = gpudsl.proc_from_source(SRC, namespace=vars(gpudsl))
    src = p.cuda_source()
    assert src.isascii()
    assert "échelle" not in src and "\\xe9chelle" in src  # the comment, escaped
    x = np.arange(4, dtype=np.float32)
    z = np.full(4, 10, np.float32)
    y = np.zeros(4, np.float32)
    p.compile("emulator")(données=x, sortie=y, gpudslUdonn_x00e9_esZ=z)
    np.testing.assert_array_equal(y, 2 * x + 10)


def test_mangled_names_are_distinct_from_user_names():
    names = ["données", "donn_ées", "données_", "gpudslUdonn_x00e9_esZ", "a", "int"]
    out = [cname(n) for n in names]
    assert len(set(out)) == len(out) and all(o.isascii() for o in out)
    assert ascii_ident("tâche") == "gpudslUt_xe2_cheZ"
