// What the daemon learns at start-up once its options are fixed: not
// config keys, never read from TOML or flags. main.cc resolves them (the
// ranks' devices before loading, the request limit after the weights are
// resident); the executor, the request handler and admission read them.
//
// Thread-safety: plain values, fixed before the control loop starts.
#ifndef VAED_DAEMON_ENGINE_RUNTIME_FACTS_H_
#define VAED_DAEMON_ENGINE_RUNTIME_FACTS_H_

#include <vector>

#include "daemon/engine/rank_devices.h"
#include "daemon/engine/request_memory.h"

namespace vaed::engine {

struct RuntimeFacts {
  // The device of each local rank, resolved from executor.device and
  // executor.devices (rank_devices.h ResolveRankDevices). Empty = every
  // rank on the CPU.
  std::vector<RankDevice> rank_devices;
  // What one request may hold at its peak (request_memory.h); admission
  // refuses a request whose plan estimates more. Default: unknown (nothing
  // refused on memory).
  RequestMemory request_memory;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_RUNTIME_FACTS_H_
