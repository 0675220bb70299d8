"""Loading the procs a Python file defines, for ``gpudsl check`` and ``gpudsl cuda``."""
from __future__ import annotations

import importlib.util
import os
import sys

from ..errors import Error
from ..proc import Proc


def load_procs(path: str) -> dict[str, Proc]:
    """The procs a Python file defines at module level, by name (the file is imported
    as a module, with its directory on ``sys.path`` while it runs)."""
    if not os.path.isfile(path):
        raise Error(f"no such file: {path}")
    name = "_gpudsl_cli_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise Error(f"cannot import {path}", hint="give a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    d = os.path.dirname(os.path.abspath(path))
    added = d not in sys.path
    if added:
        sys.path.insert(0, d)
    try:
        spec.loader.exec_module(mod)
    finally:
        if added:
            sys.path.remove(d)
    return {k: v for k, v in vars(mod).items() if isinstance(v, Proc)}


__all__ = ["load_procs"]
