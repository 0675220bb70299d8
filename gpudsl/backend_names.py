""""Backend" and "target": a backend is where kernels run (``"cuda"``, ``"emulator"``,
``"recording"``); a target is an architecture (``sm_80``, ``sm_90``; ``gpudsl.targets``).
Older keywords and functions named the backend ``target``: they keep working, with a
``DeprecationWarning`` that names the new spelling (docs/decisions.md)."""
from __future__ import annotations

import warnings


def backend_keyword(backend, target, where: str, default=None):
    """The backend a call asked for: ``backend=``, or the old ``target=`` spelling
    (warned); both given and different is a ``TypeError``."""
    if target is None:
        return default if backend is None else backend
    warnings.warn(f"{where}: the keyword target= names the backend; write backend="
                  f"{target!r} (target now means an architecture such as 'sm_90')",
                  DeprecationWarning, stacklevel=3)
    if backend is not None and backend != target:
        raise TypeError(f"{where}: backend={backend!r} and target={target!r} disagree; "
                        "give backend= only")
    return target


def deprecated_alias(new, old_name: str, new_name: str):
    """``new`` under its old name, warning at each call."""
    def old(*args, **kwargs):
        warnings.warn(f"{old_name}() is deprecated: it names the backend; use "
                      f"{new_name}()", DeprecationWarning, stacklevel=2)
        return new(*args, **kwargs)
    old.__name__ = old.__qualname__ = old_name.rpartition(".")[2]
    old.__doc__ = f"Deprecated: {new_name}() (the backend, not an architecture)."
    return old


__all__ = ["backend_keyword", "deprecated_alias"]
