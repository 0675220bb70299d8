"""``gpudsl run SCRIPT --input name=file.npy --constants dir/``."""
import numpy as np

from gpudsl.cli import main

SCRIPT = """$1 = InputTensor(x, float32, [2, 3]);
$2 = ConstantTensor(w, float32, [3, 4]);
$3 = MatMulNode($1, $2);
$4 = ReLUNode($3);
result = $4;
"""


def _files(tmp_path):
    (tmp_path / "m.hk").write_text(SCRIPT)
    (tmp_path / "consts").mkdir()
    w = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    np.save(tmp_path / "consts" / "w.npy", w)
    np.save(tmp_path / "x.npy", x)
    return x, w


def test_run_saves_the_result(tmp_path, capsys):
    x, w = _files(tmp_path)
    rc = main(["run", str(tmp_path / "m.hk"), "--input", f"x={tmp_path / 'x.npy'}",
               "--constants", str(tmp_path / "consts"), "--output", str(tmp_path / "y.npy")])
    assert rc == 0
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.maximum(x @ w, 0))
    assert "arena" in capsys.readouterr().out


def test_run_prints_the_result(tmp_path, capsys):
    x, w = _files(tmp_path)
    assert main(["run", str(tmp_path / "m.hk"), "--input", f"x={tmp_path / 'x.npy'}",
                 "--constants", str(tmp_path / "consts")]) == 0
    assert "result float32 [2, 4]" in capsys.readouterr().out


def test_run_missing_constant_names_the_script_line(tmp_path, capsys):
    _files(tmp_path)
    rc = main(["run", str(tmp_path / "m.hk"), "--input", f"x={tmp_path / 'x.npy'}"])
    err = capsys.readouterr().err
    assert rc == 1 and "m.hk:2:6" in err and "'w' was not given" in err


def test_run_bad_script_is_refused_with_its_file_and_line(tmp_path, capsys):
    (tmp_path / "bad.hk").write_text("$1 = InputTensor(x, float32, [2]);\n$2 = Nope($1);\n"
                                     "result = $2;\n")
    assert main(["run", str(tmp_path / "bad.hk")]) == 1
    assert "bad.hk:2:6: unknown node 'Nope'" in capsys.readouterr().err


def test_run_non_utf8_script_is_a_graph_error(tmp_path, capsys):
    # issue 28: UnicodeDecodeError (a traceback)
    (tmp_path / "bad.hk").write_bytes(b"$1 = InputTensor(x, float32, [4]);\n// \xff\xfe\n"
                                      b"result = $1;\n")
    assert main(["run", str(tmp_path / "bad.hk")]) == 1
    err = capsys.readouterr().err
    assert "not UTF-8 text" in err and "line 2" in err


def test_run_unwritable_output_keeps_the_result(tmp_path, capsys):
    # issue 28: the result was lost when --output could not be written
    x, w = _files(tmp_path)
    rc = main(["run", str(tmp_path / "m.hk"), "--input", f"x={tmp_path / 'x.npy'}",
               "--constants", str(tmp_path / "consts"),
               "--output", str(tmp_path / "no" / "such" / "y.npy")])
    out = capsys.readouterr().out
    assert rc == 1 and "cannot write" in out and "result float32 [2, 4]" in out
    y = np.maximum(x @ w, 0)
    assert np.array2string(y, threshold=10 ** 9) in out


def test_tune_failure_is_one_line_not_a_traceback(capsys):
    import pytest

    pytest.importorskip("optuna")
    rc = main(["tune", "matmul", "--shape", "32x32", "--shape", "32x32", "--target",
               "emulator", "--db", "nosuchdriver://host/x", "--param", "bm=32",
               "--reps", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("gpudsl tune: ") and "Traceback" not in err


def test_run_output_is_the_path_given(tmp_path, capsys):
    # issue 39: "--output out" said "saved to out" and wrote out.npy
    x, w = _files(tmp_path)
    out = tmp_path / "out"
    rc = main(["run", str(tmp_path / "m.hk"), "--input", f"x={tmp_path / 'x.npy'}",
               "--constants", str(tmp_path / "consts"), "--output", str(out)])
    assert rc == 0 and f"saved to {out}" in capsys.readouterr().out
    assert not (tmp_path / "out.npy").exists()
    np.testing.assert_allclose(np.load(out), np.maximum(x @ w, 0))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_ctrl_c_in_a_command_is_one_line_and_status_130(tmp_path):
    # issue 39: Ctrl-C in gpudsl tune printed a traceback
    import subprocess
    import sys

    code = ("import sys, gpudsl.cli.tune_command as t\n"
            "def stop(ns): raise KeyboardInterrupt\n"
            "t.run_tune = stop\n"
            "from gpudsl.cli import main\n"
            "sys.exit(main(['tune', 'add', '--shape', '8', '--shape', '8']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr.startswith("gpudsl tune: interrupted") and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
