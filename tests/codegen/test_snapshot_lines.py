"""Issue 25: snapshots survive unrelated edits. Source lines in a snapshot count from
the proc's def line, so a line added above the proc (a comment, an import) leaves its
snapshot equal."""
from __future__ import annotations

import importlib.util
import sys

from gpudsl.testing import normalize_cuda

MODULE = '''from __future__ import annotations
from gpudsl import proc, par, BLOCKS, THREADS, f32, size
{extra}
@proc
def shifted_saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = a * x[128 * b + t] + y[128 * b + t]
'''


def _load(tmp_path, extra: str):
    folder = tmp_path / f"v{len(extra)}"
    folder.mkdir()
    path = folder / "shifted_proc.py"  # the same base name each time
    path.write_text(MODULE.format(extra=extra))
    spec = importlib.util.spec_from_file_location(f"shifted_proc_{len(extra)}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.shifted_saxpy


def test_a_line_added_above_the_proc_keeps_its_snapshot(tmp_path, cuda_snapshot):
    before = _load(tmp_path, "")
    after = _load(tmp_path, "# a comment added above the proc\n\n# and another\n")
    a, b = before.cuda_source(n=1024), after.cuda_source(n=1024)
    assert a != b  # the raw text has the real line numbers...
    assert "#line 9\n" in a and "#line 12\n" in b
    assert normalize_cuda(a) == normalize_cuda(b)  # ...the snapshot does not
    assert "(shifted_proc.py:1)" in normalize_cuda(b) and "#line 5\n" in normalize_cuda(b)
    assert cuda_snapshot == after  # the stored .cu was made from the proc as it was


def test_traced_kernels_count_lines_from_the_proc(tmp_path):
    from gpudsl.codegen.generate import generate

    p = _load(tmp_path, "\n\n")
    text = normalize_cuda(generate(p, dict(n=1024), trace=dict(block=(0, 0),
                                                           thread=(1, 0))).source)
    assert 'printf("shifted_proc.py:5: y[' in text
