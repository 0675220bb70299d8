// gpudsl_emu_faults.h — the emulator's error report per launch and its handling of faults
// and Ctrl-C in kernel code.  Included by gpudsl_emu_sched.h inside namespace gpudsl_emu,
// after the Fiber and Block records; not meant to be included on its own.

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
