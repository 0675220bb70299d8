"""Low-level runtime: driver detection, NVRTC, the artifact cache, the CPU emulator and
GPU launching.  Nothing here knows about the IR; codegen hands over CUDA C source plus
per-kernel signatures (:class:`gpudsl.runtime.signature.KernelSig`)."""
