#include "daemon/engine/request_memory.h"

#include <fstream>

#include "daemon/models/byte_units.h"
#include "vaed/tensor_ref.h"

namespace vaed::engine {
using models::GiB;
using models::GiBOrMiB;

RequestMemory RequestMemoryOf(uint64_t budget_bytes, uint64_t resident_bytes,
                              uint64_t host_total_bytes) {
  const std::string minus = " minus " + GiB(resident_bytes) + " of resident weights";
  RequestMemory m;
  if (budget_bytes > 0) {
    m.source =
        "executor.memory_budget_mib = " + std::to_string(budget_bytes >> 20) + " MiB" + minus;
    m.known = true;
    m.bytes = budget_bytes > resident_bytes ? budget_bytes - resident_bytes : 0;
    return m;
  }
  if (host_total_bytes == 0) return m;  // unknown: no refusal on memory
  m.source = "the host's " + GiB(host_total_bytes) + " (MemTotal; no executor.memory_budget_mib)" +
             minus;
  m.known = true;
  m.bytes = host_total_bytes > resident_bytes ? host_total_bytes - resident_bytes : 0;
  return m;
}

RequestMemory DeviceRequestMemory(const std::vector<RankDeviceMemory>& devices) {
  RequestMemory m;
  const RankDeviceMemory* smallest = nullptr;
  uint64_t smallest_bytes = 0;
  for (const RankDeviceMemory& d : devices) {
    if (d.total_bytes == 0) return RequestMemory{};  // unreadable: no refusal on memory
    const uint64_t bytes = d.total_bytes > d.resident_bytes ? d.total_bytes - d.resident_bytes : 0;
    if (smallest == nullptr || bytes < smallest_bytes) {
      smallest = &d;
      smallest_bytes = bytes;
    }
  }
  if (smallest == nullptr) return m;
  m.known = true;
  m.bytes = smallest_bytes;
  m.source = "the device memory of " + smallest->name + ", " + GiB(smallest->total_bytes) +
             " minus " + GiB(smallest->resident_bytes) + " of resident weights";
  return m;
}

uint64_t HostMemoryTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib << 10;
  }
  return 0;
}

Status CheckRequestMemory(uint64_t estimate_bytes, const std::string& estimate_terms,
                          const std::vector<int64_t>& latent_shape, const RequestMemory& memory) {
  if (!memory.known || estimate_bytes <= memory.bytes) return Status::Ok();
  return ResourceExhausted("latent " + ShapeToString(latent_shape) + " needs about " +
                           GiBOrMiB(estimate_bytes) + " to decode (" + estimate_terms +
                           "; an estimate), more than the " + GiBOrMiB(memory.bytes) +
                           " a request may use here (" + memory.source +
                           "); decode a shorter or smaller latent, or raise the budget");
}

}  // namespace vaed::engine
