// The one routine through which the daemon reads or writes client memory
// (DESIGN.md §2 item 3).
//
// A client can shrink (ftruncate) or replace its shm segment while the
// daemon has it mapped. Touching a mapped page past the segment's new end
// raises SIGBUS, which would kill the daemon and every other client's
// request with it. GuardedCopy() catches that fault for the copy in
// progress and turns it into a kClientFault Status, so only the offending
// request fails.
#ifndef VAED_GUARDED_COPY_H_
#define VAED_GUARDED_COPY_H_

#include <cstddef>
#include <string_view>

#include "vaed/status.h"

namespace vaed {

// Copies `n` bytes from `src` to `dst` (memcpy semantics: the ranges must
// not overlap). Either side may be client memory.
//
// Returns OK when all n bytes were copied. If reading src or writing dst
// faults with SIGBUS or SIGSEGV at an address inside [src, src + n) or
// [dst, dst + n), the copy stops and kClientFault is returned:
//   "<what>: memory fault (SIGBUS) while copying N bytes; the client's
//    segment shrank or was unmapped (source byte K)".
// dst then holds an unspecified prefix of the data. The process is left
// intact and later calls work normally (also after repeated faults).
// Returns kInternal if the fault handlers could not be installed.
//
// Faults anywhere else, and faults on threads that are not inside
// GuardedCopy(), are passed to the handler that was installed before ours
// (or take the default action, i.e. the process still crashes on a real
// bug). n == 0 returns OK without touching memory.
//
// Side effect: the first call installs process-wide SIGBUS and SIGSEGV
// handlers (once, thread-safely). Install any other handlers for these
// signals (crash reporters, LibTorch) before the first call so that ours
// chains to them; a handler installed later replaces ours and disables the
// guard.
//
// Thread-safety: safe to call concurrently from any number of threads; each
// thread's guard is independent. Not async-signal-safe (do not call it from
// a signal handler).
Status GuardedCopy(void* dst, const void* src, size_t n, std::string_view what);

}  // namespace vaed

#endif  // VAED_GUARDED_COPY_H_
