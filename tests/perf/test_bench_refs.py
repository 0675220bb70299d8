"""Issue 34: every ``gpudsl bench`` row names its reference and the backend that ran
it, keeps its raw repetition times, and every results JSON says what ran (commit,
dirty flag, versions, the GPU's clocks and power at start and end)."""
from __future__ import annotations

import json
import types

import pytest

from gpudsl import bench
from gpudsl.bench import attention_cases as bench_attention
from gpudsl.bench import meta as bench_meta
from gpudsl.bench.case_timing import Run
from gpudsl.cli import main as cli_main

NODES = "matmul,matmul_bf16,attention,add,permute3d_021"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    rc = cli_main(["bench", "--backend", "emulator", "--nodes", NODES, "--reps", "2",
                   "--out", str(out)])
    assert rc == 0
    return json.loads(out.read_text())


def test_every_row_names_its_reference_backend_and_raw_times(data):
    rows = data["results"]
    assert {r["node"] for r in rows} == set(NODES.split(","))
    for r in rows:
        assert r["status"] == "ok", r
        assert r["reference"] and r["reference_backend"], r
        assert isinstance(r["reference_kernels"], list)
        assert len(r["timing"]["times_ms"]) == data["reps"]
        assert len(r["reference_timing"]["times_ms"]) == data["reps"]
        if r["kind"] == "flops":  # every candidate recorded, the chosen one among them
            assert any(x["backend"] == r["reference_backend"] and x["status"] == "ok"
                       for x in r["references"])
        else:  # bandwidth rows: against a copy of the same bytes
            assert r["ratio"] == r["copy_fraction"] > 0


def test_decode_attention_is_also_a_fraction_of_the_copy_rate(data):
    att = {r["size"]: r for r in data["results"] if r["node"] == "attention"}
    decode = att["2x1x64x64"]
    assert decode["bytes"] == 4 * 2 * 64 * (2 * 1 + 2 * 64)
    assert decode["copy_fraction"] > 0 and decode["copy_reference"]["elements"] == \
        decode["bytes"] // 8
    causal = att["2x32x32x64 causal"]
    assert causal["amount"] == 4 * 2 * 32 * 32 * 64 / 2  # FlashAttention's causal count
    assert "copy_fraction" not in causal


def test_results_json_says_what_ran(data):
    assert data["complete"] is True
    assert len(data["commit"]) == 40 and isinstance(data["dirty"], bool)
    v = data["versions"]
    assert {"gpudsl", "torch", "cuda", "cudnn", "cublas", "nvrtc"} <= set(v)
    for key in ("gpu_state_start", "gpu_state_end"):  # without nvidia-smi: says why
        st = data[key]
        assert st["fields"] if st["available"] else st["why"]


def test_gemms_at_both_sizes_in_four_precisions():
    assert bench.GEMM_SIZES == (4096, 8192)
    env = bench._Env("emulator")
    cases = bench._matmul_cases(env, True, set(bench.GEMMS))
    got = {(c.node, c.extra["dtype"], c.extra["tf32"]) for c in cases}
    assert got == {("matmul", "float32", False), ("matmul_tf32", "float32", True),
                   ("matmul_f16", "float16", False), ("matmul_bf16", "bfloat16", False)}


def test_attention_suite_is_the_flashattention_sweep():
    env = types.SimpleNamespace(backend="emulator", randn=lambda *s: None,
                                cast=lambda x, dt: x)
    suite = bench_attention.attention_cases(
        types.SimpleNamespace(**vars(env)), False, {"attention_suite"})
    assert len(suite) == 5 * 2 * 2 * 2
    seqlens = []
    for c in suite:
        b, h = c.extra["batch"], c.extra["heads"]
        d = 2048 // h
        s = int(c.size.split("x")[2])
        assert b * s == 16384 and d in (64, 128)
        assert c.amount == bench_attention.flops(b, h, s, s, d, c.extra["causal"])
        seqlens.append(s)
    assert seqlens == sorted(seqlens) and set(seqlens) == {512, 1024, 2048, 4096, 8192}
    assert {c.extra["dtype"] for c in suite} == {"float16", "bfloat16"}


def test_every_sdpa_backend_is_tried_and_the_fastest_kept():
    """With PyTorch (a CPU build is enough): the 4-D reference under each backend; those
    that refuse the case are recorded with their reason."""
    torch = pytest.importorskip("torch")

    def rel(got, want):
        got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
        return float((got - want).norm() / want.norm())

    env = types.SimpleNamespace(backend="cuda", torch=torch, rel_error=rel,
                                randn=lambda *s: torch.randn(*s),
                                cast=lambda x, dt: x.to(getattr(torch, dt)))
    case = bench_attention.attention_cases(env, True, {"attention_suite"})[0]  # float16
    assert [r.backend for r in case.refs] == list(bench_attention.SDPA_BACKENDS)
    run = Run("emulator", env, 2, 0, None, lambda *a: None, bench._peak)
    (row,) = run.rows(case)
    assert row["status"] == "ok", row.get("reason")
    by = {x["backend"]: x for x in row["references"]}
    assert set(by) == set(bench_attention.SDPA_BACKENDS)
    assert by["MATH"]["status"] == "ok"
    assert all(x["status"] == "ok" or x["reason"] for x in by.values())
    ok = [x for x in by.values() if x["status"] == "ok"]
    assert row["reference_backend"] == min(ok, key=lambda x: x["median_ms"])["backend"]
    assert row["ratio"] == pytest.approx(row["reference_median_ms"] / row["median_ms"])


def test_attention_options_case_is_checked_against_sdpa_with_a_mask():
    """The window-and-ALiBi prefill case (issue 37): on the 'cuda' path (here CPU torch)
    SDPA gets the same meaning as a float mask under each backend; MATH takes it, and
    the kernel's result agrees with it."""
    torch = pytest.importorskip("torch")

    def rel(a, b):
        a, b = (torch.as_tensor(x).double() for x in (a, b))
        return float((a - b).abs().max() / b.abs().max())
    env = types.SimpleNamespace(backend="cuda", torch=torch, rel_error=rel,
                                randn=lambda *s: torch.randn(*s),
                                cast=lambda x, dt: x.to(getattr(torch, dt)))
    cases = bench_attention.attention_cases(env, True, {"attention_options"})
    assert [c.extra["dtype"] for c in cases] == ["float16", "bfloat16"]
    assert all(c.extra["window"] and c.extra["alibi"] for c in cases)
    run = Run("emulator", env, 2, 0, None, lambda *a: None, bench._peak)
    (row,) = run.rows(cases[0])
    assert row["status"] == "ok", row.get("reason")
    by = {x["backend"]: x for x in row["references"]}
    assert set(by) == set(bench_attention.SDPA_BACKENDS) and by["MATH"]["status"] == "ok"


SMI = """==============NVSMI LOG==============

Driver Version                            : 580.159.04
CUDA Version                              : 13.0
GPU 00000000:18:00.0
    Clocks
        Graphics                          : 1980 MHz
        Memory                            : 2619 MHz
    Max Clocks
        Graphics                          : 1980 MHz
    GPU Power Readings
        Power Draw                        : 70.5 W
        Current Power Limit               : 700.00 W
"""


def test_nvidia_smi_clocks_and_power_are_parsed(monkeypatch):
    monkeypatch.setattr(bench_meta, "_run", lambda argv, timeout=30: (0, SMI))
    st = bench_meta.gpu_state()
    assert st["available"] and st["fields"]["Clocks/Graphics"] == "1980 MHz"
    assert st["fields"]["GPU Power Readings/Current Power Limit"] == "700.00 W"
    assert st["fields"]["Max Clocks/Graphics"] == "1980 MHz"


def test_the_stamp_gives_the_commit_where_there_is_no_git(tmp_path, monkeypatch):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # a repository above
    copy = tmp_path / "tree"
    stamp = bench_meta.write_stamp(bench_meta.ROOT, copy / bench_meta.STAMP)
    assert stamp["commit"] == bench_meta.tree_state()["commit"]
    for name in stamp["files"][:5]:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes((bench_meta.ROOT / name).read_bytes())
    st = bench_meta.tree_state(copy)  # not its own checkout: the stamp; missing files: dirty
    assert st["commit"] == stamp["commit"] and st["commit_from"] == bench_meta.STAMP
    assert st["dirty"] is True and st["changed_since_stamp"] is True


@pytest.mark.gpu
def test_gpu_sdpa_backends_are_forced_and_their_kernels_named():
    """On the GPU (the campaign's pytest -m gpu step): a small causal float16 case, each
    backend forced on 4-D tensors; flash runs, the chosen one's kernels are named."""
    pytest.importorskip("torch")
    env = bench._Env("cuda")
    case = bench_attention._case(env, "attention_suite", (2, 4, 256, 256, 64, True),
                                 "float16")
    run = Run("cuda", env, 3, 1, None, lambda *a: None, bench._peak)
    (row,) = run.rows(case)
    assert row["status"] == "ok", row.get("reason")
    by = {x["backend"]: x for x in row["references"]}
    assert by["FLASH_ATTENTION"]["status"] == "ok" and by["MATH"]["status"] == "ok"
    assert row["reference_kernels"], row
    assert not row["reference_kernels"][0].startswith("(profiler"), row["reference_kernels"]
    assert len(row["reference_timing"]["times_ms"]) == 3
    fp32 = bench_attention._case(env, "attention", (1, 4, 1, 512, 128, False), "float32")
    (row,) = run.rows(fp32)
    refused = {x["backend"]: x for x in row["references"]}["FLASH_ATTENTION"]
    assert refused["status"] == "unavailable" and refused["reason"]  # no float32 flash
    assert row["copy_fraction"] > 0


def test_a_checkout_behind_the_stamp_reports_the_stamped_commit(tmp_path):
    """The device tool of 2026-11-29 sent a .git at the session's first commit with the
    later commits as uncommitted changes: the JSON said that first commit, dirty.  Where
    the stamped files are exactly the stamp's, the stamped commit is the truth."""
    import subprocess

    def git(*a):
        return subprocess.run(["git", "-C", str(tmp_path), *a], check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@t"), git("config", "user.name", "t")
    (tmp_path / "a.py").write_text("one\n")
    git("add", "a.py"), git("commit", "-qm", "first")
    first = git("rev-parse", "HEAD")
    (tmp_path / "a.py").write_text("two\n")
    git("commit", "-qam", "second")
    second = git("rev-parse", "HEAD")
    bench_meta.write_stamp(tmp_path)
    git("reset", "-q", "--soft", first)   # the tree of `second`, HEAD at `first`
    st = bench_meta.tree_state(tmp_path)
    assert st["commit"] == second and st["dirty"] is False and st["git_head"] == first
    (tmp_path / "a.py").write_text("three\n")   # changed since the stamp: git's word
    st = bench_meta.tree_state(tmp_path)
    assert st["commit"] == first and st["dirty"] is True and st["commit_from"] == "git"
