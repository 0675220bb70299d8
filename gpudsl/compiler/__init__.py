"""The compile-and-launch layer: a proc → CUDA C (``gpudsl.codegen``) → a callable
``Kernel`` that binds its arguments (``gpudsl.ir.binding``), computes its
launches and runs them through ``gpudsl.runtime`` (NVRTC or the CPU emulator)."""
from .arguments import bind_arguments
from .compiled_kernel import BACKENDS, Kernel, compile_proc, signatures

__all__ = ["Kernel", "compile_proc", "bind_arguments", "BACKENDS", "signatures"]
