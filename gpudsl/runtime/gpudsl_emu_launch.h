// gpudsl_emu_launch.h — launching a grid on the emulator's worker threads and calling a
// kernel with its packed arguments.  Included by gpudsl_emu_sched.h inside namespace
// gpudsl_emu, after the fibers, barriers and clusters; not meant to be included on its own.

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
