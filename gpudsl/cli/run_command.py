"""``gpudsl run SCRIPT --input name=file.npy --constants dir/ [--output out.npy]``.

Compiles the HamKaas script (constants from ``dir/<name>.npy``), evaluates it once on
the inputs and prints the result (or saves it with ``--output``)."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile

import numpy as np

from ..errors import GraphError


def _load(path: str, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise GraphError(f"cannot read {what} from {path}: {e}") from None


def run_script(script: str, inputs: list[str], constants_dir: str | None,
               output: str | None = None, out=None) -> int:
    from .. import graph

    out = out or sys.stdout
    try:
        with open(script, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise GraphError(f"cannot read the script {script}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        line = e.object[:e.start].count(b"\n") + 1
        raise GraphError(f"the script {script} is not UTF-8 text (byte {e.object[e.start]:#04x} "
                         f"on line {line})", hint="save the script as UTF-8") from None
    g = graph.parse(text, file=script)
    consts = {}
    for name in g.constants:
        if constants_dir is None:
            break
        path = os.path.join(constants_dir, f"{name}.npy")
        if os.path.exists(path):
            consts[name] = _load(path, f"constant {name!r}")
    values = {}
    for item in inputs or []:
        name, sep, path = item.partition("=")
        if not sep or not name:
            raise GraphError(f"--input takes NAME=FILE.npy, got {item!r}")
        values[name.strip()] = _load(path, f"input {name!r}")
    model = graph.compile(text, constants=consts, file=script)
    result = model.evaluate(values)
    if output:
        try:
            _save_as(output, result)
        except OSError as e:  # the result is not lost: printed instead
            print(f"cannot write {output}: {e.strerror or e}; the result follows", file=out)
            print(f"result {result.dtype} {list(result.shape)}", file=out)
            print(np.array2string(result, threshold=sys.maxsize), file=out)
            print(model.memory, file=out)
            return 1
        print(f"result {result.dtype} {list(result.shape)} saved to {output}", file=out)
    else:
        print(f"result {result.dtype} {list(result.shape)}", file=out)
        print(np.array2string(result, threshold=200), file=out)
    print(model.memory, file=out)
    return 0


def _save_as(path: str, result) -> None:
    """``result`` in ``.npy`` format at exactly ``path`` (``np.save`` would add ``.npy`` to a
    name without it), written whole or not at all (a temporary file, then a rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".gpudsl-run-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, result)
        os.chmod(tmp, 0o666 & ~_umask())   # as a plain open() would create it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
