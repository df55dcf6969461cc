// The embedded defaults, reading a config file, and the whole-config checks.
// The key tables and the TOML reader and printer are in config_toml.cc.
#include "daemon/server/config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "daemon/engine/cuda_devices.h"
#include "daemon/models/model_registry.h"
#include "daemon/parallel/nccl_available.h"
#include "daemon/server/access_control.h"
#include "daemon/server/config_keys.h"
#include "vaed/host_region.h"

namespace vaed::server {

// Only what the struct defaults (config.h) lack: the built-in demo model.
const char* const kDefaultConfigToml = R"toml(# vaed embedded default configuration.
[models]
default = "demo"

# Built-in demo model: the TAEF2 architecture with deterministic seeded
# weights, so that vaed serves without any external file. Its output is not
# a real image; every reply and log line says so.
[[models.entry]]
name = "demo"
kind = "demo"
seed = 20261130
)toml";

Result<DaemonOptions> LoadConfigFile(const std::string& path, DaemonOptions base,
                                     std::set<std::string>* keys_set) {
  std::ifstream in(path);
  if (!in) return ErrnoStatus(errno, "reading config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  VAED_ASSIGN_OR_RETURN(DaemonOptions o, ParseConfigToml(ss.str(), path, std::move(base), keys_set));
  o.source = path;
  return o;
}

namespace {

// executor.device and executor.devices, as far as they can be checked
// without a device (the rest at start-up: rank_devices.h).
Status ValidateDevices(const DaemonOptions& o) {
  const engine::ExecutorOptions& e = o.executor;
  if (e.device == engine::DeviceKind::kCuda && !engine::CudaDevicesAvailable()) {
    return InvalidArgument("executor.device is \"cuda\" but this vaed was built without CUDA "
                           "(cmake --preset cuda); use \"cpu\"")
        .WithField("executor.device");
  }
  if (e.device == engine::DeviceKind::kCpu && !e.devices.empty()) {
    return InvalidArgument("executor.devices lists " + std::to_string(e.devices.size()) +
                           " devices but executor.device is \"cpu\"; set executor.device = "
                           "\"cuda\" or leave executor.devices empty")
        .WithField("executor.devices");
  }
  return engine::ParseConfiguredDevices(e.devices, o.group.ranks).status();
}

}  // namespace

Status ValidateOptions(const DaemonOptions& o) {
  // Single keys first (integer ranges): options set in code or by flags
  // have not been through the TOML reader.
  VAED_RETURN_IF_ERROR(CheckKeyRules(o));
  if (o.server.socket.empty()) return InvalidArgument("server.socket must not be empty");
  // sun_path holds 108 bytes including the terminating NUL.
  if (o.server.socket.size() > 107) {
    return InvalidArgument("server.socket '" + o.server.socket + "' is " +
                           std::to_string(o.server.socket.size()) +
                           " bytes; a Unix socket path holds at most 107");
  }
  if (o.server.client_timeout_ms <= o.server.heartbeat_interval_ms) {
    return InvalidArgument("server.client_timeout_ms (" +
                           std::to_string(o.server.client_timeout_ms) +
                           ") must be greater than server.heartbeat_interval_ms (" +
                           std::to_string(o.server.heartbeat_interval_ms) + ")");
  }
  if (!o.server.region_prefix.empty()) {
    if (Status s = ValidateRegionName(o.server.region_prefix); !s.ok()) {
      return InvalidArgument("server.region_prefix '" + o.server.region_prefix +
                             "' cannot start a region name: " + s.message());
    }
  }
  VAED_RETURN_IF_ERROR(ValidateDevices(o));
  if (o.group.backend == parallel::Backend::kNccl && !parallel::NcclAvailable()) {
    return InvalidArgument("group.backend is \"nccl\" but this vaed was built without CUDA "
                           "(cmake --preset cuda); use \"gloo\"");
  }
  if (o.group.world_nodes > 1 && o.group.store_address.empty()) {
    return InvalidArgument("group.world_nodes is " + std::to_string(o.group.world_nodes) +
                           "; groups spanning daemons need group.store_address (host:port "
                           "of the TCPStore node 0 serves)");
  }
  VAED_RETURN_IF_ERROR(engine::MakeGroupLayout(o.group).status());
  // Groups are resolved now, before any model loads.
  if (!o.server.socket_group.empty()) {
    VAED_RETURN_IF_ERROR(ResolveGroup(o.server.socket_group, "server.socket_group").status());
  }
  for (size_t i = 0; i < o.server.allowed_groups.size(); ++i) {
    VAED_RETURN_IF_ERROR(ResolveGroup(o.server.allowed_groups[i],
                                      "server.allowed_groups[" + std::to_string(i) + "]")
                             .status());
  }
  if (o.quarantine.max_duration_ms < o.quarantine.duration_ms) {
    return InvalidArgument("quarantine.max_duration_ms (" +
                           std::to_string(o.quarantine.max_duration_ms) +
                           ") must be >= quarantine.duration_ms (" +
                           std::to_string(o.quarantine.duration_ms) + ")");
  }
  if (o.metrics.address.empty()) {
    return InvalidArgument("metrics.address must not be empty (\"127.0.0.1\" serves local "
                           "scrapers only; set metrics.enabled = false for no endpoint)");
  }
  if (o.models.entries.empty()) return InvalidArgument("models.entry: no model is configured");
  std::set<std::string> names;
  for (const auto& m : o.models.entries) {
    if (!names.insert(m.name).second) {
      return InvalidArgument("models.entry: model name '" + m.name + "' is configured twice");
    }
  }
  if (!names.count(o.models.default_model)) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument("models.default '" + o.models.default_model +
                           "' is not a configured model (configured: " + known + ")");
  }
  VAED_RETURN_IF_ERROR(ValidateProfileOptions(o.profiles));
  // Each entry's keys against its kind, without loading anything, so
  // --print-config and a bad config fail the same way.
  return models::ModelRegistry::Validate(o.models.entries, o.models.default_model);
}

}  // namespace vaed::server
