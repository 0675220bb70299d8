"""``gpudsl bench``: the emulator mode (CI) and its output's structure; the GPU mode
where there is one."""
from __future__ import annotations

import json

import pytest

from gpudsl import bench
from gpudsl.cli import main as cli_main

NODES = ("matmul,matmul_1stage,matmul_tf32,matmul_tf32_async,matmul_f16,matmul_bf16,add_bcast,"
         "permute3d_210,slice,replace_slice,attention")


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    rc = cli_main(["bench", "--backend", "emulator", "--nodes", NODES, "--reps", "2",
                   "--out", str(out)])  # options right after "bench" (the campaign's form)
    return rc, json.loads(out.read_text())


def test_emulator_bench_writes_labelled_results(emulated):
    rc, data = emulated
    assert rc == 0
    assert data["emulated"] is True and data["backend"] == data["target"] == "emulator"
    assert {"device", "driver", "date", "command", "results", "copy_references"} <= set(data)
    assert data["command"].startswith("gpudsl bench --backend emulator")
    ok = [r for r in data["results"] if r["status"] == "ok"]
    assert {r["node"] for r in ok} == set(NODES.split(","))
    for r in ok:
        assert r["timing"]["emulated"] and r["timing"]["method"] == "perf_counter"
        assert r["roofline_fraction"] is None  # no device roofline for CPU figures
        assert r["ratio"] > 0 and r["rate"] > 0 and r["reference_median_ms"] > 0
        half = r["node"].startswith(("matmul_tf32", "matmul_f16", "matmul_bf16")) or \
            "float16" in r["size"]          # the half rows (attention's f16 prefill)
        assert r["rel_error"] <= r["tolerance"] == (1e-2 if half else 1e-4)
        assert r["unit"] == ("FLOP/s" if r["node"].startswith(("matmul", "attention"))
                             else "B/s")
    # bandwidth nodes at several sizes, each against a copy of its own element count
    for node in ("add_bcast", "permute3d_210", "slice", "replace_slice"):
        assert len({r["size"] for r in ok if r["node"] == node}) == len(bench.EMU_SIZES)
    copies = {(c["elements"], c["flushed"]): c["bytes_per_s"]
              for c in data["copy_references"]}
    for r in ok:
        if r["node"] in ("slice", "replace_slice"):  # bytes = read + write of the copy
            assert r["reference_rate"] == copies[r["amount"] // 8, r["l2"] == "cold"]
    # issue 34: every bandwidth row at every size, cold and warm L2, both reported
    for r in ok:
        if r["unit"] == "B/s":
            twin = [x for x in ok if (x["node"], x["size"]) == (r["node"], r["size"])]
            assert sorted(x["l2"] for x in twin) == ["cold", "warm"]
    tf32 = [r for r in data["results"] if r["node"] == "matmul_tf32"]
    assert len(tf32) == 1 and tf32[0]["status"] == "ok"
    assert tf32[0]["rel_error"] > 1e-6  # the emulator rounds the inputs to TF32


def test_replace_slice_rows_use_their_own_bounds(emulated):
    """Regression: the cases' lambdas bound the loop's last row count (late binding), so
    the first size's replace_slice compared against the wrong rows (relative error 1.01)."""
    _, data = emulated
    rows = [r for r in data["results"] if r["node"] in ("slice", "replace_slice")]
    assert rows and all(r["status"] == "ok" for r in rows), rows


def test_bench_refuses_unknown_nodes_and_missing_gpu(capsys, monkeypatch):
    assert bench.main(["--nodes", "nope"]) == 2
    monkeypatch.setattr(bench, "_need_gpu", lambda: "no CUDA device is visible to PyTorch")
    assert bench.main(["--nodes", "add"]) == 2
    assert "--backend emulator" in capsys.readouterr().err


def test_the_old_target_flag_still_runs_with_a_warning(capsys):
    # "target" names an architecture now: --target is --backend's deprecated spelling
    assert bench.main(["--target", "emulator", "--nodes", "relu", "--reps", "1",
                       "--warmup", "0"]) == 0
    assert "--target is deprecated" in capsys.readouterr().err
    assert bench.main(["--target", "emulator", "--backend", "cuda", "--nodes", "relu"]) == 2


def test_peak_figures_come_from_the_device_table():
    from gpudsl.perf.devices import device

    h100 = device("NVIDIA H100 80GB HBM3")
    assert bench._peak(h100, "flops", "matmul") == h100.fp32_flops == 66.9e12
    assert bench._peak(h100, "bytes", "add") == h100.bandwidth
    assert bench._peak(None, "bytes", "add") is None


def test_tensor_core_rows_are_measured_against_tensor_core_peaks():
    # the H100 campaign of 2026-11-26 printed roofline 271% for matmul_f16 (181 TFLOP/s
    # measured against the 66.9 TFLOP/s FP32 peak) and none for TF32
    from gpudsl.perf.devices import device

    h100 = device("H100")
    assert bench._peak(h100, "flops", "matmul_f16") == 989.4e12
    assert bench._peak(h100, "flops", "matmul_tf32_async") == 494.7e12
    assert bench._peak(device("A100"), "flops", "matmul_tf32") == 156e12
    assert 181e12 / bench._peak(h100, "flops", "matmul_f16") < 1


@pytest.mark.gpu
def test_gpu_bench_small_subset(tmp_path):
    out = tmp_path / "b.json"
    rc = cli_main(["bench", "--nodes", "matmul,add,permute2d", "--reps", "5", "--out", str(out)])
    data = json.loads(out.read_text())
    assert rc == 0 and data["emulated"] is False and data["device"]
    for r in data["results"]:
        assert r["status"] == "ok" and r["timing"]["method"] == "cuda-events"
        assert r["roofline_fraction"] > 0 and r["ratio"] > 0
        if r["l2"] == "cold":  # from HBM: under the peak (warm rows may read from L2)
            assert r["roofline_fraction"] < 1.05


def test_rows_come_in_priority_order(emulated):
    """Issue 34: a bench stopped by its time limit keeps the GEMMs, then attention, then
    the bandwidth nodes; the kernel variants come last."""
    _, data = emulated
    first = {}
    for i, r in enumerate(data["results"]):
        first.setdefault(r["node"], i)
    order = sorted(first, key=first.get)
    assert order[:4] == ["matmul", "matmul_tf32", "matmul_f16", "matmul_bf16"]
    assert order[4] == "attention"
    assert order.index("add_bcast") < order.index("matmul_1stage")
    assert order[-2:] == ["matmul_1stage", "matmul_tf32_async"]
