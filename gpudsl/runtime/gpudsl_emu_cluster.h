// gpudsl_emu_cluster.h — thread block clusters on the emulator (docs/hopper.md (clusters)).
//
// A kernel declared __cluster_dims__(c, 1, 1) is launched with cluster size c (the launcher
// gpudsl_emu_cluster_kernel(name, c)): the OS threads running blocks form teams of c, and
// a team runs the c blocks of one cluster together, one block per OS thread (each with its
// own __shared__, which is thread_local).  sync_cluster() is a block barrier, then thread 0
// of each block meets the other blocks' thread 0 at the team's barrier (the OS thread blocks
// there, with its fibers), then a second block barrier releases the block's threads: every
// thread of every block of the cluster has arrived before any leaves.  A block that finishes
// arrives at the same barrier with another kind: a round that mixes the two is the cluster
// barrier divergence check() refuses, reported as a LaunchError (never a hang).  A member
// that fails breaks its team, so the others stop too.
#ifndef GPUDSL_EMU_CLUSTER_H
#define GPUDSL_EMU_CLUSTER_H
// (<chrono>, <condition_variable>, <algorithm>: gpudsl_emu_sys.h, outside the namespace)


struct Team {
  std::mutex mu;
  std::condition_variable cv;
  int c = 1;
  int arrived = 0;
  int kinds = 0;            // the kinds of this round's arrivals (a bit mask)
  long long gen = 0;        // rounds completed
  bool mixed = false;       // the last round mixed sync_cluster() with a finished block
  bool broken = false;      // a member stopped: every wait returns 2
  Block* members[16] = {};  // by rank (gpudsl_emu_dsmem.h)
  long long arrivals = 0;   // arrives on cluster barriers so far
  int idle = 0;             // members whose fibers all wait, since the last arrival
  bool deadlocked = false;  // broken because every member waits (gpudsl_emu_dsmem.h)
};

enum { AT_CLUSTER_SYNC = 1, AT_CLUSTER_END = 2 };

// 0: every member arrived with the same kind; 1: the round mixed kinds (divergence);
// 2: the team is broken (a member failed, or Ctrl-C).
static int team_arrive(Team* t, int kind) {
  std::unique_lock<std::mutex> lk(t->mu);
  if (t->broken) return 2;
  t->kinds |= kind;
  long long g = t->gen;
  if (++t->arrived == t->c) {
    t->mixed = t->kinds != kind;
    t->arrived = 0;
    t->kinds = 0;
    t->gen++;
    t->cv.notify_all();
    return t->mixed ? 1 : 0;
  }
  if (t->idle + t->arrived >= t->c) {   // the others idle: nobody will come
    t->broken = t->deadlocked = true;
    t->cv.notify_all();
    return 2;
  }
  while (t->gen == g && !t->broken) {
    if (g_abort.load(std::memory_order_relaxed)) {
      t->broken = true;
      t->cv.notify_all();
      break;
    }
    t->cv.wait_for(lk, std::chrono::milliseconds(50));
  }
  if (t->gen != g) return t->mixed ? 1 : 0;
  return 2;
}

static void team_break(Team* t) {
  if (!t) return;
  std::lock_guard<std::mutex> lk(t->mu);
  t->broken = true;
  t->cv.notify_all();
}

static inline void sync_cluster(const char* file, int line) {
  Fiber* f = self();
  Block* b = f->blk;
  block_barrier(file, line, 0, 0);
  if (b->team && f->idx == 0) {
    int r = team_arrive(b->team, AT_CLUSTER_SYNC);
    if (r != 0) {
      char msg[512];
      if (r == 1)
        snprintf(msg, sizeof msg, "cluster barrier divergence: the block waits at sync_cluster() at %s:%d "
                 "while another block of its cluster finished without reaching it; every block of a "
                 "cluster must reach the same sync_cluster()s", file, line);
      else if (b->team->deadlocked)
        snprintf(msg, sizeof msg, "deadlock: every block of the cluster waits (this one at "
                 "sync_cluster() at %s:%d, others at mbarriers or named barriers) and none can "
                 "complete what another waits for", file, line);
      else
        snprintf(msg, sizeof msg, "stopped at sync_cluster() at %s:%d: another block of the cluster "
                 "failed", file, line);
      fail(b, msg);
      switch_to(&b->ctx[f->idx], &b->main);
      __builtin_trap();
    }
  }
  block_barrier(file, line, 0, 0);
}

#endif  // GPUDSL_EMU_CLUSTER_H
