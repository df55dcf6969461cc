// The key tables of the daemon config (config_keys.h): one per section.
// The defaults are the members' initializers in config.h.
#include "daemon/server/config_keys.h"

#include <limits>
#include <utility>

namespace vaed::server::config_keys {

namespace {

const EntryPrint kUnlessEmpty{{}, std::nullopt, true};

EntryPrint OnlyFor(std::vector<models::ModelKind> kinds,
                   std::optional<int64_t> unset_value = std::nullopt) {
  return EntryPrint{std::move(kinds), unset_value, false};
}

using models::ModelKind::kDemo;
using models::ModelKind::kH3;
using models::ModelKind::kH3Video;
using models::ModelKind::kTaef2;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxUid = int64_t{std::numeric_limits<uint32_t>::max()} - 1;
const Range kAny{};  // strings, booleans and string lists have no range

}  // namespace

// One row a key, as the rows read best (clang-format would split each).
// clang-format off

const std::vector<Key<ServerOptions>>& ServerKeys() {
  using O = ServerOptions;
  static const std::vector<Key<O>> keys = {
      {"socket", &O::socket, kAny, "Unix socket path of the control channel"},
      {"heartbeat_interval_ms", &O::heartbeat_interval_ms, {100, 3600000},
       "clients send a heartbeat at least this often (ms)"},
      {"client_timeout_ms", &O::client_timeout_ms, {500, 86400000},
       "a silent client with nothing in flight is dropped after this (ms)"},
      {"max_message_bytes", &O::max_message_bytes, {4096, 1 << 28},
       "largest control message accepted (bytes)"},
      {"heartbeat_liveness", &O::heartbeat_liveness, {1, 100},
       "heartbeats a client may miss before it reconnects"},
      {"send_hwm", &O::send_hwm, {1, 1000000}, "replies queued per connection (ZMQ_SNDHWM)"},
      {"recv_hwm", &O::recv_hwm, {1, 1000000},
       "8 KiB chunks read ahead per connection (ZMQ_RCVHWM)"},
      {"socket_group", &O::socket_group, kAny,
       "group of the socket and its directory; \"\" = the daemon's"},
      {"allowed_uids", &O::allowed_uids, {0, kMaxUid}, "peer uids admitted"},
      {"allowed_groups", &O::allowed_groups, kAny, "peer groups admitted (names or gids)"},
      {"admin_uids", &O::admin_uids, {0, kMaxUid}, "uids that may run admin requests"},
      {"region_prefix", &O::region_prefix, kAny,
       "prefix of every registered shm segment name; \"\" = any"},
      {"max_in_flight_per_client", &O::max_in_flight_per_client, {1, 100000},
       "decodes queued or running per client"},
      {"max_clients_per_process", &O::max_clients_per_process, {1, 100000},
       "clients (Hellos) one process may hold"},
      {"max_connections", &O::max_connections, {1, 100000}, "connections open at once"},
      {"max_connections_per_uid", &O::max_connections_per_uid, {1, 100000},
       "connections one uid may hold"},
      {"max_regions", &O::max_regions, {1, 1000000}, "regions registered by all clients"},
      {"max_regions_per_client", &O::max_regions_per_client, {1, 100000},
       "regions registered per client"},
      {"max_region_bytes_per_client", &O::max_region_bytes_per_client, {1, kInt64Max},
       "bytes mapped per client"},
  };
  return keys;
}

const std::vector<Key<QuarantineOptions>>& QuarantineKeys() {
  using O = QuarantineOptions;
  static const std::vector<Key<O>> keys = {
      {"fault_threshold", &O::fault_threshold, {0, 1000000},
       "faults within window_ms that quarantine a process; 0 = never"},
      {"window_ms", &O::window_ms, {100, 86400000}, "the fault-counting window (ms)"},
      {"duration_ms", &O::duration_ms, {1, 86400000}, "first quarantine; repeats double it (ms)"},
      {"max_duration_ms", &O::max_duration_ms, {1, 604800000}, "longest quarantine (ms)"},
  };
  return keys;
}

const std::vector<Key<engine::ExecutorOptions>>& ExecutorKeys() {
  using O = engine::ExecutorOptions;
  static const std::vector<Key<O>> keys = {
      {"intra_op_threads", &O::intra_op_threads, {1, 256}, "LibTorch intra-op threads"},
      {"queue_capacity", &O::queue_capacity, {1, 100000}, "waiting decode requests"},
      {"retained_heap_mib", &O::retained_heap_mib, {0, 1 << 24},
       "heap kept between requests for reuse (MiB)"},
      {"memory_budget_mib", &O::memory_budget_mib, {0, int64_t{1} << 30},
       "tensor memory budget of the daemon in MiB, 0 = none"},
      {"allow_fault_injection", &O::allow_fault_injection, kAny,
       "testing only: honour DecodeOptions.inject_faults"},
      {"device", Enum(&O::device, engine::kDeviceKindNames), kAny,
       "where ranks decode: cpu, or cuda (GPU builds)"},
      {"devices", &O::devices, kAny,
       "cuda: device UUIDs of the ranks (group.ranks of them); [] = the smallest UUIDs"},
  };
  return keys;
}

const std::vector<Key<engine::GroupOptions>>& GroupKeys() {
  using O = engine::GroupOptions;
  static const std::vector<Key<O>> keys = {
      {"ranks", &O::ranks, {1, 64}, "local ranks, each with its own executor and models"},
      {"size", &O::size, {1, 64}, "ranks a request decodes on unless it asks"},
      {"qualified_sizes", &O::qualified_sizes, {1, 64}, "group sizes requests may ask for"},
      {"few_tiles", Enum(&O::few_tiles, parallel::kFewTilesNames), kAny,
       "fewer tiles than ranks: pad or shrink the group"},
      {"backend", Enum(&O::backend, parallel::kBackendNames), kAny, "communicator backend"},
      {"collective_timeout_ms", &O::collective_timeout_ms, {100, 3600000},
       "limit of a collective and of a rendezvous (ms)"},
      {"host", &O::host, kAny, "address the Gloo transport binds and announces"},
      {"store_address", &O::store_address, kAny,
       "host:port of node 0's TCPStore; \"\" = this daemon alone"},
      {"world_nodes", &O::world_nodes, {1, 1024}, "daemons (nodes) of the group"},
      {"node_rank", &O::node_rank, {0, 1023}, "this daemon's index among them"},
  };
  return keys;
}

const std::vector<Key<LogOptions>>& LogKeys() {
  using O = LogOptions;
  static const std::vector<Key<O>> keys = {
      {"level", Enum(&O::level, kLogLevelNames), kAny, "spdlog level"},
      {"format", Enum(&O::format, kLogFormatNames), kAny,
       "line format: text, or json for log shippers"},
  };
  return keys;
}

const std::vector<Key<MetricsOptions>>& MetricsKeys() {
  using O = MetricsOptions;
  static const std::vector<Key<O>> keys = {
      {"enabled", &O::enabled, kAny, "serve the Prometheus endpoint and collect metrics"},
      {"address", &O::address, kAny, "address the endpoint binds"},
      {"port", &O::port, {0, 65535}, "TCP port of the endpoint; 0 = any free port"},
  };
  return keys;
}

const std::vector<Key<ProfileOptions>>& ProfileKeys() {
  using O = ProfileOptions;
  static const std::vector<Key<O>> keys = {
      {"default", Enum(&O::default_profile, kProfileNames), kAny,
       "profile of requests that name none"},
      {"allowed", EnumList(&O::allowed, kProfileNames), kAny, "profiles requests may use"},
  };
  return keys;
}

const std::vector<Key<models::ModelConfig>>& EntryKeys() {
  using O = models::ModelConfig;
  static const std::vector<Key<O>> keys = {
      {"name", &O::name, kAny, "registry name clients use (required, unique)"},
      {"kind", Enum(&O::kind, models::kModelKindNames), kAny,
       "taef2, demo, h3_video, h3_audio or h3 (required)"},
      {"weights", &O::weights_path, kAny, "decoder weights (taef2; h3_video, h3: video)",
       kUnlessEmpty},
      {"config", &O::config_path, kAny, "video decoder config JSON (h3_video, h3)",
       kUnlessEmpty},
      {"audio_weights", &O::audio_weights_path, kAny, "audio decoder weights (h3_audio, h3)",
       kUnlessEmpty},
      {"audio_config", &O::audio_config_path, kAny, "audio decoder config JSON (h3_audio, h3)",
       kUnlessEmpty},
      {"weights_sha256", &O::weights_sha256, kAny,
       "expected SHA-256 of the weights file (or a SHA256SUMS beside it)", kUnlessEmpty},
      {"audio_weights_sha256", &O::audio_weights_sha256, kAny,
       "expected SHA-256 of the audio_weights file", kUnlessEmpty},
      {"compute_dtype", Enum(&O::compute_dtype, models::kComputeDtypeNames), kAny, "float32, float16 (GPU ranks) or bfloat16 (h3_video, h3)",
       OnlyFor({kH3Video, kH3})},
      {"stack_tiling", Enum(&O::stack_tiling, models::kConfiguredStackTilingNames), kAny, "off, on or auto (h3_video, h3)",
       OnlyFor({kH3Video, kH3})},
      {"frame_batch", &O::frame_batch, {1, 256}, "latent frames per forward pass (taef2, demo)",
       OnlyFor({kTaef2, kDemo}, 4)},
      {"seed", &O::seed, {0, kInt64Max}, "seed of generated weights"},
      {"plan_cache_capacity", &O::plan_cache_capacity, {1, 1024},
       "compiled plans kept (h3_video, h3)", OnlyFor({kH3Video, kH3}, 8)},
      {"plan_after_sightings", &O::plan_after_sightings, {1, 1000},
       "decoder calls of a shape before it gets a plan (h3_video, h3)",
       OnlyFor({kH3Video, kH3}, 2)},
      {"warm_shapes", &O::warm_shapes, kAny, "latent canvases HxW every rank decodes before READY",
       OnlyFor({kH3Video, kH3})},
  };
  return keys;
}

const std::vector<Key<ModelsOptions>>& ModelsKeys() {
  using O = ModelsOptions;
  static const std::vector<Key<O>> keys = {
      {"default", &O::default_model, kAny, "model of requests that name none"},
      {"entry", &O::entries, kAny, "one [[models.entry]] table per model kept resident"},
  };
  return keys;
}

// clang-format on

}  // namespace vaed::server::config_keys
