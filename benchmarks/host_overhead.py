"""Host time per ``gpudsl.ops`` call against PyTorch's own operation, with CUDA tensors
(200 calls enqueued, then one synchronize), and where ``ops.add``'s host time goes
(cProfile).  Needs a GPU and PyTorch; the campaigns ran it as ``python3
benchmarks/host_overhead.py`` after part 1 (figures in benchmarks/results/)."""
import time, cProfile, pstats
import torch
from gpudsl.stdlib import ops
x = torch.randn(1024, 1024, device="cuda"); y = torch.randn(1024, 1024, device="cuda")
a = torch.randn(256, 256, device="cuda")
cases = [("add", lambda: ops.add(x, y), lambda: x + y), ("silu", lambda: ops.silu(x), lambda: torch.nn.functional.silu(x)),
         ("permute", lambda: ops.permute(x, (1, 0)), lambda: x.t().contiguous()), ("matmul256", lambda: ops.matmul(a, a), lambda: a @ a),
         ("rms_norm", lambda: ops.rms_norm(x, x[0]), lambda: x * torch.rsqrt((x * x).mean(-1, keepdim=True)) * x[0]),
         ("sliced_softmax", lambda: ops.sliced_softmax(x, 512), lambda: torch.softmax(x[:, :512], -1))]
for name, f, g in cases:
    for h in (f, g):
        h(); h(); torch.cuda.synchronize()
    res = []
    for h in (f, g):
        t = time.perf_counter()
        for _ in range(200): h()
        t1 = time.perf_counter(); torch.cuda.synchronize(); t2 = time.perf_counter()
        res.append(((t1 - t) / 200 * 1e6, (t2 - t) / 200 * 1e6))
    print(f"@@host {name:15} gpudsl enqueue {res[0][0]:7.1f} us/call (with sync {res[0][1]:7.1f}); torch {res[1][0]:6.1f} ({res[1][1]:6.1f})")
pr = cProfile.Profile(); pr.enable()
for _ in range(300): ops.add(x, y)
pr.disable(); torch.cuda.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(18)
