// gpudsl_emu_sys.h — the system headers of the gpudsl CPU emulator (gpudsl_emu.h and
// gpudsl_emu_sched.h).  They are most of what g++ parses for a kernel, so the emulator
// precompiles this header (a .gch in the compile cache, see gpudsl/runtime/emu_pch.py) and
// passes it with -include before gpudsl_emu.h; without it (GPUDSL_EMU_PCH=0, or a compiler
// that rejects the .gch) gpudsl_emu.h includes it as a plain header.  Nothing here may
// depend on GPUDSL_EMU_STACK, which differs between kernels.
#ifndef GPUDSL_EMU_SYS_H
#define GPUDSL_EMU_SYS_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(__x86_64__) || defined(GPUDSL_EMU_UCONTEXT)
#include <ucontext.h>
#define GPUDSL_EMU_USE_UCONTEXT 1
#endif
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <dlfcn.h>

#endif  // GPUDSL_EMU_SYS_H
