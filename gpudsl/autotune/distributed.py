"""Trials as tasks of a Ray cluster (the optional ``distributed`` extra).

``tune(..., executor=RayExecutor(backend="cuda"))`` runs each claimed configuration's
whole trial (build, prove, compile, verify, time) as one Ray task with one GPU
(``num_gpus=1``; on the emulator backend one CPU), while the process that called
``tune`` claims configurations and writes the records into the shared study.  Several
such processes on several machines may tune into one study through a database URL.
"""
from __future__ import annotations

import concurrent.futures as cf

from ..backend_names import backend_keyword
from ..errors import Error


def _call(fn, args, kwargs):
    return fn(*args, **kwargs)


class RayExecutor(cf.Executor):
    """A ``concurrent.futures.Executor`` whose ``submit`` starts a Ray task.

    ``backend``: ``"cuda"`` gives each task one GPU, ``"emulator"`` one CPU (``target=``:
    its old, deprecated spelling).
    ``address``: an existing cluster (``"auto"``, ``"ray://host:10001"``); ``None``
    starts a local instance when none is running.  ``init_kwargs`` go to ``ray.init``."""

    whole_trials = True  # tune() sends whole trials, timing included

    def __init__(self, backend: str | None = None, address: str | None = None,
                 max_workers: int | None = None, *, target: str | None = None,
                 **init_kwargs):
        backend = backend_keyword(backend, target, "autotune.RayExecutor", "cuda")
        try:
            import ray
        except ImportError:
            raise Error("autotune.RayExecutor needs Ray", None,
                        "pip install 'gpudsl[distributed]'") from None
        self.ray = ray
        self._started = False
        if not ray.is_initialized():
            init_kwargs.setdefault("include_dashboard", False)
            init_kwargs.setdefault("log_to_driver", False)
            ray.init(address=address, **init_kwargs)
            self._started = True
        self.num_gpus = 1 if backend == "cuda" else 0
        resource = "GPU" if self.num_gpus else "CPU"
        have = int(ray.cluster_resources().get(resource, 0))
        if have < 1:
            raise Error(f"autotune.RayExecutor: the Ray cluster has no {resource}", None,
                        "start workers with GPUs, or use backend='emulator'")
        self._max_workers = max_workers or have
        self._remote = ray.remote(_call)

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        ref = self._remote.options(num_gpus=self.num_gpus, num_cpus=1,
                                   max_retries=0).remote(fn, args, kwargs)
        return ref.future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
            self._started = False
