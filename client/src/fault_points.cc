#include "fault_points.h"

#include <atomic>

namespace vaed::client::internal {

namespace {
std::atomic<FaultHook> installed_hook{nullptr};
}  // namespace

void SetFaultHook(FaultHook hook) noexcept { installed_hook.store(hook); }

void FaultPoint(const char* point) {
  if (FaultHook hook = installed_hook.load(std::memory_order_relaxed)) hook(point);
}

}  // namespace vaed::client::internal
