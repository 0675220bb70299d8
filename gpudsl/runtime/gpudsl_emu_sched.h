// gpudsl_emu_sched.h — fibers, block barriers and warp collectives of the gpudsl CPU
// emulator (faults: gpudsl_emu_faults.h; the launcher: gpudsl_emu_launch.h).  Included by
// gpudsl_emu.h; not meant to be included on its own.
//
// A fiber's memory is one GPUDSL_EMU_STACK-aligned region: its Fiber record in the first two
// pages (at a per-region offset, see colour_offset), a PROT_NONE guard page, then its stack.  self() recovers the running fiber by masking the
// stack pointer, so threadIdx costs a load, not a thread-local lookup.  On x86-64 a context
// switch is 6 pushes, 6 pops and a ret (gpudsl_emu_swap); elsewhere ucontext is used.
#ifndef GPUDSL_EMU_SCHED_H
#define GPUDSL_EMU_SCHED_H

#ifndef GPUDSL_EMU_STACK
#define GPUDSL_EMU_STACK (128 * 1024)
#endif
static_assert((GPUDSL_EMU_STACK & (GPUDSL_EMU_STACK - 1)) == 0, "GPUDSL_EMU_STACK must be a power of two");

#define GPUDSL_EXPORT extern "C" __attribute__((visibility("default")))

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <dlfcn.h>

#ifndef GPUDSL_EMU_USE_UCONTEXT
asm(R"(
  .text
  .p2align 4
  .globl gpudsl_emu_swap
  .hidden gpudsl_emu_swap
  .type gpudsl_emu_swap, @function
gpudsl_emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gpudsl_emu_swap, .-gpudsl_emu_swap
)");
extern "C" void gpudsl_emu_swap(void** save_sp, void* new_sp);
#endif

namespace gpudsl_emu {

enum State { RUN = 0, AT_BAR = 1, AT_WARP = 2, EXITED = 3, AT_NBAR = 4, AT_MBAR = 5 };
enum Op { OP_SYNC = 0, OP_SHFL = 1, OP_BALLOT = 2, OP_ALL = 3, OP_ADD = 4, OP_UMIN = 5, OP_UMAX = 6 };
static const char* const kOpName[] = {"__syncwarp", "__shfl_sync", "__ballot_sync", "__all_sync",
                                      "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync"};

struct Ctx {
#ifdef GPUDSL_EMU_USE_UCONTEXT
  ucontext_t uc;
#else
  void* sp;
#endif
};

struct Block;
struct Team;                   // the blocks of one cluster (gpudsl_emu_cluster.h)

struct Fiber {
  uint3 tid;
  Block* blk;
  int idx;                     // linear thread index in the block
  const char* file;            // where it waits
  int line;
  int op;                      // warp collective it waits in
  unsigned mask;
  int src;
  uint64_t val, out;
  const void* mbar;            // the mbarrier it waits on (AT_MBAR)
};

typedef void (*Thunk)(const uint64_t*);

struct Block {
  uint3 block_idx;
  dim3 block_dim, grid_dim;
  Fiber** fibers;
  unsigned char* st;           // State of each thread (dense: the scheduler scans it)
  Ctx* ctx;                    // saved context of each thread (dense)
  int n;
  Ctx main;
  Thunk thunk;
  const uint64_t* args;
  int nexited, nbar, nwarp;
  int nblocked;                // threads at named barriers or mbarriers
  int nb_count[16];            // arrivals at each named barrier
  int bar_kind, bar_accum, bar_result;
  bool failed;
  char* dyn_smem;
  Team* team = nullptr;        // a cluster launch: this OS thread's team, its rank in it
  int rank = 0;
  long long cluster_q = 0;     // the next cluster the team runs
  char* anchor = nullptr;      // this OS thread's thread_local anchor (gpudsl_emu_dsmem.h)
  size_t dyn_bytes = 0;
};

#include "gpudsl_emu_faults.h"

// ------------------------------------------------------------------ fibers
// The record sits at a per-region "colour" offset so that the records of successive fibers
// do not all fall into one cache set.
static inline uintptr_t colour_offset(uintptr_t region) { return (region / GPUDSL_EMU_STACK & 63) * 64; }
static inline Fiber* self() {
  uintptr_t sp;
#if defined(__x86_64__)
  asm("movq %%rsp, %0" : "=r"(sp));
#else
  sp = (uintptr_t)__builtin_frame_address(0);
#endif
  uintptr_t region = sp & ~(uintptr_t)(GPUDSL_EMU_STACK - 1);
  return reinterpret_cast<Fiber*>(region + colour_offset(region));
}

static inline void switch_to(Ctx* from, Ctx* to) {
#ifdef GPUDSL_EMU_USE_UCONTEXT
  swapcontext(&from->uc, &to->uc);
#else
  gpudsl_emu_swap(&from->sp, to->sp);
#endif
}

static int resolve(Block* b);

// Called by a fiber that has just blocked or exited: run the next runnable fiber of this pass,
// or, at the end of the pass, release what can be released and start the next pass.
static void yield(Fiber* f) {
  Block* b = f->blk;
  const unsigned char* st = b->st;
  int i = f->idx;
  for (int j = i + 1, n = b->n; j < n; ++j)
    if (st[j] == RUN) { switch_to(&b->ctx[i], &b->ctx[j]); return; }
  int j = resolve(b);
  if (j < 0) switch_to(&b->ctx[i], &b->main);  // block finished or failed: f never resumes
  else if (j != i) switch_to(&b->ctx[i], &b->ctx[j]);
}

static void fiber_entry() {
  Fiber* f = self();
  Block* b = f->blk;
  b->thunk(b->args);
  b->st[f->idx] = EXITED;
  b->nexited++;
  yield(f);
  __builtin_trap();  // an exited fiber is never resumed
}

static size_t page_size() { static size_t p = (size_t)sysconf(_SC_PAGESIZE); return p; }

static inline char* region_of(Fiber* f) {
  return reinterpret_cast<char*>((uintptr_t)f & ~(uintptr_t)(GPUDSL_EMU_STACK - 1));
}

static void init_fiber(Block* b, int idx) {
  Fiber* f = b->fibers[idx];
  Ctx* c = &b->ctx[idx];
  b->st[idx] = RUN;
  // Colour the stack top too, so that fibers' hot frames spread over the cache sets.
  char* top = region_of(f) + GPUDSL_EMU_STACK - colour_offset((uintptr_t)region_of(f));
#ifdef GPUDSL_EMU_USE_UCONTEXT
  char* lo = region_of(f) + 3 * page_size();
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = lo;
  c->uc.uc_stack.ss_size = (size_t)(top - lo);
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, fiber_entry, 0);
#else
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                                // fake return address of fiber_entry
  *--sp = reinterpret_cast<void*>(&fiber_entry);  // popped by gpudsl_emu_swap's ret
  for (int i = 0; i < 6; ++i) *--sp = nullptr;    // rbp rbx r12 r13 r14 r15
  c->sp = sp;
#endif
}

// Stacks for up to `cap` fibers, mapped by each worker at the start of a launch, reused by
// every block it runs and unmapped at the end.  (Keeping idle pools between launches ran a
// test process out of memory mappings: every loaded module kept its own, and each guard
// page splits a mapping in three, against Linux's default limit of 65530.)
struct Pool {
  char* map = nullptr;
  size_t map_len = 0;
  int cap = 0;
  std::vector<Fiber*> fibers;
  std::vector<unsigned char> st;
  std::vector<Ctx> ctx;

  bool reserve(int n) {
    if (n <= cap) return true;
    release();
    size_t S = GPUDSL_EMU_STACK, pg = page_size();
    if (S < 6 * pg) { set_error("GPUDSL_EMU_STACK is smaller than 6 pages"); return false; }
    map_len = (size_t)n * S + S;
    void* m = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { map = nullptr; set_error("emulator: cannot map %d thread stacks", n); return false; }
    map = static_cast<char*>(m);
    uintptr_t base = ((uintptr_t)map + S - 1) & ~(uintptr_t)(S - 1);
    fibers.resize(n);
    st.resize(n);
    ctx.resize(n);
    for (int i = 0; i < n; ++i) {
      char* r = reinterpret_cast<char*>(base + (uintptr_t)i * S);
      mprotect(r + 2 * pg, pg, PROT_NONE);  // guard page between the record and the stack
      fibers[i] = reinterpret_cast<Fiber*>(r + colour_offset((uintptr_t)r));
    }
    cap = n;
    return true;
  }
  ~Pool() { release(); }
  void release() {
    if (map) munmap(map, map_len);
    map = nullptr; cap = 0; fibers.clear(); st.clear(); ctx.clear();
  }
};
static_assert(sizeof(Fiber) <= 4096, "Fiber record must fit in a page");

// ------------------------------------------------------------------ barriers
static const char* where(const Fiber* f, char* buf, size_t n) {
  snprintf(buf, n, "thread (%u,%u,%u)", f->tid.x, f->tid.y, f->tid.z);
  return buf;
}

static void fail(Block* b, const char* what) {
  b->failed = true;
  set_error("block (%u,%u,%u): %s", b->block_idx.x, b->block_idx.y, b->block_idx.z, what);
}

static int first_runnable(Block* b) {
  for (int j = 0; j < b->n; ++j)
    if (b->st[j] == RUN) return j;
  return -1;
}

// Release every warp collective whose participants have all arrived; returns how many lanes
// were released, or -1 after reporting a collective that can never complete.
static int resolve_warps(Block* b) {
  int released = 0;
  char msg[1024], w1[64], w2[64];
  for (int base = 0; base < b->n; base += 32) {
    int nl = b->n - base < 32 ? b->n - base : 32;
    unsigned exists = nl == 32 ? 0xffffffffu : ((1u << nl) - 1u);
    unsigned done = 0;
    for (int l = 0; l < nl; ++l) {
      Fiber* f = b->fibers[base + l];
      if (b->st[base + l] != AT_WARP || (done >> l & 1u)) continue;
      unsigned group = (f->mask | (1u << l)) & exists;
      for (int k = 0; k < nl; ++k) {
        if (!(group >> k & 1u)) continue;
        Fiber* g = b->fibers[base + k];
        int gs = b->st[base + k];
        if (gs == AT_WARP && g->op == f->op) continue;
        const char* why = gs == EXITED ? "has exited" : gs == AT_BAR ? "waits at __syncthreads()"
                                                                                  : "waits in another warp collective";
        snprintf(msg, sizeof msg, "warp collective deadlock: %s waits in %s (mask 0x%08x) at %s:%d but lane %d, %s, %s",
                 where(f, w1, sizeof w1), kOpName[f->op], f->mask, f->file ? f->file : "?", f->line, k,
                 where(g, w2, sizeof w2), why);
        fail(b, msg);
        return -1;
      }
      uint64_t acc = f->op == OP_ALL ? 1 : f->op == OP_UMIN ? 0xffffffffu : 0;
      for (int k = 0; k < nl; ++k) {
        if (!(group >> k & 1u)) continue;
        uint64_t v = b->fibers[base + k]->val;
        switch (f->op) {
          case OP_BALLOT: if (v) acc |= 1ull << k; break;
          case OP_ALL: acc &= (v != 0); break;
          case OP_ADD: acc = (uint32_t)(acc + v); break;
          case OP_UMIN: if ((uint32_t)v < acc) acc = (uint32_t)v; break;
          case OP_UMAX: if ((uint32_t)v > acc) acc = (uint32_t)v; break;
          default: break;
        }
      }
      for (int k = 0; k < nl; ++k) {
        if (!(group >> k & 1u)) continue;
        Fiber* g = b->fibers[base + k];
        if (g->op == OP_SHFL) {
          int s = g->src;
          g->out = (s >= 0 && s < nl && (group >> s & 1u)) ? b->fibers[base + s]->val : g->val;
        } else {
          g->out = acc;
        }
        b->st[base + k] = RUN;
        ++released;
      }
      done |= group;
      b->nwarp -= __builtin_popcount(group);
    }
  }
  return released;
}

// End of a pass: nobody is runnable.  Returns the fiber to run next, or -1 (done or failed).
static int blocked_deadlock(Block* b);
static int team_idle(Block* b);
static int resolve(Block* b) {
  char msg[1024], w1[64], w2[64];
  {  // threads released by a named barrier or an mbarrier during the pass
    int j = first_runnable(b);
    if (j >= 0) return j;
  }
  if (b->nwarp > 0) {
    int r = resolve_warps(b);
    if (r < 0) return -1;
    if (r > 0) return first_runnable(b);
  }
  if (b->nblocked > 0 && b->team) {   // other blocks of the cluster may release them
    for (;;) {
      if (team_idle(b) < 0) return -1;
      int j = first_runnable(b);
      if (j >= 0) return j;
    }
  }
  if (b->nblocked > 0) return blocked_deadlock(b);
  if (b->nbar > 0) {
    Fiber* waiter = nullptr;
    Fiber* other = nullptr;
    for (int j = 0; j < b->n; ++j) {
      Fiber* f = b->fibers[j];
      if (b->st[j] == AT_BAR) { if (!waiter) waiter = f; }
      else if (!other) other = f;
    }
    if (other) {
      snprintf(msg, sizeof msg,
               "barrier divergence: %d thread(s), e.g. %s, wait at __syncthreads() at %s:%d but %d thread(s) "
               "%s, e.g. %s; every thread of a block must reach the same barriers",
               b->nbar, where(waiter, w1, sizeof w1), waiter->file, waiter->line, b->n - b->nbar,
               b->st[other->idx] == EXITED ? "exited without reaching it" : "wait in a warp collective",
               where(other, w2, sizeof w2));
      fail(b, msg);
      return -1;
    }
    for (int j = 0; j < b->n; ++j) {
      Fiber* f = b->fibers[j];
      if (f->line != waiter->line || (f->file != waiter->file && strcmp(f->file, waiter->file) != 0)) {
        snprintf(msg, sizeof msg,
                 "barrier divergence: %s waits at __syncthreads() at %s:%d while %s waits at the one at %s:%d",
                 where(waiter, w1, sizeof w1), waiter->file, waiter->line, where(f, w2, sizeof w2), f->file, f->line);
        fail(b, msg);
        return -1;
      }
    }
    b->bar_result = b->bar_kind == 1 ? b->bar_accum : (b->bar_accum != 0);
    b->nbar = 0;
    memset(b->st, RUN, (size_t)b->n);
    return 0;
  }
  if (b->nwarp > 0) {
    fail(b, "warp collective deadlock");
    return -1;
  }
  return -1;  // every thread exited
}

static inline int block_barrier(const char* file, int line, int kind, int pred) {
  Fiber* f = self();
  Block* b = f->blk;
  b->st[f->idx] = AT_BAR;
  f->file = file;
  f->line = line;
  if (b->nbar++ == 0) {
    b->bar_kind = kind;
    b->bar_accum = kind == 2 ? 1 : 0;
  }
  if (kind == 1) b->bar_accum += pred != 0;
  else if (kind == 2) b->bar_accum &= pred != 0;
  else if (kind == 3) b->bar_accum |= pred != 0;
  yield(f);
  return b->bar_result;
}

static inline uint64_t warp_op(Fiber* f, int op, unsigned mask, uint64_t val, int src, const char* file, int line) {
  f->blk->st[f->idx] = AT_WARP;
  f->op = op;
  f->mask = mask;
  f->val = val;
  f->src = src & 31;
  f->file = file;
  f->line = line;
  f->blk->nwarp++;
  yield(f);
  return f->out;
}

static inline int lane() { return self()->idx & 31; }

static inline void syncwarp(const char* file, int line, unsigned mask = 0xffffffffu) {
  warp_op(self(), OP_SYNC, mask, 0, 0, file, line);
}

template <class T>
static inline T shfl(unsigned mask, T v, int src) {
  static_assert(sizeof(T) <= 8, "__shfl_sync of a value wider than 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  Fiber* f = self();
  uint64_t out = warp_op(f, OP_SHFL, mask, bits, src, nullptr, 0);
  T r;
  memcpy(&r, &out, sizeof(T));
  return r;
}

static inline unsigned vote(unsigned mask, unsigned v, int op) {
  return (unsigned)warp_op(self(), op, mask, v, 0, nullptr, 0);
}

static inline unsigned active_mask() {
  Fiber* f = self();
  Block* b = f->blk;
  int base = f->idx & ~31;
  unsigned m = 0;
  for (int l = 0; l < 32 && base + l < b->n; ++l)
    if (b->st[base + l] != EXITED) m |= 1u << l;
  return m;
}

static inline char* dynamic_smem() { return self()->blk->dyn_smem; }

[[noreturn]] static void trap(const char* what, const char* file, int line) {
  Fiber* f = self();
  Block* b = f->blk;
  char msg[512], w[64];
  snprintf(msg, sizeof msg, "%s: %s at %s:%d", where(f, w, sizeof w), what, file, line);
  fail(b, msg);
  switch_to(&b->ctx[f->idx], &b->main);
  __builtin_trap();
}

#include "gpudsl_emu_bars.h"
#include "gpudsl_emu_cluster.h"
#include "gpudsl_emu_dsmem.h"

#include "gpudsl_emu_launch.h"

}  // namespace gpudsl_emu

GPUDSL_EXPORT const char* gpudsl_emu_last_error() { return gpudsl_emu::t_last_error; }

// gpudsl_emu_kernel(name) defines, for an extern "C" kernel `name`:
//   int gpudsl_launch_<name>(gx, gy, gz, bx, by, bz, dyn_smem, workers, const uint64_t* args)
//   const char* gpudsl_sig_<name>()   -- parameter type codes, e.g. "*f,*f,i,"
// gpudsl_emu_cluster_kernel(name, c): the same for a kernel declared __cluster_dims__(c, 1, 1).
#define gpudsl_emu_kernel(name) gpudsl_emu_cluster_kernel(name, 1)
#define gpudsl_emu_cluster_kernel(name, c)                                                        \
  GPUDSL_EXPORT int gpudsl_launch_##name(unsigned gx, unsigned gy, unsigned gz, unsigned bx,      \
                                         unsigned by, unsigned bz, unsigned long long dyn_smem,   \
                                         int workers, const uint64_t* args) {                     \
    return gpudsl_emu::launch(gx, gy, gz, bx, by, bz, dyn_smem, workers,                          \
                              [](const uint64_t* a) { gpudsl_emu::call(&name, a); }, args, (c));  \
  }                                                                                               \
  GPUDSL_EXPORT const char* gpudsl_sig_##name() {                                                 \
    static const std::string s = gpudsl_emu::signature(&name);                                    \
    return s.c_str();                                                                             \
  }

#endif  // GPUDSL_EMU_SCHED_H
