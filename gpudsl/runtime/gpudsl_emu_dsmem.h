// gpudsl_emu_dsmem.h — a cluster's blocks reaching each other's shared memory on the emulator
// (docs/hopper.md (remote arrives)): mapa, and arrives on the mbarriers of other blocks.
//
// * mapa(p, q): the address in block q's shared memory of what p is in the caller's.  Static
//   __shared__ storage is thread_local, and the thread-local storage of one module has the
//   same layout in every OS thread, so an address keeps its offset from a thread_local anchor
//   (t_anchor); dynamic shared memory keeps its offset from the block's dyn_smem.  Each block
//   of a team publishes its anchor and dyn_smem in the team (before its first cluster; the
//   generated code's sync_cluster() after the barriers' initialisation orders the rest).
// * gpudsl_mbar_arrive_cluster(bar, q, n): n arrivals on block q's bar, under the team's lock
//   (the word is read with acquire loads by waiters on other OS threads); an arrive that
//   completes a phase of the caller's own barrier releases its waiting fibers at once, and
//   the team's count of arrivals tells the other blocks to look at theirs.
// * a block whose fibers all wait (on mbarriers, or a named barrier) goes idle in team_idle:
//   it releases the fibers whose barrier completed a phase meanwhile, else sleeps until
//   another block arrives somewhere.  Every block of the team idle or waiting at a
//   sync_cluster() at once, with no arrival since, is a deadlock: reported (LaunchError),
//   the team broken so that the others stop too (never a hang).
#ifndef GPUDSL_EMU_DSMEM_H
#define GPUDSL_EMU_DSMEM_H

static thread_local char t_anchor;

static inline void team_join(Team* t, Block* b, size_t dyn_bytes) {
  b->anchor = &t_anchor;
  b->dyn_bytes = dyn_bytes;
  std::lock_guard<std::mutex> lk(t->mu);
  t->members[b->rank] = b;
}

static inline void* mapa(const void* p, unsigned q, const char* file, int line) {
  Block* b = self()->blk;
  Team* t = b->team;
  if (!t) {
    if (q != 0) trap("mapa: a rank other than 0 outside a cluster launch", file, line);
    return const_cast<void*>(p);
  }
  if ((int)q >= t->c) trap("mapa: a rank past the cluster", file, line);
  Block* o = t->members[q];
  const char* c = static_cast<const char*>(p);
  if (b->dyn_smem && c >= b->dyn_smem && c < b->dyn_smem + b->dyn_bytes)
    return o->dyn_smem + (c - b->dyn_smem);
  return o->anchor + (c - b->anchor);
}

// n arrivals on *bar (the team's lock held): true when they complete the phase
static inline bool mbar_count(unsigned long long* bar, unsigned n, const char* file, int line) {
  unsigned long long v = __atomic_load_n(bar, __ATOMIC_ACQUIRE);
  unsigned pending = (unsigned)v, expected = (unsigned)(v >> 32) & 0x7fffffffu;
  unsigned long long parity = v >> 63;
  if (pending == 0 || expected == 0) trap("mbarrier arrive on a barrier that was not initialised", file, line);
  if (n == 0 || n > pending)
    trap("mbarrier arrive with a count above the arrivals pending in the phase", file, line);
  pending -= n;
  bool done = pending == 0;
  if (done) {
    pending = expected;
    parity ^= 1ull;
  }
  __atomic_store_n(bar, (parity << 63) | ((unsigned long long)expected << 32) | pending, __ATOMIC_RELEASE);
  return done;
}

static inline void mbar_arrive_cluster(unsigned long long* bar, unsigned q, unsigned n,
                                       const char* file, int line) {
  Block* b = self()->blk;
  Team* t = b->team;
  if (!t) {
    if (q != 0) trap("an arrive on another block's barrier outside a cluster launch", file, line);
    mbar_arrive_n(bar, n, file, line);
    return;
  }
  unsigned long long* rb = static_cast<unsigned long long*>(mapa(bar, q, file, line));
  bool done;
  {
    std::lock_guard<std::mutex> lk(t->mu);
    done = mbar_count(rb, n, file, line);
    t->arrivals++;
    t->idle = 0;   // every idle block looks again (and counts itself again)
    t->cv.notify_all();
  }
  if (done && (int)q == b->rank) release_blocked(b, AT_MBAR, -1, rb);
}

static inline void mbar_wait_cluster(unsigned long long* bar, unsigned parity, const char* file, int line) {
  Fiber* f = self();
  while ((unsigned)(__atomic_load_n(bar, __ATOMIC_ACQUIRE) >> 63) == (parity & 1u)) {
    f->mbar = bar;
    f->op = (int)(parity & 1u);
    block_on(f, AT_MBAR, file, line);
  }
}

// the team's lock held: release the fibers whose mbarrier left the parity they wait on
static int release_completed(Block* b) {
  int n = 0;
  for (int j = 0; j < b->n; ++j) {
    Fiber* g = b->fibers[j];
    if (b->st[j] != AT_MBAR) continue;
    unsigned long long v = __atomic_load_n((const unsigned long long*)g->mbar, __ATOMIC_ACQUIRE);
    if ((int)(v >> 63) != g->op) {
      b->st[j] = RUN;
      b->nblocked--;
      n++;
    }
  }
  return n;
}

static void report_idle_deadlock(Block* b) {
  char msg[512], w1[64];
  Fiber* f = nullptr;
  for (int j = 0; j < b->n && !f; ++j)
    if (b->st[j] == AT_MBAR || b->st[j] == AT_NBAR) f = b->fibers[j];
  snprintf(msg, sizeof msg, "deadlock: every block of the cluster waits (at mbarriers, named "
           "barriers or sync_cluster(), or has finished) and none can complete what another "
           "waits for, e.g. %s at %s:%d", f ? where(f, w1, sizeof w1) : "?",
           f && f->file ? f->file : "?", f ? f->line : 0);
  fail(b, msg);
}

// Every fiber of a team's block waits: 0 when some may run again, -1 on deadlock or failure.
static int team_idle(Block* b) {
  Team* t = b->team;
  std::unique_lock<std::mutex> lk(t->mu);
  for (;;) {
    if (t->broken) {
      if (t->deadlocked) report_idle_deadlock(b);
      else fail(b, "stopped: another block of the cluster failed");
      return -1;
    }
    if (release_completed(b)) return 0;
    long long g = t->arrivals;
    t->idle++;
    if (t->idle + t->arrived >= t->c) {
      t->broken = t->deadlocked = true;
      t->cv.notify_all();
      report_idle_deadlock(b);
      return -1;
    }
    while (t->arrivals == g && !t->broken) {
      if (g_abort.load(std::memory_order_relaxed)) {
        t->broken = true;
        t->cv.notify_all();
        break;
      }
      t->cv.wait_for(lk, std::chrono::milliseconds(50));
    }
  }
}

#endif  // GPUDSL_EMU_DSMEM_H
