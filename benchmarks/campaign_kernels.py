"""The program compute-sanitizer watches in the GPU campaign
(``benchmarks/gpu_campaign.py``): every standard-library node once on small odd and
tile-sized shapes, compared with numpy, then every kernel of check()'s test corpus
(``tests/analysis/corpus*.py``) that check() proves safe, compiled (proved again) and
run once on random inputs.  ``--controls`` adds the corpus's racy kernels (compiled
without the proof): racecheck should flag those whose race is in shared memory.

Before each case it prints ``@@case <kind> <name>`` (kind: stdlib, corpus, control)
and flushes, so the campaign can attribute each sanitizer report to the case that was
running.  Exit status 1 on a wrong result or a failing case.  A corpus kernel the
target cannot compile (check() proves a host-level ``par`` loop that codegen refuses; an
``@instr`` the emulator cannot build) prints ``SKIP`` and does not run.

Which cases: ``--stdlib`` (the nodes), ``--hopper`` (the derived sm_90a GEMMs on
clipped shapes; an sm_90a GPU or the emulator), ``--corpus`` (the corpus's proved kernels),
``--sync`` (user kernels with ranged/split barriers and warp collectives,
``benchmarks/campaign_sync.py``, once the language has them: otherwise one ``SKIP``
line), ``--controls`` (the racy corpus kernels); with none of the first three, the
nodes and the corpus.  ``--list`` prints the cases without running them (no GPU
needed); ``--target emulator`` runs them on the CPU emulator (to test this program
without a GPU); ``--only SUBSTRING`` keeps the cases whose name contains it."""
from __future__ import annotations

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = "@@case"


def cases():
    """(name, function of a numpy Generator returning (result, expected))."""
    from gpudsl import ops

    def mm(m, n, k):
        def f(g):
            a, b = g.standard_normal((m, n), np.float32), g.standard_normal((n, k), np.float32)
            return ops.matmul(a, b), a @ b
        return f

    def bin_(op, sa, sb, ref):
        def f(g):
            a, b = g.standard_normal(sa, np.float32), g.standard_normal(sb, np.float32)
            return getattr(ops, op)(a, b), ref(a, b)
        return f

    def un(op, shape, ref):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            return getattr(ops, op)(x), ref(x)
        return f

    def perm(shape, p):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            return ops.permute(x, p), np.transpose(x, p)
        return f

    def sl(shape, b, e):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            return ops.slice(x, b, e), x[b:e]
        return f

    def rs(shape, b, e):
        def f(g):
            x = g.standard_normal(shape, np.float32)
            r = g.standard_normal((e - b,) + shape[1:], np.float32)
            want = x.copy()
            want[b:e] = r
            out = ops.replace_slice(x, r, np.array([b]), np.array([e]))
            return (x if out is None else out), want
        return f

    def attn(h, m, n, d, causal, prefix=None):
        def f(g):
            from gpudsl.stdlib.attention import attention_reference

            q = g.standard_normal((h, m, d), np.float32)
            k, v = (g.standard_normal((h, n, d), np.float32) for _ in range(2))
            return (ops.attention(q, k, v, causal=causal, prefix=prefix),
                    attention_reference(q, k, v, causal=causal, prefix=prefix))
        return f

    silu = lambda x: x / (1 + np.exp(-x))  # noqa: E731
    return [
        ("matmul 256^3", mm(256, 256, 256)), ("matmul 130x70x33", mm(130, 70, 33)),
        ("add 2-D", bin_("add", (300, 257), (300, 257), np.add)),
        ("add broadcast", bin_("add", (64, 129), (1, 129), np.add)),
        ("mul broadcast", bin_("mul", (3, 64, 33), (3, 1, 33), np.multiply)),
        ("relu", un("relu", (1000, 3), lambda x: np.maximum(x, 0))),
        ("silu", un("silu", (4097,), silu)),
        ("permute 2-D", perm((300, 129), (1, 0))),
        ("permute 3-D", perm((17, 64, 33), (2, 0, 1))),
        ("slice", sl((100, 65), 7, 93)), ("replace_slice", rs((100, 65), 7, 93)),
        ("attention decode", attn(2, 1, 40, 64, False, 33)),
        ("attention prefill causal", attn(2, 17, 17, 128, True)),
    ]


def hopper_cases():
    """(name, case) of the derived sm_90a GEMMs (TMA + wgmma, barrier rings) on
    clipped shapes, where the edges are guarded: ``c``'s rows 16 bytes apart (the
    epilogue's TMA store) and not (guarded stores), f16 and bf16, and the TF32 twin.
    Each derives and proves its kernel on the CPU first (10-25 s)."""
    def nt(m, n, k, dt, tf32=False):
        def f(g):
            import ml_dtypes

            from gpudsl.stdlib.matmul_sm90 import matmul_nt_sm90
            from gpudsl.stdlib.matmul_sm90_tf32 import matmul_tf32_sm90

            npdt = np.float32 if tf32 else {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dt]
            a = g.integers(-3, 4, (m, k)).astype(npdt)     # exact in every precision
            bt = g.integers(-3, 4, (n, k)).astype(npdt)
            got = (matmul_tf32_sm90 if tf32 else matmul_nt_sm90)(a, bt)
            return np.asarray(got, np.float32), a.astype(np.float32) @ bt.astype(np.float32).T
        return f

    return [("sm90 f16 200x136x64 (TMA store)", nt(200, 136, 64, "f16")),
            ("sm90 bf16 130x100x64 (guarded stores)", nt(130, 100, 64, "bf16")),
            ("sm90 tf32 136x72x32", nt(136, 72, 32, "f32", tf32=True))]


def corpus_cases(controls: bool = False):
    """(kind, name, case) for each corpus kernel check() proves ("corpus") and, with
    ``controls``, each one it finds racy ("control")."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.analysis import corpus, corpus_atomics

    out = []
    for c in list(corpus.CASES) + list(corpus_atomics.CASES):
        if c.expect == "ok":
            out.append(("corpus", c.name, c))
        elif controls and c.expect == "race":
            out.append(("control", c.name, c))
    return out


def sync_cases():
    """(kind, name, case) for the synchronization kernels of ``campaign_sync.py``; an
    empty list and the reason when the language cannot parse them yet."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        from benchmarks import campaign_sync
    except Exception as e:  # the language lacks a construct: say so, run the rest
        return [], f"{type(e).__name__}: {e}".splitlines()[0][:300]
    return [("sync", name, f) for name, f in campaign_sync.cases()], ""


def select(argv) -> list:
    """The cases the flags ask for, in order: nodes, sync kernels, corpus, controls."""
    want = {f for f in ("--stdlib", "--corpus", "--sync") if f in argv}
    if not want and "--hopper" not in argv:
        want = {"--stdlib", "--corpus"}
    cs = [("stdlib", n, f) for n, f in cases()] if "--stdlib" in want else []
    if "--hopper" in argv:
        cs += [("stdlib", n, f) for n, f in hopper_cases()]
    if "--sync" in want:
        found, why = sync_cases()
        cs += found or [("skip", "sync kernels", why)]
    if "--corpus" in want or "--controls" in argv:
        cs += [x for x in corpus_cases("--controls" in argv)
               if "--corpus" in want or x[0] == "control"]
    return cs


def run_corpus_case(c, target: str, proved: bool) -> str:
    """Compile (proving first unless a control) and run one corpus kernel once."""
    from tests.analysis.helpers import make_args, sample_sizes

    sizes = sample_sizes(c.proc, c.bindings)
    if sizes is None:
        return "no sizes satisfy the proc's asserts"
    k = c.proc.compile(target, check=proved, **c.bindings)
    k(**make_args(c.proc, sizes))
    return ""


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    target = "cuda"
    if "--target" in argv:
        target = argv[argv.index("--target") + 1]
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    cs = [x for x in select(argv) if only in x[1]]
    if "--list" in argv:
        for kind, name, _ in cs:
            print(kind, name)
        return 0
    if target == "emulator":
        import gpudsl.stdlib.array_ops as ops_mod

        if ops_mod.backend() != "emulator":
            print("--target emulator: set GPUDSL_NO_GPU=1 on a GPU machine", file=sys.stderr)
            return 2
    from gpudsl.errors import CompileError

    g = np.random.default_rng(0)
    bad = 0
    for kind, name, f in cs:
        if kind == "skip":
            print(f"SKIP {kind} {name}: {f}", flush=True)
            continue
        print(f"{MARK} {kind} {name}", flush=True)
        try:
            if kind in ("stdlib", "sync"):
                got, want = f(g)
                ok = np.allclose(np.asarray(got), want, rtol=1e-3, atol=1e-3)
                why = "" if ok else "differs from numpy"
            else:
                why = run_corpus_case(f, target, proved=kind == "corpus")
        except CompileError as e:  # proved, but not a kernel this target runs: no run
            if kind in ("stdlib", "sync"):
                raise
            print(f"SKIP {kind} {name}: {str(e).splitlines()[0][:300]}", flush=True)
            continue
        except Exception as e:  # every case runs; the failure is reported
            why = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        bad += bool(why) and kind != "control"
        print(f"{'ok ' if not why else 'BAD'} {kind} {name}" + (f": {why}" if why else ""),
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
