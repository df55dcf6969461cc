#include "vaed/guarded_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

namespace vaed {

namespace {

// Per-thread guard. A plain, zero-initialized POD: accessing a thread_local
// without a constructor never runs code, and in the daemon (vaed_shm is
// linked statically into the executable) it is static TLS, so reading it
// from the signal handler is an ordinary load and async-signal-safe.
//
// The handler reads and writes these fields while the thread's normal code
// is suspended mid-copy, so the compiler must not cache them in registers:
// they are volatile, and every change of `active` is fenced with
// std::atomic_signal_fence so that the memcpy cannot be moved outside the
// window in which the guard is armed.
struct GuardState {
  volatile sig_atomic_t active;  // 1 while this thread is inside a guarded memcpy
  volatile uintptr_t src_begin;  // the ranges being copied; a fault outside
  volatile uintptr_t src_end;    // them is a genuine bug and is not caught
  volatile uintptr_t dst_begin;
  volatile uintptr_t dst_end;
  volatile sig_atomic_t signo;    // written by the handler on a caught fault
  volatile uintptr_t fault_addr;  // ditto
  sigjmp_buf resume;
};

thread_local GuardState t_guard;

// The handlers that were installed before ours. Written once, before our
// handler is installed, and only read afterwards.
struct sigaction g_previous_bus;
struct sigaction g_previous_segv;

void OnFault(int signo, siginfo_t* info, void* context);

// Hands a fault that is not ours to whoever had the signal before us.
// Everything here is async-signal-safe: sigaction() and raise() are on the
// POSIX list, and the previous handler was written to run in this context.
void ChainToPrevious(int signo, siginfo_t* info, void* context) {
  const struct sigaction& previous = signo == SIGBUS ? g_previous_bus : g_previous_segv;
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) {
      previous.sa_sigaction(signo, info, context);
      return;
    }
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(signo);
    return;
  }
  // Default action (an ignored SIGBUS/SIGSEGV from a real fault cannot be
  // ignored either: the instruction would fault forever). Restore SIG_DFL
  // and return: a hardware fault re-executes the faulting instruction and
  // now kills the process with the original address in the core dump. A
  // signal sent with kill() (si_code <= 0) does not recur by itself, so
  // re-raise it; it stays blocked until this handler returns.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signo, &dfl, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(signo);
}

bool InRange(uintptr_t addr, uintptr_t begin, uintptr_t end) { return addr >= begin && addr < end; }

void OnFault(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  GuardState& guard = t_guard;
  // Only a kernel-generated fault (si_code > 0) inside the ranges of the copy
  // this very thread is doing is ours; everything else is somebody's bug.
  if (guard.active != 0 && info != nullptr && info->si_code > 0) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    if (InRange(addr, guard.src_begin, guard.src_end) ||
        InRange(addr, guard.dst_begin, guard.dst_end)) {
      guard.active = 0;
      guard.signo = signo;
      guard.fault_addr = addr;
      // Leaving a handler with siglongjmp is allowed as long as the code it
      // interrupted was async-signal-safe: here that is memcpy (on the POSIX
      // list since POSIX.1-2008 TC2), which holds no locks and no state that
      // abandoning it half-way could corrupt. sigsetjmp(..., 1) saved the
      // signal mask, so the jump also unblocks this signal: the guard is
      // re-armed for the next fault.
      siglongjmp(guard.resume, 1);
    }
  }
  ChainToPrevious(signo, info, context);
  errno = saved_errno;
}

// Installs OnFault for SIGBUS and SIGSEGV once per process. Returns the
// errno of a failed sigaction(), 0 on success.
int InstallHandlersOnce() {
  static std::once_flag once;
  static int install_errno = 0;
  std::call_once(once, [] {
    struct sigaction ours;
    std::memset(&ours, 0, sizeof(ours));
    ours.sa_sigaction = OnFault;
    // SA_ONSTACK: use the thread's alternate stack if it has one (a stack
    // overflow is a SIGSEGV too, and chaining it needs a usable stack).
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    // Block the other fault signal while handling one, so the two handlers
    // never interleave on one thread.
    sigemptyset(&ours.sa_mask);
    sigaddset(&ours.sa_mask, SIGBUS);
    sigaddset(&ours.sa_mask, SIGSEGV);
    // Record the previous handler before installing ours, so that OnFault
    // never sees a half-written g_previous_*.
    if (sigaction(SIGBUS, nullptr, &g_previous_bus) != 0 ||
        sigaction(SIGSEGV, nullptr, &g_previous_segv) != 0 ||
        sigaction(SIGBUS, &ours, nullptr) != 0 || sigaction(SIGSEGV, &ours, nullptr) != 0) {
      install_errno = errno;
    }
  });
  return install_errno;
}

// Runs memcpy with the guard armed. Returns true when it completed, false
// when a fault in the copied ranges interrupted it (details in `guard`).
//
// Kept apart from GuardedCopy() so that nothing but these four arguments,
// none of which is modified after sigsetjmp, is live across the jump.
//
// One sigsetjmp per call (one sigprocmask system call to save the mask) is
// cheap next to copying a latent or a frame, so the copy is one memcpy and
// not a loop of chunks; the fault address, not the loop position, tells
// where the copy stopped.
[[gnu::noinline]] bool CopyUnderGuard(GuardState& guard, void* dst, const void* src, size_t n) {
  if (sigsetjmp(guard.resume, /*savemask=*/1) != 0) {
    return false;  // came back from OnFault, which disarmed the guard
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  guard.active = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(dst, src, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  guard.active = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return true;
}

}  // namespace

Status GuardedCopy(void* dst, const void* src, size_t n, std::string_view what) {
  if (n == 0) return Status::Ok();
  if (const int err = InstallHandlersOnce(); err != 0) {
    return Internal(std::string(what) + ": cannot install the SIGBUS/SIGSEGV handlers: " +
                    ErrnoStatus(err, "sigaction").message());
  }
  GuardState& guard = t_guard;
  if (guard.active != 0) {
    // Only reachable by calling GuardedCopy from a signal handler that
    // interrupted a guarded copy on this thread.
    return Internal(std::string(what) + ": GuardedCopy re-entered on one thread");
  }
  const auto src_addr = reinterpret_cast<uintptr_t>(src);
  const auto dst_addr = reinterpret_cast<uintptr_t>(dst);
  guard.src_begin = src_addr;
  guard.src_end = src_addr + n;
  guard.dst_begin = dst_addr;
  guard.dst_end = dst_addr + n;
  if (CopyUnderGuard(guard, dst, src, n)) return Status::Ok();

  const uintptr_t addr = guard.fault_addr;
  const bool in_src = InRange(addr, src_addr, src_addr + n);
  const uintptr_t offset = addr - (in_src ? src_addr : dst_addr);
  return ClientFault(std::string(what) + ": memory fault (" +
                     (guard.signo == SIGBUS ? "SIGBUS" : "SIGSEGV") + ") while copying " +
                     std::to_string(n) + " bytes; the client's segment shrank or was unmapped (" +
                     (in_src ? "source" : "destination") + " byte " + std::to_string(offset) + ")");
}

}  // namespace vaed
