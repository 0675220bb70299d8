"""Issue 25: a tuning run's printed table, its winner line and ``res.source()`` agree:
the table is ordered by the figure that picks the winner (the winner first) and shows
the re-timed figures; the source imports or carries the build function (never
``from __main__``) and runs in a fresh process; the table has an HTML form."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from gpudsl.autotune.result import Best, Result

ROOT = Path(__file__).resolve().parents[2]


def _result(records, win):
    win["winner"] = True
    return Result(lambda c: None, "t", records, Best(lambda c: None, win), "emulator",
                  {"device": "cpu"}, {}, True)


def test_table_is_ordered_by_the_deciding_figure_and_shows_it():
    a = {"params": {"x": 1}, "status": "ok", "median_ms": 1.0, "retimed_ms": 1.5}
    b = {"params": {"x": 2}, "status": "ok", "median_ms": 1.2, "retimed_ms": 1.1}
    c = {"params": {"x": 3}, "status": "ok", "median_ms": 1.3}
    d = {"params": {"x": 4}, "status": "wrong", "median_ms": None}
    res = _result([a, c, d, b], b)
    lines = res.table().splitlines()
    assert "re-timed ms" in lines[1]
    rows = [ln.split()[0] for ln in lines[2:6]]
    assert rows == ["2", "3", "1", "4"]  # winner, then 1.3 (median) before 1.5 (re-timed)
    assert "WINNER" in lines[2] and "1.1" in lines[2] and "1.2" in lines[2]
    assert lines[-1].startswith("winner: {'x': 2} 1.1 ms (re-timed median")
    assert res.best.time_ms == 1.1
    html = res._repr_html_()
    assert html.count("<tr") == 5 and "WINNER" in html and "<table>" in html


SCRIPT = '''
from __future__ import annotations
import sys
from gpudsl import autotune, proc, seq, BLOCKS, THREADS, f32, size
from gpudsl.schedule import divide_loop, parallelize_loop

NAMES = ["b", "t"]

@proc
def scale(n: size, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for i in seq(0, n):
        y[i] = 2.0 * x[i]


def split(p, threads):
    return divide_loop(p, "i", threads, NAMES, tail="perfect")


def build(c):
    p = split(scale, c.threads)
    p = parallelize_loop(p, "b", BLOCKS)
    return parallelize_loop(p, "t", THREADS)


res = autotune.tune(build, autotune.Space(threads=[64, 128]),
                    shapes={"x": (1024,), "y": (1024,)}, reference=lambda x, y: 2 * x,
                    backend="emulator", db=sys.argv[1], reps=3)
print(res.table())
open(sys.argv[2], "w").write(res.source())
open(sys.argv[3], "w").write(str(res.best.proc))
'''


def test_source_of_a_script_runs_in_a_fresh_process(tmp_path):
    script = tmp_path / "tune_me.py"
    script.write_text(textwrap.dedent(SCRIPT))
    src, best = tmp_path / "winner.py", tmp_path / "best.txt"
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "db.sqlite"), str(src),
                        str(best)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                          "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    table = r.stdout.splitlines()
    assert "WINNER" in table[2]
    text = src.read_text()
    assert "__main__" not in text and "def build(c):" in text
    winner_ms = table[-1].split("} ")[1].split(" ms")[0]
    assert f": {winner_ms} ms" in text.splitlines()[1]  # the source says the same figure
    check = tmp_path / "fresh"
    check.mkdir()
    run = subprocess.run([sys.executable, "-c", "import runpy; ns = runpy.run_path("
                          f"{str(src)!r}); print(ns['proc'], end='')"],
                         capture_output=True, text=True, timeout=300, cwd=check,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                              "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert run.stdout == best.read_text()


def test_source_of_an_importable_build_imports_it():
    from gpudsl.autotune.result import build_source
    from gpudsl.stdlib.matmul import MatmulBuild

    head, expr = build_source(MatmulBuild((64, 64), (64, 64)))
    assert head.strip() == "from gpudsl.stdlib.matmul import MatmulBuild"
    assert expr == "MatmulBuild((64, 64), (64, 64))"
    head, expr = build_source(build_source)
    assert head.strip() == "from gpudsl.autotune.result import build_source"


def test_the_db_message_says_whether_ops_reads_it(tmp_path, monkeypatch):
    from gpudsl.cli.tune_command import where_ops_reads

    monkeypatch.setenv("GPUDSL_TUNE_DB", str(tmp_path / "ops.sqlite"))
    assert where_ops_reads(None).startswith("gpudsl.ops uses it")
    assert where_ops_reads(str(tmp_path / "ops.sqlite")).startswith("gpudsl.ops uses it")
    other = where_ops_reads(str(tmp_path / "elsewhere.sqlite"))
    assert "not this database" in other and "gpudsl.ops uses it" not in other
    assert f"GPUDSL_TUNE_DB={tmp_path / 'elsewhere.sqlite'}" in other


def test_progress_bar_is_tqdm_auto_and_notebooks_get_widgets():
    import importlib
    import inspect

    tune_mod = importlib.import_module("gpudsl.autotune.tune")  # the module, not tune()

    assert "from tqdm.auto import tqdm" in inspect.getsource(tune_mod._Bar)
    text = (ROOT / "pyproject.toml").read_text()
    notebooks = text.split("notebooks = [", 1)[1].split("]", 1)[0]
    assert "ipywidgets" in notebooks and "matplotlib" in notebooks
    env = (ROOT / "docs" / "environment.md").read_text()
    assert "`tune.optuna.sqlite`" in env
