"""Host time per ``gpudsl.ops`` call and per compiled-kernel call.

``--cpu`` (any machine, no GPU): the launches go to the recording backend
(``gpudsl/runtime/recording.py``: it records each launch instead of running it), so
what is timed is gpudsl's host Python alone: argument checks, the launch plan and
their cache; one case ("cuda (fake)") calls a kernel compiled for the CUDA backend on
gpudsl device buffers with the driver replaced by a fake
(``gpudsl/runtime/fake_driver.py``): the prepared launcher's path up to
``cuLaunchKernel``; one ("Model llama step") evaluates the LLaMA decode step of
``examples/llama.py`` compiled for the GPU under the fake driver: the inputs checked
and copied in, one CUDA graph replay, the logits copied out.  ``--only TEXT`` runs the
cases whose name contains it.  Printed per case: microseconds per call, the first call of a new
signature (the full path, which fills the cache), and Python function calls per call (cProfile's count over 1,000 calls).
Times per call are the best and the median of 7 rounds of ``--calls`` calls, and
the best round's CPU time (the process's own: what a loaded machine does not inflate).

Without ``--cpu`` (a GPU and PyTorch): host time per compiled-kernel call and per
``gpudsl.ops`` call with CUDA tensors against PyTorch's own operation (calls enqueued,
then one synchronize), and a cProfile of ``ops.add``.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time


def per_call_us(f, calls: int, rounds: int = 7) -> tuple[float, float, float]:
    """(best, median, best CPU) microseconds per call over ``rounds`` rounds of
    ``calls`` calls: on a shared machine the best round is the code's own cost, the
    median shows the machine's load, and the CPU time (``time.process_time``: this
    process's own, not the time it waited for a core) the cost under load."""
    f()
    times, cpu = [], []
    for _ in range(rounds):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(calls):
            f()
        times.append((time.perf_counter() - t) / calls * 1e6)
        cpu.append((time.process_time() - c) / calls * 1e6)
    return min(times), statistics.median(times), min(cpu)


def python_calls(f, calls: int = 1000) -> float:
    f()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        f()
    pr.disable()
    return pstats.Stats(pr).total_calls / calls


def first_call_us(make, repeat: int = 50) -> float:
    """A call whose signature is not cached: a fresh ``make()`` per call (the cases'
    caches are cleared by ``make``)."""
    times = []
    for _ in range(repeat):
        f = make()
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def cpu_cases():
    """(name, call, fresh-call maker) with the recording backend."""
    import numpy as np

    from gpudsl.runtime.backends import BACKENDS, register_backend
    from gpudsl.runtime.recording import RecordingBackend
    from gpudsl.stdlib import array_ops as ops

    if "record" not in BACKENDS:
        register_backend("record", RecordingBackend)
    ops.backend = lambda: "record"   # gpudsl.ops compiles and runs for the recorder

    k = _saxpy().compile("record")
    x = np.arange(1024, dtype=np.float32)
    y = np.ones(1024, dtype=np.float32)
    a = np.random.rand(1024, 1024).astype(np.float32)
    b = np.random.rand(1024, 1024).astype(np.float32)
    small = np.random.rand(64, 64).astype(np.float32)
    row = np.random.rand(64).astype(np.float32)

    def forget():  # the fast path's caches (absent before it existed)
        for obj in (k, cuda, tma, *ops._compiled.values()):
            getattr(obj, "_fast", {}).clear()
        if hasattr(ops, "_fast"):
            ops._fast.forget()

    cuda, dx, dy = _on_fake_driver()
    tma, ta, ty = _tma_on_fake_driver()
    cases = [
        ("kernel saxpy(a=, x=, y=)", lambda: k(a=2.0, x=x, y=y)),
        ("kernel saxpy cuda (fake)", lambda: cuda(1024, 2.0, dx, dy)),
        ("kernel tma tile cuda (fake)", lambda: tma(a=ta, y=ty)),
        ("kernel saxpy positional", lambda: k(1024, 2.0, x, y)),
        ("ops.add 1024x1024", lambda: ops.add(a, b)),
        ("ops.add 64x64 + row", lambda: ops.add(small, row)),
        ("ops.relu 1024x1024", lambda: ops.relu(a)),
        ("ops.matmul 64x64", lambda: ops.matmul(small, small)),
    ]
    return [(name, f, (lambda f=f: (forget(), f)[1])) for name, f in cases]


_FAKE = None


def _on_fake_driver():
    """saxpy compiled for the CUDA backend (NVRTC) and two device buffers, the driver
    a recording fake (``gpudsl/runtime/fake_driver.py``) whose ``cuLaunchKernel`` does
    nothing: what is timed is gpudsl's prepared launch path, not the driver's own
    (ctypes' conversion of the 11 arguments and the driver call: about 1-2 us more on a
    GPU machine)."""
    from gpudsl.runtime import fake_driver
    from gpudsl.runtime.device import DeviceBuffer

    global _FAKE
    if _FAKE is None:
        _FAKE = fake_driver.installed("sm_90a")   # kept: for the rest of the process
        _FAKE.__enter__().cuLaunchKernel = lambda *args: 0
    return _saxpy().compile("cuda"), DeviceBuffer(1024), DeviceBuffer(1024)


def _tma_on_fake_driver():
    """A TMA tile copy compiled for the CUDA backend (sm_90a) and two device arrays,
    under the fake driver: the prepared launch path with one tensor map looked up per
    call (the sm_90a GEMMs have three)."""
    import pathlib
    import sys

    import numpy as np

    from gpudsl import proc_from_source
    from gpudsl.runtime.device import DeviceBuffer

    root = str(pathlib.Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.hopper.test_tma import TILE   # the tile copy the TMA tests run

    _on_fake_driver()
    k = proc_from_source(TILE, file="<host_overhead>").compile("cuda")
    return k, DeviceBuffer((64, 64), np.float16), DeviceBuffer((64, 64), np.float16)


def model_case(layers: int = 6):
    """(name, call, fresh-call maker): one LLaMA decode step (examples/llama.py,
    stories15M sizes with a 512-word vocabulary) as ``Model.evaluate`` on numpy
    inputs, compiled for the GPU under the fake driver: the checks, the copies in,
    one ``cuGraphLaunch`` and the copy out (driver calls recorded, not run)."""
    import importlib.util
    import pathlib
    import sys
    from dataclasses import replace

    from gpudsl import graph

    _on_fake_driver()
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "llama.py"
    spec = importlib.util.spec_from_file_location("llama_example", path)
    llama = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = llama
    spec.loader.exec_module(llama)
    cfg = replace(llama.STORIES15M, n_layers=layers, vocab_size=512)
    w = llama.random_weights(cfg)
    from gpudsl.stdlib import array_ops as ops

    backend, ops.backend = ops.backend, lambda: "cuda"   # compiled for the GPU
    try:
        model = graph.compile(llama.build_graph(cfg, w))
    finally:
        ops.backend = backend
    assert model.device == "cuda"
    inputs = llama.step_inputs(cfg, w, 1, 3)
    step = lambda: model.evaluate(inputs)  # noqa: E731
    return (f"Model llama step ({layers} layers)", step, lambda: step)


def _saxpy():
    from gpudsl import BLOCKS, THREADS, f32, par, proc, size

    @proc
    def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
        assert n % 256 == 0
        for b in par(0, n // 256) @ BLOCKS:
            for t in par(0, 256) @ THREADS:
                y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]
    return saxpy


def run_cpu(calls: int, only: str = "") -> None:
    import numpy as np

    x = np.random.rand(64, 64).astype(np.float32)
    best, median, cpu = per_call_us(lambda: x + x, calls)
    print(f"@@host {'numpy x + x (64x64)':28} {best:6.2f} us/call (median {median:6.2f}, "
          f"CPU {cpu:6.2f})")
    cases = cpu_cases()
    if only in "Model llama step":
        cases.append(model_case())
    for name, f, fresh in cases:
        if only not in name:
            continue
        best, median, cpu = per_call_us(f, calls)
        first = first_call_us(fresh)
        n = python_calls(f)
        print(f"@@host {name:28} {best:6.2f} us/call (median {median:6.2f}, CPU "
              f"{cpu:6.2f}); "
              f"uncached signature {first:6.1f} us; {n:5.1f} Python calls/call")


def run_gpu() -> None:
    import torch

    from gpudsl.stdlib import array_ops as ops
    x = torch.randn(1024, 1024, device="cuda")
    y = torch.randn(1024, 1024, device="cuda")
    a = torch.randn(256, 256, device="cuda")
    k = _saxpy().compile("cuda")
    v, w = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    cases = [("kernel saxpy", lambda: k(1 << 20, 2.0, v, w), lambda: w.add_(v, alpha=2.0)),
             ("add", lambda: ops.add(x, y), lambda: x + y),
             ("silu", lambda: ops.silu(x), lambda: torch.nn.functional.silu(x)),
             ("permute", lambda: ops.permute(x, (1, 0)), lambda: x.t().contiguous()),
             ("matmul256", lambda: ops.matmul(a, a), lambda: a @ a),
             ("rms_norm", lambda: ops.rms_norm(x, x[0]),
              lambda: x * torch.rsqrt((x * x).mean(-1, keepdim=True)) * x[0]),
             ("sliced_softmax", lambda: ops.sliced_softmax(x, 512),
              lambda: torch.softmax(x[:, :512], -1))]
    for name, f, g in cases:
        for h in (f, g):
            h(), h()
            torch.cuda.synchronize()
        res = []
        for h in (f, g):
            t = time.perf_counter()
            for _ in range(200):
                h()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            res.append(((t1 - t) / 200 * 1e6, (t2 - t) / 200 * 1e6))
        print(f"@@host {name:15} gpudsl enqueue {res[0][0]:7.1f} us/call (with sync "
              f"{res[0][1]:7.1f}); torch {res[1][0]:6.1f} ({res[1][1]:6.1f})")
    print(f"@@host ops.add Python calls per call {python_calls(lambda: ops.add(x, y)):.1f}")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(300):
        ops.add(x, y)
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true",
                    help="no GPU: the recording backend, gpudsl's host Python alone")
    ap.add_argument("--calls", type=int, default=5000, help="calls per timing round (--cpu)")
    ap.add_argument("--only", default="", help="the cases whose name contains this (--cpu)")
    args = ap.parse_args()
    run_cpu(args.calls, args.only) if args.cpu else run_gpu()


if __name__ == "__main__":
    main()
