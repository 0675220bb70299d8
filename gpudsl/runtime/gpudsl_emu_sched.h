// gpudsl_emu_sched.h — fibers, block barriers, warp collectives and the launcher of the
// gpudsl CPU emulator.  Included by gpudsl_emu.h; not meant to be included on its own.
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

// ------------------------------------------------------------------ errors
// One report per launch (the first error wins); the launching OS thread reads it back
// through gpudsl_emu_last_error(), so concurrent launches from several threads don't mix.
struct ErrorSlot {
  std::mutex mu;
  bool set = false;
  char text[4096] = {0};
};
static thread_local ErrorSlot* t_slot = nullptr;   // the running launch's slot
static thread_local char t_last_error[4096];

__attribute__((format(printf, 1, 2))) static void set_error(const char* fmt, ...) {
  ErrorSlot* e = t_slot;
  if (!e) return;
  std::lock_guard<std::mutex> lk(e->mu);
  if (e->set) return;
  e->set = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->text, sizeof e->text, fmt, ap);
  va_end(ap);
}


// ------------------------------------------------------------------ faults and Ctrl-C
// While a worker runs blocks, a fault in kernel code (SIGSEGV, SIGBUS, SIGFPE, SIGILL: a wild
// index, an integer division by zero, a stack overflow onto a fiber's guard page, undefined
// behaviour g++ turned into a trap) is caught on an alternate signal stack and the worker
// jumps back out of its blocks (siglongjmp), so the launch fails with a report instead of
// taking the process down.  SIGINT during a launch stops every worker at once (the launch
// returns 2) and is passed on to the handler that was installed before (Python's, which
// raises KeyboardInterrupt).  Handlers are installed while at least one launch of this module
// runs and restored afterwards; a signal that is not ours goes to the previous handler.
struct FaultInfo {
  int sig, code;
  uintptr_t addr, pc, sp;
};
static thread_local sigjmp_buf* t_jmp = nullptr;  // armed while this OS thread runs blocks
static thread_local FaultInfo t_fault;
static const int kFaultSigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static std::mutex g_sig_mu;
static int g_sig_users = 0;
static struct sigaction g_prev[65];
static bool g_int_ours = false;
static std::atomic<int> g_abort{0};
static std::atomic<unsigned long> g_workers[256];  // pthread_t of the OS threads running blocks

static void forward(int sig, siginfo_t* si, void* uc) {
  struct sigaction* p = &g_prev[sig];
  if (p->sa_flags & SA_SIGINFO) {
    if (p->sa_sigaction) p->sa_sigaction(sig, si, uc);
    return;
  }
  if (p->sa_handler == SIG_IGN) return;
  if (p->sa_handler == SIG_DFL) {
    signal(sig, SIG_DFL);  // a fault re-executes and takes the default action
    if (sig == SIGINT) raise(sig);
    return;
  }
  p->sa_handler(sig);
}

static void on_fault(int sig, siginfo_t* si, void* ucv) {
  if (!t_jmp) { forward(sig, si, ucv); return; }
  t_fault.sig = sig;
  t_fault.code = si->si_code;
  t_fault.addr = (uintptr_t)si->si_addr;
  t_fault.pc = t_fault.sp = 0;
#if defined(__x86_64__) && defined(REG_RIP)
  ucontext_t* uc = static_cast<ucontext_t*>(ucv);
  t_fault.pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  t_fault.sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
  ucontext_t* uc = static_cast<ucontext_t*>(ucv);
  t_fault.pc = (uintptr_t)uc->uc_mcontext.pc;
  t_fault.sp = (uintptr_t)uc->uc_mcontext.sp;
#endif
  siglongjmp(*t_jmp, sig);
}

static void on_int(int sig, siginfo_t* si, void* uc) {
  if (g_abort.exchange(1) == 0) {
    forward(sig, si, uc);  // Python learns of the Ctrl-C too
    unsigned long me = (unsigned long)pthread_self();
    for (auto& w : g_workers) {
      unsigned long t = w.load();
      if (t && t != me) pthread_kill((pthread_t)t, SIGINT);
    }
  }
  if (t_jmp) {
    t_fault.sig = SIGINT;
    siglongjmp(*t_jmp, SIGINT);
  }
}

static void arm_signals() {
  std::lock_guard<std::mutex> lk(g_sig_mu);
  if (g_sig_users++ > 0) return;
  g_abort = 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sa.sa_sigaction = on_fault;
  for (int s : kFaultSigs) sigaction(s, &sa, &g_prev[s]);
  struct sigaction cur;
  sigaction(SIGINT, nullptr, &cur);
  g_int_ours = !(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN);
  if (g_int_ours) {
    sa.sa_sigaction = on_int;
    sigaction(SIGINT, &sa, &g_prev[SIGINT]);
  }
}

static void disarm_signals() {
  std::lock_guard<std::mutex> lk(g_sig_mu);
  if (--g_sig_users > 0) return;
  for (int s : kFaultSigs) sigaction(s, &g_prev[s], nullptr);
  if (g_int_ours) sigaction(SIGINT, &g_prev[SIGINT], nullptr);
  g_int_ours = false;
}

static int register_worker() {
  unsigned long me = (unsigned long)pthread_self();
  for (int i = 0; i < 256; ++i) {
    unsigned long z = 0;
    if (g_workers[i].compare_exchange_strong(z, me)) return i;
  }
  return -1;
}
static void unregister_worker(int slot) { if (slot >= 0) g_workers[slot].store(0); }

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

// ------------------------------------------------------------------ launching
struct Launch {
  ErrorSlot error;
  dim3 grid, block;
  size_t dyn_smem;
  Thunk thunk;
  const uint64_t* args;
  long long nblocks;
  std::atomic<long long> next{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> interrupted{false};
  int cluster = 1;             // blocks per cluster (__cluster_dims__), teams of that many workers
  long long nteams = 0;
  Team* teams = nullptr;
  std::atomic<int> worker_no{0};
};

// The blocks loop of one worker, with faults and Ctrl-C caught.  Returns 0, or the signal
// number (t_fault says where); nothing here may rely on its locals after a siglongjmp.
static int run_guarded(Launch* L, Block* b) {
  sigjmp_buf jb;
  int sig = sigsetjmp(jb, 1);
  if (sig != 0) { t_jmp = nullptr; return sig; }
  t_jmp = &jb;
  int n = b->n;
  for (;;) {
    long long k;
    if (b->team) {   // the team's clusters in turn, this worker's rank in each
      long long q = b->cluster_q;
      b->cluster_q += L->nteams;
      if (q >= L->nblocks / L->cluster || L->failed.load(std::memory_order_relaxed) ||
          g_abort.load(std::memory_order_relaxed)) break;
      k = q * L->cluster + b->rank;
    } else {
      k = L->next.fetch_add(1);
      if (k >= L->nblocks || L->failed.load(std::memory_order_relaxed) || g_abort.load(std::memory_order_relaxed)) break;
    }
    b->block_idx = uint3{(unsigned)(k % L->grid.x), (unsigned)(k / L->grid.x % L->grid.y),
                         (unsigned)(k / ((long long)L->grid.x * L->grid.y))};
    for (int i = 0; i < n; ++i) init_fiber(b, i);
    b->nexited = b->nbar = b->nwarp = b->nblocked = 0;
    memset(b->nb_count, 0, sizeof b->nb_count);
    b->failed = false;
    switch_to(&b->main, &b->ctx[0]);
    if (b->failed) { L->failed = true; break; }
    if (b->team) {   // the cluster's blocks finish together
      int r = team_arrive(b->team, AT_CLUSTER_END);
      if (r == 1)
        fail(b, "cluster barrier divergence: the block finished while another block of its cluster "
                "waits at a sync_cluster(); every block of a cluster must reach the same sync_cluster()s");
      if (r != 0) { L->failed = true; break; }
    }
  }
  team_break(b->team);
  t_jmp = nullptr;
  return 0;
}

// The report of a fault caught in run_guarded.
static void report_fault(Launch* L, Block* b, Pool* pool) {
  const FaultInfo& F = t_fault;
  char thr[96] = "a thread", what[512], pcs[64] = "";
  size_t S = GPUDSL_EMU_STACK, pg = page_size();
  bool overflow = false;
  uintptr_t lo = (uintptr_t)pool->map, hi = lo + pool->map_len;
  if (F.sp >= lo && F.sp < hi) {
    uintptr_t region = F.sp & ~(uintptr_t)(S - 1);
    Fiber* f = reinterpret_cast<Fiber*>(region + colour_offset(region));
    snprintf(thr, sizeof thr, "thread (%u,%u,%u)", f->tid.x, f->tid.y, f->tid.z);
    overflow = (F.sig == SIGSEGV || F.sig == SIGBUS) && F.addr >= region && F.addr < region + 3 * pg;
  }
  if (F.addr >= lo && F.addr < hi && !overflow && (F.sig == SIGSEGV || F.sig == SIGBUS)) {
    uintptr_t region = F.addr & ~(uintptr_t)(S - 1);
    overflow = F.addr < region + 3 * pg;  // guard page of another fiber: a frame larger than the stack
  }
  if (F.pc) {  // offset of the faulting instruction in this module (for addr2line)
    Dl_info self_i, pc_i;
    if (dladdr((void*)&report_fault, &self_i) && dladdr((void*)F.pc, &pc_i) && self_i.dli_fbase == pc_i.dli_fbase)
      snprintf(pcs, sizeof pcs, " [pc +0x%lx]", (unsigned long)(F.pc - (uintptr_t)self_i.dli_fbase));
  }
  switch (F.sig) {
    case SIGINT: snprintf(what, sizeof what, "interrupted (Ctrl-C)"); break;
    case SIGFPE:
      snprintf(what, sizeof what, "%s",
               F.code == FPE_INTDIV ? "arithmetic fault: integer division (or remainder) by zero"
               : F.code == FPE_INTOVF ? "arithmetic fault: integer overflow in a division (the most negative value divided by -1)"
               : "arithmetic fault (SIGFPE)");
      break;
    case SIGILL:
      snprintf(what, sizeof what, "illegal instruction (SIGILL): the C++ compiler turned undefined behaviour it "
                                  "could prove (e.g. a division by zero or an index out of range) into a trap");
      break;
    default:
      if (overflow)
        snprintf(what, sizeof what, "stack overflow: the thread's locals (REGISTER arrays) exceed its %zu KiB stack",
                 (size_t)(S - 3 * pg - 4096) / 1024);
      else
        snprintf(what, sizeof what, "%s at address 0x%lx (an index out of range?)",
                 F.sig == SIGBUS ? "bus error (SIGBUS)" : "invalid memory access (SIGSEGV)", (unsigned long)F.addr);
  }
  set_error("block (%u,%u,%u): %s: %s%s", b->block_idx.x, b->block_idx.y, b->block_idx.z, thr, what, pcs);
}

static void run_blocks(Launch* L) {
  int n = (int)(L->block.x * L->block.y * L->block.z);
  ErrorSlot* saved = t_slot;
  t_slot = &L->error;
  Pool pool;  // unmapped when it goes out of scope
  if (!pool.reserve(n)) { L->failed = true; t_slot = saved; return; }
  std::vector<uint64_t> smem((L->dyn_smem + 7) / 8 + 2);
  Block b;
  b.block_dim = L->block;
  b.grid_dim = L->grid;
  b.fibers = pool.fibers.data();
  b.st = pool.st.data();
  b.ctx = pool.ctx.data();
  b.n = n;
  b.thunk = L->thunk;
  b.args = L->args;
  b.dyn_smem = reinterpret_cast<char*>(((uintptr_t)smem.data() + 15) & ~(uintptr_t)15);
  b.block_idx = uint3{0, 0, 0};
  if (L->cluster > 1) {
    int w = L->worker_no.fetch_add(1);
    b.team = &L->teams[w / L->cluster];
    b.rank = w % L->cluster;
    b.cluster_q = w / L->cluster;
    team_join(b.team, &b, (size_t)L->dyn_smem);
  }
  for (int i = 0; i < n; ++i) {
    Fiber* f = b.fibers[i];
    f->blk = &b;
    f->idx = i;
    f->tid = uint3{(unsigned)(i % L->block.x), (unsigned)(i / L->block.x % L->block.y),
                   (unsigned)(i / (L->block.x * L->block.y))};
  }
  // an alternate signal stack: a fault on an exhausted fiber stack still finds room
  const size_t alt_len = 64 * 1024;
  std::vector<char> alt(alt_len);
  stack_t ss, old_ss;
  ss.ss_sp = alt.data();
  ss.ss_size = alt_len;
  ss.ss_flags = 0;
  bool alt_ok = sigaltstack(&ss, &old_ss) == 0;
  int slot = register_worker();
  int sig = run_guarded(L, &b);
  unregister_worker(slot);
  if (alt_ok) {
    if (old_ss.ss_flags & SS_DISABLE) { stack_t off; memset(&off, 0, sizeof off); off.ss_flags = SS_DISABLE; sigaltstack(&off, nullptr); }
    else sigaltstack(&old_ss, nullptr);
  }
  if (sig != 0) {
    L->failed = true;
    team_break(b.team);
    if (sig == SIGINT) L->interrupted = true;
    else report_fault(L, &b, &pool);
  }
  t_slot = saved;
}

// Run a whole grid; returns 0, or 1 with the reason in gpudsl_emu_last_error().
static int launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  unsigned long long dyn_smem, int workers, Thunk thunk, const uint64_t* args,
                  int cluster = 1) {
  t_last_error[0] = 0;
  unsigned long long nthreads = (unsigned long long)bx * by * bz;
  if (nthreads == 0 || nthreads > 1024 || bz > 64 || gx == 0 || gy == 0 || gz == 0 || gy > 65535 || gz > 65535) {
    snprintf(t_last_error, sizeof t_last_error,
             "invalid launch configuration: grid (%u,%u,%u), block (%u,%u,%u); a block has 1 to 1024 threads",
             gx, gy, gz, bx, by, bz);
    return 1;
  }
  Launch L;
  L.grid = dim3(gx, gy, gz);
  L.block = dim3(bx, by, bz);
  L.dyn_smem = dyn_smem;
  L.thunk = thunk;
  L.args = args;
  L.nblocks = (long long)gx * gy * gz;
  if (workers > L.nblocks) workers = (int)L.nblocks;
  if ((long long)nthreads * L.nblocks < 8192) workers = 1;  // not worth starting OS threads
  if (workers < 1) workers = 1;
  std::vector<Team> teams;
  if (cluster > 1) {   // teams of `cluster` workers, one cluster at a time each
    if (gx % (unsigned)cluster != 0) {
      snprintf(t_last_error, sizeof t_last_error,
               "invalid launch configuration: grid x %u is not a multiple of the cluster size %d", gx,
               cluster);
      return 1;
    }
    long long nclusters = L.nblocks / cluster;
    L.cluster = cluster;
    L.nteams = std::max(1LL, std::min((long long)(workers / cluster), nclusters));
    teams = std::vector<Team>((size_t)L.nteams);
    for (auto& t : teams) t.c = cluster;
    L.teams = teams.data();
    workers = (int)(L.nteams * cluster);
  }
  arm_signals();
  std::vector<std::thread> pool;
  for (int i = 1; i < workers; ++i) pool.emplace_back(run_blocks, &L);
  run_blocks(&L);
  for (auto& t : pool) t.join();
  bool interrupted = L.interrupted || g_abort.load();
  disarm_signals();
  if (interrupted) {
    snprintf(t_last_error, sizeof t_last_error, "interrupted (Ctrl-C)");
    return 2;
  }
  if (!L.failed) return 0;
  snprintf(t_last_error, sizeof t_last_error, "%s", L.error.set ? L.error.text : "emulated launch failed");
  return 1;
}

// ------------------------------------------------------------------ calling a kernel
// Each argument sits in a 64-bit slot (little-endian, low bytes), as cuLaunchKernel would
// receive a pointer to it.
template <class T>
static inline T arg(const uint64_t* slot) {
  static_assert(sizeof(T) <= 8, "kernel parameters wider than 8 bytes are not supported");
  T v;
  memcpy(&v, slot, sizeof(T));
  return v;
}
template <class... A, size_t... I>
static inline void call_impl(void (*k)(A...), const uint64_t* a, std::index_sequence<I...>) {
  k(arg<std::remove_cv_t<A>>(a + I)...);
}
template <class... A>
static inline void call(void (*k)(A...), const uint64_t* a) {
  call_impl(k, a, std::index_sequence_for<A...>{});
}

// One character per scalar kind; a pointer is '*' followed by its pointee's code.
template <class T> struct Code { static constexpr char c = 'x'; };
template <> struct Code<float> { static constexpr char c = 'f'; };
template <> struct Code<double> { static constexpr char c = 'd'; };
template <> struct Code<int> { static constexpr char c = 'i'; };
template <> struct Code<unsigned int> { static constexpr char c = 'I'; };
template <> struct Code<long> { static constexpr char c = sizeof(long) == 8 ? 'l' : 'i'; };
template <> struct Code<unsigned long> { static constexpr char c = sizeof(long) == 8 ? 'L' : 'I'; };
template <> struct Code<long long> { static constexpr char c = 'l'; };
template <> struct Code<unsigned long long> { static constexpr char c = 'L'; };
template <> struct Code<short> { static constexpr char c = 's'; };
template <> struct Code<unsigned short> { static constexpr char c = 'S'; };
template <> struct Code<char> { static constexpr char c = 'b'; };
template <> struct Code<signed char> { static constexpr char c = 'b'; };
template <> struct Code<unsigned char> { static constexpr char c = 'B'; };
template <> struct Code<bool> { static constexpr char c = '?'; };
template <> struct Code<__half> { static constexpr char c = 'h'; };
template <> struct Code<__nv_bfloat16> { static constexpr char c = 'H'; };
template <class T> static void code_of(std::string& s) {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>) {
    s += '*';
    code_of<std::remove_pointer_t<U>>(s);
  } else {
    s += Code<U>::c;
  }
}
template <class... A>
static std::string signature(void (*)(A...)) {
  std::string s;
  ((code_of<A>(s), s += ','), ...);
  return s;
}

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
