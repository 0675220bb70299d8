"""Issue 34: LLaMA tokens/s against PyTorch in gpudsl's dtype, prefill and decode apart,
every pass kept (``benchmarks/llama_bench.py`` on the emulator, small model)."""
from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("llama_bench",
                                                  ROOT / "benchmarks" / "llama_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_llama_rows_per_implementation_variant_and_dtype(tmp_path):
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    rc = _load().main(["--quick", "--variants", "eager,graph", "--dtypes", "float16",
                       "--out", str(tmp_path)])
    data = json.loads((tmp_path / "llama.json").read_text())
    assert rc == 0 and data["complete"] and data["quick"]
    assert {"commit", "dirty", "versions", "gpu_state_start", "gpu_state_end"} <= set(data)
    rows = {(r["impl"], r.get("variant"), r["dtype"]): r for r in data["rows"]}
    ours = rows["gpudsl", "graph.compile (emulator)", "float16"]
    assert ours["tokens_agree"] and len(ours["passes"]) == data["passes"] == 2
    assert ours["prefill_tokens_per_s"] > 0 and ours["decode_tokens_per_s"] > 0
    assert all(set(p) == {"prefill_s", "decode_s"} for p in ours["passes"])
    eager = rows["torch", "eager", "float16"]
    if have_torch:  # the same dtype as ours, and the same tokens as numpy's
        assert eager["tokens_agree"] and eager["device"] == "cpu"
        assert len(eager["passes"]) == 2
    else:
        assert eager["skipped"] == "PyTorch is not installed"
    assert "skipped" in rows["torch", "graph", "float16"]  # no GPU here


@pytest.mark.gpu
def test_llama_cuda_graph_variant_on_the_gpu(tmp_path):
    """The CUDA-graph capture of the PyTorch model (one layer, short passes)."""
    pytest.importorskip("torch")
    rc = _load().main(["--quick", "--variants", "eager,graph", "--dtypes", "float16",
                       "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "llama.json").read_text())["rows"]
    assert rc == 0 and not [r for r in rows if "error" in r or "skipped" in r], rows
    graph = next(r for r in rows if r.get("variant") == "graph")
    assert graph["device"] == "cuda" and graph["decode_tokens_per_s"] > 0
