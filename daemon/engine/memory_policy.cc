#include "daemon/engine/memory_policy.h"

#include <malloc.h>

#include <climits>

namespace vaed::engine {

bool RetainFreedMemoryForReuse() {
  // One arena: a thread arena's heaps are at most 64 MiB and are unmapped
  // as they empty, which brought the page-fault churn back for the executor
  // thread (bikes through the daemon: 1.52 s/frame with per-thread arenas,
  // 0.33 s/frame with one). Threads started later all share the main heap.
  const bool one_arena = mallopt(M_ARENA_MAX, 1) == 1;
  const bool mmap_off = mallopt(M_MMAP_MAX, 0) == 1;
  const bool trim_off = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return one_arena && mmap_off && trim_off;
}

bool ReleaseFreedMemoryAbove(uint64_t retained_bytes) {
  const struct mallinfo2 info = mallinfo2();
  if (info.arena <= retained_bytes) return false;
  malloc_trim(0);
  return true;
}

}  // namespace vaed::engine
