"""Code generation: procs → one CUDA C translation unit.

``cuda_source(proc, **bindings)`` gives the text; ``generate(proc, bindings,
index_bits=None)`` gives a :class:`CudaModule` with the text plus what the
runtime needs to launch it (kernel parameters, grid and block sizes, the host
launch program, temporaries).  See docs/codegen.md.
"""
from __future__ import annotations

from .generate import cuda_source, generate, index_bits_for
from .host_plan import (CudaModule, HostIf, HostLoop, KernelInfo, KernelParam, LaunchStep,
                   NeedsBinding, Temporary, evaluate, walk_program)

__all__ = ["cuda_source", "generate", "index_bits_for", "CudaModule", "KernelInfo",
           "KernelParam", "Temporary", "LaunchStep", "HostLoop", "HostIf", "NeedsBinding",
           "evaluate", "walk_program"]
