"""Kernel printf on the emulator lands in the module's buffer (``mod.output``), not in the
C stdout, which a notebook does not show; long lines and many threads stay whole."""
import numpy as np

from gpudsl.runtime.emulator import build_emulator_module
from gpudsl.runtime.signature import KernelSig

SOURCE = r"""
extern "C" __global__ void say(int n, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = i; if (i % 100 == 7) printf("thread %d of block %u: %g\n", i, blockIdx.x, (double)y[i]); }
  if (i == 0) printf("%0600d|\n", 5);
}
"""


def test_printf_is_buffered_per_launch(capfd):
    mod = build_emulator_module(SOURCE, [KernelSig("say", ["int", "float*"])], workers=4)
    n = 64 * 256
    y = np.zeros(n, np.float32)
    mod.launch("say", (64,), (256,), [n, y])
    lines = mod.output.splitlines()
    assert capfd.readouterr().out == ""  # nothing on the C stdout
    long = "0" * 599 + "5|"
    assert lines.count(long) == 1
    rest = sorted(ln for ln in lines if ln != long)
    want = sorted(f"thread {i} of block {i // 256}: {i}" for i in range(7, n, 100))
    assert rest == want
    mod.launch("say", (1,), (8,), [8, y])  # the next launch: only its own lines
    assert mod.output.splitlines() == [long, "thread 7 of block 0: 7"]  # threads run in order
