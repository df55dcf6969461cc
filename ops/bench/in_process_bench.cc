#include "ops/bench/in_process_bench.h"

#include <spdlog/spdlog.h>

#include <iostream>

#include "daemon/engine/memory_policy.h"
#include "daemon/models/mkl_reproducibility.h"
#include "daemon/models/torch_status.h"

namespace vaed::bench {

int RunInProcessBenchmark(const char* program, bool glibc_default_malloc,
                          const std::function<int()>& run) {
  // The daemon's numerics (MKL's CNR mode, VML initialised), before any LibTorch work.
  const models::MklReproducibilityOutcome mkl = models::SetUpMklForReproducibleDecodes();
  if (!mkl.reproducible()) std::cerr << program << ": " << mkl.Describe() << "\n";
  spdlog::set_level(spdlog::level::warn);
  // Measure under the daemon's allocator settings unless asked not to.
  if (!glibc_default_malloc) engine::RetainFreedMemoryForReuse();
  try {
    return run();
  } catch (...) {
    std::cerr << program << ": " << models::CurrentTorchErrorStatus("benchmark").ToString() << "\n";
    return 1;
  }
}

}  // namespace vaed::bench
