// gpudsl_emu_bars.h — named barriers (bar.sync id, count) and mbarriers (init / arrive /
// wait on a phase parity) for the emulator, with the semantics of the hardware (docs/language.md, synchronization):
//
// * gpudsl_bar_sync(id, count): the caller waits until `count` threads have arrived at
//   barrier `id` (0..15); the last one releases them and the barrier starts afresh.
// * an mbarrier is a 64-bit word in __shared__ memory: bits 0-31 the arrivals still
//   pending in the current phase, bits 32-62 the expected count, bit 63 the phase parity.
//   gpudsl_mbar_arrive counts one arrival (gpudsl_mbar_arrive_n: n of them, an arrive with
//   count=n); the last one of a phase resets the pending count and flips the parity.  gpudsl_mbar_wait(bar, parity) returns once the phase of that
//   parity has completed (the current parity differs), blocking the fiber until then.
//
// A thread blocked on either that can never be released (every other thread exited or
// blocked too) is a deadlock: reported as an error of the launch (LaunchError), never a hang.
// Included by gpudsl_emu_sched.h inside namespace gpudsl_emu, after trap().

static inline void release_blocked(Block* b, int state, int id, const void* bar) {
  for (int j = 0; j < b->n; ++j) {
    Fiber* g = b->fibers[j];
    if (b->st[j] == state && (state == AT_NBAR ? g->op == id : g->mbar == bar)) {
      b->st[j] = RUN;
      b->nblocked--;
    }
  }
}

static inline void block_on(Fiber* f, int state, const char* file, int line) {
  f->blk->st[f->idx] = (unsigned char)state;
  f->file = file;
  f->line = line;
  f->blk->nblocked++;
  yield(f);
}

static inline void named_barrier(unsigned id, unsigned count, const char* file, int line) {
  Fiber* f = self();
  Block* b = f->blk;
  if (id > 15) trap("bar.sync with a barrier id above 15", file, line);
  if ((int)count > b->n || count == 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "deadlock: bar.sync %u, %u expects %u threads but the block has %d",
             id, count, count, b->n);
    trap(msg, file, line);
  }
  if (++b->nb_count[id] >= (int)count) {
    b->nb_count[id] = 0;
    release_blocked(b, AT_NBAR, (int)id, nullptr);
    return;  // the last thread to arrive goes on
  }
  f->op = (int)id;
  block_on(f, AT_NBAR, file, line);
}

static inline void mbar_init(unsigned long long* bar, unsigned count) {
  *bar = ((unsigned long long)(count & 0x7fffffffu) << 32) | count;
}

static inline void mbar_arrive_n(unsigned long long* bar, unsigned n, const char* file,
                                 int line) {
  Fiber* f = self();
  unsigned long long v = *bar;
  unsigned pending = (unsigned)v, expected = (unsigned)(v >> 32) & 0x7fffffffu;
  unsigned long long parity = v >> 63;
  if (pending == 0 || expected == 0) trap("mbarrier arrive on a barrier that was not initialised", file, line);
  if (n == 0 || n > pending)  // PTX: undefined; check() proves it never happens
    trap("mbarrier arrive with a count above the arrivals pending in the phase", file, line);
  pending -= n;
  if (pending == 0) {
    pending = expected;
    parity ^= 1ull;
    release_blocked(f->blk, AT_MBAR, -1, bar);
  }
  *bar = (parity << 63) | ((unsigned long long)expected << 32) | pending;
}

static inline void mbar_arrive(unsigned long long* bar, const char* file, int line) {
  mbar_arrive_n(bar, 1u, file, line);
}

static inline void mbar_wait(unsigned long long* bar, unsigned parity, const char* file, int line) {
  Fiber* f = self();
  while ((unsigned)(*bar >> 63) == (parity & 1u)) {
    f->mbar = bar;
    f->op = (int)(parity & 1u);   // the parity it waits to leave (gpudsl_emu_dsmem.h)
    block_on(f, AT_MBAR, file, line);
  }
}

// End of a pass with threads blocked on named barriers or mbarriers and none runnable.
static int blocked_deadlock(Block* b) {
  char msg[1024], w1[64];
  for (int j = 0; j < b->n; ++j) {
    Fiber* f = b->fibers[j];
    int s = b->st[j];
    if (s != AT_NBAR && s != AT_MBAR) continue;
    snprintf(msg, sizeof msg,
             "deadlock: %d thread(s) wait forever, e.g. %s at %s at %s:%d (the threads it waits "
             "for have exited or wait elsewhere)",
             b->nblocked, where(f, w1, sizeof w1),
             s == AT_NBAR ? "a named barrier (bar.sync)" : "an mbarrier wait", f->file ? f->file : "?",
             f->line);
    fail(b, msg);
    return -1;
  }
  return -1;
}
