"""Low-level runtime: driver detection, NVRTC, the artifact cache, the CPU emulator,
device arrays and launching (:mod:`.launch`).  Nothing here knows about the IR or code
generation: the compile layer (:mod:`gpudsl.compiler`) hands over CUDA C source plus
per-kernel signatures (:class:`gpudsl.runtime.signature.KernelSig`) and the launches."""
