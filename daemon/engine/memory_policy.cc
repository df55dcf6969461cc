#include "daemon/engine/memory_policy.h"

#include <malloc.h>

#include <climits>

namespace vaed::engine {

bool RetainFreedMemoryForReuse() {
  // Without mmap, a block too large for a thread's arena falls back to the
  // main arena (glibc's arena_get_retry), so executor threads are served too.
  const bool mmap_off = mallopt(M_MMAP_MAX, 0) == 1;
  const bool trim_off = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return mmap_off && trim_off;
}

}  // namespace vaed::engine
