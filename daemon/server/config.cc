#include "daemon/server/config.h"

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "daemon/models/model_registry.h"
#include "daemon/server/access_control.h"
#include "vaed/host_region.h"

namespace vaed::server {

const char* const kDefaultConfigToml = R"toml(# vaed embedded default configuration.
[server]
socket = "/run/vaed/vaed.sock"
heartbeat_interval_ms = 5000
client_timeout_ms = 30000
max_message_bytes = 1048576

[executor]
intra_op_threads = 2
queue_capacity = 64
retained_heap_mib = 4096
memory_budget_mib = 0
allow_fault_injection = false

[log]
level = "info"
format = "text"

[metrics]
enabled = true
address = "127.0.0.1"
port = 9464

[profiles]
default = "safe"
allowed = ["safe", "optimized", "diagnostic"]

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

namespace {

// The one toml++ adapter: everything toml++ reports becomes a Status here.
class TomlReader {
 public:
  TomlReader(std::string source) : source_(std::move(source)) {}

  Status Error(std::string_view key, std::string_view rule) const {
    return InvalidArgument(source_ + ": " + std::string(key) + " " + std::string(rule));
  }

  Status CheckKeys(const toml::table& table, std::string_view prefix,
                   const std::set<std::string>& allowed) const {
    for (const auto& [key, node] : table) {
      const std::string k(key.str());
      if (!allowed.count(k)) {
        std::string known;
        for (const auto& a : allowed) known += (known.empty() ? "" : ", ") + a;
        return Error(prefix.empty() ? k : std::string(prefix) + "." + k,
                     "is not a known key (known here: " + known + ")");
      }
    }
    return Status::Ok();
  }

  Status String(const toml::table& t, std::string_view prefix, const char* key,
                std::string* out) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_string()) return Error(Join(prefix, key), "must be a string");
    *out = n->as_string()->get();
    return Status::Ok();
  }

  Status Bool(const toml::table& t, std::string_view prefix, const char* key, bool* out) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_boolean()) return Error(Join(prefix, key), "must be true or false");
    *out = n->as_boolean()->get();
    return Status::Ok();
  }

  // An array of strings; `out` is replaced when the key is present.
  Status StringList(const toml::table& t, std::string_view prefix, const char* key,
                    std::vector<std::string>* out) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    const toml::array* arr = n->as_array();
    if (!arr) return Error(Join(prefix, key), "must be an array of strings");
    out->clear();
    for (const toml::node& item : *arr) {
      if (!item.is_string()) return Error(Join(prefix, key), "must be an array of strings");
      out->push_back(item.as_string()->get());
    }
    return Status::Ok();
  }

  // An array of integers in [min, max]; `out` is replaced when present.
  template <typename T>
  Status IntegerList(const toml::table& t, std::string_view prefix, const char* key,
                     std::vector<T>* out, int64_t min, int64_t max) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    const toml::array* arr = n->as_array();
    if (!arr) return Error(Join(prefix, key), "must be an array of integers");
    out->clear();
    for (const toml::node& item : *arr) {
      if (!item.is_integer()) return Error(Join(prefix, key), "must be an array of integers");
      const int64_t v = item.as_integer()->get();
      if (v < min || v > max) {
        return Error(Join(prefix, key), "holds " + std::to_string(v) + "; values must be " +
                                            std::to_string(min) + ".." + std::to_string(max));
      }
      out->push_back(static_cast<T>(v));
    }
    return Status::Ok();
  }

  template <typename T>
  Status Integer(const toml::table& t, std::string_view prefix, const char* key, T* out,
                 int64_t min, int64_t max) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_integer()) return Error(Join(prefix, key), "must be an integer");
    const int64_t v = n->as_integer()->get();
    if (v < min || v > max) {
      return Error(Join(prefix, key), "is " + std::to_string(v) + "; must be " +
                                          std::to_string(min) + ".." + std::to_string(max));
    }
    *out = static_cast<T>(v);
    return Status::Ok();
  }

  // As Integer(), into an optional that stays unset when the key is absent.
  template <typename T>
  Status OptionalInteger(const toml::table& t, std::string_view prefix, const char* key,
                         std::optional<T>* out, int64_t min, int64_t max) const {
    if (!t.contains(key)) return Status::Ok();
    T v{};
    VAED_RETURN_IF_ERROR(Integer(t, prefix, key, &v, min, max));
    *out = v;
    return Status::Ok();
  }

  Result<const toml::table*> Table(const toml::table& t, const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) return static_cast<const toml::table*>(nullptr);
    if (!n->is_table()) return Error(key, "must be a table");
    return n->as_table();
  }

  static std::string Join(std::string_view prefix, std::string_view key) {
    return prefix.empty() ? std::string(key) : std::string(prefix) + "." + std::string(key);
  }

 private:
  std::string source_;
};

Status ParseModelEntry(const TomlReader& r, const toml::table& t, size_t index,
                       models::ModelConfig* out) {
  const std::string prefix = "models.entry[" + std::to_string(index) + "]";
  VAED_RETURN_IF_ERROR(
      r.CheckKeys(t, prefix, {"name", "kind", "weights", "config", "audio_weights",
                              "audio_config", "compute_dtype", "stack_tiling", "frame_batch",
                              "seed", "plan_cache_capacity", "plan_after_sightings",
                              "warm_shapes"}));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "name", &out->name));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "kind", &out->kind));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "weights", &out->weights_path));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "config", &out->config_path));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "audio_weights", &out->audio_weights_path));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "audio_config", &out->audio_config_path));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "compute_dtype", &out->compute_dtype));
  VAED_RETURN_IF_ERROR(r.String(t, prefix, "stack_tiling", &out->stack_tiling));
  VAED_RETURN_IF_ERROR(r.OptionalInteger(t, prefix, "frame_batch", &out->frame_batch, 1, 256));
  VAED_RETURN_IF_ERROR(r.OptionalInteger(t, prefix, "seed", &out->seed, 0, INT64_MAX));
  VAED_RETURN_IF_ERROR(r.OptionalInteger(t, prefix, "plan_cache_capacity",
                                         &out->plan_cache_capacity, 1, 1024));
  VAED_RETURN_IF_ERROR(r.OptionalInteger(t, prefix, "plan_after_sightings",
                                         &out->plan_after_sightings, 1, 1000));
  VAED_RETURN_IF_ERROR(r.StringList(t, prefix, "warm_shapes", &out->warm_shapes));
  if (out->name.empty()) return r.Error(prefix + ".name", "is required and must not be empty");
  if (out->kind.empty()) {
    return r.Error(prefix + ".kind", "is required (taef2, demo, h3_video, h3_audio or h3)");
  }
  return Status::Ok();
}

Status ApplyToml(const toml::table& root, const TomlReader& r, DaemonOptions* o) {
  VAED_RETURN_IF_ERROR(
      r.CheckKeys(root, "", {"server", "executor", "group", "log", "metrics", "models",
                             "profiles", "quarantine"}));

  VAED_ASSIGN_OR_RETURN(const toml::table* server, r.Table(root, "server"));
  if (server) {
    VAED_RETURN_IF_ERROR(r.CheckKeys(
        *server, "server",
        {"socket", "heartbeat_interval_ms", "client_timeout_ms", "max_message_bytes",
         "heartbeat_liveness", "send_hwm", "recv_hwm", "socket_group", "allowed_uids",
         "allowed_groups", "admin_uids", "region_prefix", "max_in_flight_per_client",
         "max_clients_per_process", "max_connections", "max_connections_per_uid", "max_regions",
         "max_regions_per_client", "max_region_bytes_per_client"}));
    VAED_RETURN_IF_ERROR(r.String(*server, "server", "socket", &o->server.socket));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "heartbeat_interval_ms",
                                   &o->server.heartbeat_interval_ms, 100, 3600000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "client_timeout_ms",
                                   &o->server.client_timeout_ms, 500, 86400000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_message_bytes",
                                   &o->server.max_message_bytes, 4096, 1 << 28));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "heartbeat_liveness",
                                   &o->server.heartbeat_liveness, 1, 100));
    VAED_RETURN_IF_ERROR(
        r.Integer(*server, "server", "send_hwm", &o->server.send_hwm, 1, 1000000));
    VAED_RETURN_IF_ERROR(
        r.Integer(*server, "server", "recv_hwm", &o->server.recv_hwm, 1, 1000000));
    VAED_RETURN_IF_ERROR(r.String(*server, "server", "socket_group", &o->server.socket_group));
    VAED_RETURN_IF_ERROR(r.IntegerList(*server, "server", "allowed_uids",
                                       &o->server.allowed_uids, 0, UINT32_MAX - 1));
    VAED_RETURN_IF_ERROR(
        r.StringList(*server, "server", "allowed_groups", &o->server.allowed_groups));
    VAED_RETURN_IF_ERROR(r.IntegerList(*server, "server", "admin_uids", &o->server.admin_uids,
                                       0, UINT32_MAX - 1));
    VAED_RETURN_IF_ERROR(r.String(*server, "server", "region_prefix", &o->server.region_prefix));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_in_flight_per_client",
                                   &o->server.max_in_flight_per_client, 1, 100000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_clients_per_process",
                                   &o->server.max_clients_per_process, 1, 100000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_connections",
                                   &o->server.max_connections, 1, 100000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_connections_per_uid",
                                   &o->server.max_connections_per_uid, 1, 100000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_regions",
                                   &o->server.max_regions, 1, 1000000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_regions_per_client",
                                   &o->server.max_regions_per_client, 1, 100000));
    VAED_RETURN_IF_ERROR(r.Integer(*server, "server", "max_region_bytes_per_client",
                                   &o->server.max_region_bytes_per_client, 1, INT64_MAX));
  }

  VAED_ASSIGN_OR_RETURN(const toml::table* quarantine, r.Table(root, "quarantine"));
  if (quarantine) {
    VAED_RETURN_IF_ERROR(r.CheckKeys(*quarantine, "quarantine",
                                     {"fault_threshold", "window_ms", "duration_ms",
                                      "max_duration_ms"}));
    VAED_RETURN_IF_ERROR(r.Integer(*quarantine, "quarantine", "fault_threshold",
                                   &o->quarantine.fault_threshold, 0, 1000000));
    VAED_RETURN_IF_ERROR(r.Integer(*quarantine, "quarantine", "window_ms",
                                   &o->quarantine.window_ms, 100, 86400000));
    VAED_RETURN_IF_ERROR(r.Integer(*quarantine, "quarantine", "duration_ms",
                                   &o->quarantine.duration_ms, 1, 86400000));
    VAED_RETURN_IF_ERROR(r.Integer(*quarantine, "quarantine", "max_duration_ms",
                                   &o->quarantine.max_duration_ms, 1, 604800000));
  }

  VAED_ASSIGN_OR_RETURN(const toml::table* executor, r.Table(root, "executor"));
  if (executor) {
    VAED_RETURN_IF_ERROR(
        r.CheckKeys(*executor, "executor",
                    {"intra_op_threads", "queue_capacity", "retained_heap_mib",
                     "memory_budget_mib", "allow_fault_injection"}));
    VAED_RETURN_IF_ERROR(r.Integer(*executor, "executor", "intra_op_threads",
                                   &o->executor.intra_op_threads, 1, 256));
    VAED_RETURN_IF_ERROR(r.Integer(*executor, "executor", "queue_capacity",
                                   &o->executor.queue_capacity, 1, 100000));
    VAED_RETURN_IF_ERROR(r.Integer(*executor, "executor", "retained_heap_mib",
                                   &o->executor.retained_heap_mib, 0, 1 << 24));
    VAED_RETURN_IF_ERROR(r.Integer(*executor, "executor", "memory_budget_mib",
                                   &o->executor.memory_budget_mib, 0, int64_t{1} << 30));
    VAED_RETURN_IF_ERROR(r.Bool(*executor, "executor", "allow_fault_injection",
                                &o->executor.allow_fault_injection));
  }

  VAED_ASSIGN_OR_RETURN(const toml::table* group, r.Table(root, "group"));
  if (group) {
    VAED_RETURN_IF_ERROR(r.CheckKeys(*group, "group",
                                     {"ranks", "size", "qualified_sizes", "few_tiles", "backend",
                                      "collective_timeout_ms", "host", "store_address",
                                      "world_nodes", "node_rank"}));
    VAED_RETURN_IF_ERROR(r.Integer(*group, "group", "ranks", &o->group.ranks, 1, 64));
    VAED_RETURN_IF_ERROR(r.Integer(*group, "group", "size", &o->group.size, 1, 64));
    VAED_RETURN_IF_ERROR(
        r.IntegerList(*group, "group", "qualified_sizes", &o->group.qualified_sizes, 1, 64));
    VAED_RETURN_IF_ERROR(r.String(*group, "group", "few_tiles", &o->group.few_tiles));
    VAED_RETURN_IF_ERROR(r.String(*group, "group", "backend", &o->group.backend));
    VAED_RETURN_IF_ERROR(r.Integer(*group, "group", "collective_timeout_ms",
                                   &o->group.collective_timeout_ms, 100, 3600000));
    VAED_RETURN_IF_ERROR(r.String(*group, "group", "host", &o->group.host));
    VAED_RETURN_IF_ERROR(r.String(*group, "group", "store_address", &o->group.store_address));
    VAED_RETURN_IF_ERROR(r.Integer(*group, "group", "world_nodes", &o->group.world_nodes, 1, 1024));
    VAED_RETURN_IF_ERROR(r.Integer(*group, "group", "node_rank", &o->group.node_rank, 0, 1023));
    if (group->contains("ranks") && !group->contains("qualified_sizes")) {
      // As --group-ranks: sizes 1, 2, 4, ... up to the ranks (of all nodes).
      o->group.qualified_sizes = {1};
      const uint32_t world = o->group.ranks * std::max<uint32_t>(1, o->group.world_nodes);
      for (uint32_t s = 2; s <= world; s *= 2) o->group.qualified_sizes.push_back(s);
    }
  }

  VAED_ASSIGN_OR_RETURN(const toml::table* log, r.Table(root, "log"));
  if (log) {
    VAED_RETURN_IF_ERROR(r.CheckKeys(*log, "log", {"level", "format"}));
    VAED_RETURN_IF_ERROR(r.String(*log, "log", "level", &o->log.level));
    VAED_RETURN_IF_ERROR(r.String(*log, "log", "format", &o->log.format));
  }

  VAED_ASSIGN_OR_RETURN(const toml::table* metrics, r.Table(root, "metrics"));
  if (metrics) {
    VAED_RETURN_IF_ERROR(r.CheckKeys(*metrics, "metrics", {"enabled", "address", "port"}));
    VAED_RETURN_IF_ERROR(r.Bool(*metrics, "metrics", "enabled", &o->metrics.enabled));
    VAED_RETURN_IF_ERROR(r.String(*metrics, "metrics", "address", &o->metrics.address));
    VAED_RETURN_IF_ERROR(r.Integer(*metrics, "metrics", "port", &o->metrics.port, 0, 65535));
  }

  VAED_ASSIGN_OR_RETURN(const toml::table* profiles, r.Table(root, "profiles"));
  if (profiles) {
    VAED_RETURN_IF_ERROR(r.CheckKeys(*profiles, "profiles", {"default", "allowed"}));
    VAED_RETURN_IF_ERROR(r.String(*profiles, "profiles", "default", &o->profiles.default_profile));
    VAED_RETURN_IF_ERROR(r.StringList(*profiles, "profiles", "allowed", &o->profiles.allowed));
  }
  VAED_ASSIGN_OR_RETURN(const toml::table* models, r.Table(root, "models"));
  if (models) {
    VAED_RETURN_IF_ERROR(r.CheckKeys(*models, "models", {"default", "entry"}));
    VAED_RETURN_IF_ERROR(r.String(*models, "models", "default", &o->models.default_model));
    if (const toml::node* entries = models->get("entry")) {
      const toml::array* arr = entries->as_array();
      if (!arr) return r.Error("models.entry", "must be an array of tables ([[models.entry]])");
      // A file that lists models replaces the embedded list as a whole.
      o->models.entries.clear();
      for (size_t i = 0; i < arr->size(); ++i) {
        const toml::table* t = arr->get(i)->as_table();
        if (!t) return r.Error("models.entry[" + std::to_string(i) + "]", "must be a table");
        models::ModelConfig m;
        VAED_RETURN_IF_ERROR(ParseModelEntry(r, *t, i, &m));
        o->models.entries.push_back(std::move(m));
      }
    }
  }
  return Status::Ok();
}

const std::set<std::string>& LogLevels() {
  static const std::set<std::string> levels = {"trace", "debug", "info", "warn",
                                               "error", "critical", "off"};
  return levels;
}

// Parses "NAME=KIND[:WEIGHTS[:CONFIG[:AUDIO_WEIGHTS[:AUDIO_CONFIG]]]]" from
// --model. For kind h3_audio, WEIGHTS and CONFIG are the audio decoder's.
Result<models::ModelConfig> ParseModelFlag(const std::string& spec) {
  models::ModelConfig m;
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--model '" + spec +
                           "' must look like NAME=KIND[:WEIGHTS[:CONFIG[:AUDIO_WEIGHTS[:"
                           "AUDIO_CONFIG]]]]");
  }
  m.name = spec.substr(0, eq);
  std::vector<std::string> fields;
  std::string rest = spec.substr(eq + 1);
  for (size_t colon; (colon = rest.find(':')) != std::string::npos;) {
    fields.push_back(rest.substr(0, colon));
    rest = rest.substr(colon + 1);
  }
  fields.push_back(rest);
  m.kind = fields[0];
  if (m.kind.empty()) return InvalidArgument("--model '" + spec + "' has an empty KIND");
  if (fields.size() > 5) {
    return InvalidArgument("--model '" + spec + "' has " + std::to_string(fields.size() - 1) +
                           " paths; at most 4 (WEIGHTS:CONFIG:AUDIO_WEIGHTS:AUDIO_CONFIG)");
  }
  fields.resize(5);
  if (m.kind == "h3_audio") {
    if (!fields[3].empty() || !fields[4].empty()) {
      return InvalidArgument("--model '" + spec +
                             "': kind h3_audio takes NAME=h3_audio[:AUDIO_WEIGHTS[:AUDIO_CONFIG]]");
    }
    m.audio_weights_path = fields[1];
    m.audio_config_path = fields[2];
  } else {
    m.weights_path = fields[1];
    m.config_path = fields[2];
    m.audio_weights_path = fields[3];
    m.audio_config_path = fields[4];
  }
  return m;
}

// Parses --metrics-address: "HOST:PORT", IPv6 hosts in brackets
// ("[::1]:9464").
Status ParseMetricsAddress(const std::string& spec, MetricsOptions* out) {
  const std::string usage = "--metrics-address '" + spec +
                            "' must look like HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464 "
                            "(PORT 0..65535; 0 = any free port)";
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    return InvalidArgument(usage);
  }
  std::string host = spec.substr(0, colon);
  const std::string port = spec.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return InvalidArgument(usage);
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return InvalidArgument(usage);  // an IPv6 host needs its brackets
  }
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(usage);
  }
  const unsigned long value = std::stoul(port);
  if (value > 65535) return InvalidArgument(usage);
  out->address = std::move(host);
  out->port = static_cast<uint32_t>(value);
  return Status::Ok();
}

void AddOrReplaceModel(std::vector<models::ModelConfig>* entries, models::ModelConfig m) {
  for (auto& e : *entries) {
    if (e.name == m.name) {
      e = std::move(m);
      return;
    }
  }
  entries->push_back(std::move(m));
}

}  // namespace

Result<DaemonOptions> ParseConfigToml(std::string_view text, std::string_view source_name,
                                      DaemonOptions base) {
  TomlReader reader{std::string(source_name)};
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream m;
    m << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
      << e.description();
    return InvalidArgument(m.str());
  }
  VAED_RETURN_IF_ERROR(ApplyToml(root, reader, &base));
  return base;
}

Result<DaemonOptions> LoadConfigFile(const std::string& path, DaemonOptions base) {
  std::ifstream in(path);
  if (!in) return ErrnoStatus(errno, "reading config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  VAED_ASSIGN_OR_RETURN(DaemonOptions o, ParseConfigToml(ss.str(), path, std::move(base)));
  o.source = path;
  return o;
}

Status ValidateOptions(const DaemonOptions& o) {
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
  if (o.group.few_tiles != "pad" && o.group.few_tiles != "shrink") {
    return InvalidArgument("group.few_tiles is '" + o.group.few_tiles +
                           "'; must be \"pad\" or \"shrink\"");
  }
#if defined(VAED_WITH_NCCL)
  constexpr bool kHaveNccl = true;
#else
  constexpr bool kHaveNccl = false;
#endif
  if (o.group.backend != "gloo" && o.group.backend != "nccl") {
    return InvalidArgument("group.backend is '" + o.group.backend +
                           "'; must be \"gloo\" or \"nccl\"");
  }
  if (o.group.backend == "nccl" && !kHaveNccl) {
    return InvalidArgument("group.backend is \"nccl\" but this vaed was built without CUDA "
                           "(cmake --preset cuda); use \"gloo\"");
  }
  if (o.group.world_nodes > 1 && o.group.store_address.empty()) {
    return InvalidArgument("group.world_nodes is " + std::to_string(o.group.world_nodes) +
                           "; groups spanning daemons need group.store_address (host:port "
                           "of the TCPStore node 0 serves)");
  }
  VAED_RETURN_IF_ERROR(MakeGroupLayout(o.group).status());
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
  if (!LogLevels().count(o.log.level)) {
    return InvalidArgument("log.level '" + o.log.level +
                           "' is not one of trace, debug, info, warn, error, critical, off");
  }
  if (o.log.format != "text" && o.log.format != "json") {
    return InvalidArgument("log.format is '" + o.log.format + "'; must be \"text\" or \"json\"");
  }
  if (o.metrics.address.empty()) {
    return InvalidArgument("metrics.address must not be empty (\"127.0.0.1\" serves local "
                           "scrapers only; set metrics.enabled = false for no endpoint)");
  }
  if (o.metrics.port > 65535) {
    return InvalidArgument("metrics.port is " + std::to_string(o.metrics.port) +
                           "; must be 0..65535");
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

CommandLine ParseCommandLine(int argc, char** argv) {
  CommandLine out;
  CLI::App app{
      "vaed: per-node VAE decode daemon. Serves decode requests from DiT workers over a\n"
      "ZeroMQ control socket; latents and outputs stay in the clients' shared memory.\n"
      "Runs with its embedded default config (demo model) when given no file."};
  app.set_version_flag("--version", std::string("vaed ") + VAED_VERSION);

  std::string config_path, socket, log_level, default_model, taef2_weights;
  int threads = 0;
  uint32_t queue_capacity = 0, group_ranks = 0, group_size = 0;
  std::vector<std::string> model_flags;
  bool print_config = false;
  app.add_option("-c,--config", config_path, "TOML config file, applied over the embedded defaults")
      ->check(CLI::ExistingFile);
  app.add_option("--socket", socket, "control socket path (server.socket)");
  app.add_option("--group-ranks", group_ranks,
                 "local ranks of the VAE group, each with its own executor and models "
                 "(group.ranks); qualifies sizes 1, 2, 4, ... up to it unless the config lists "
                 "group.qualified_sizes")
      ->check(CLI::Range(1, 64));
  app.add_option("--group-size", group_size,
                 "ranks a request decodes on unless it asks (group.size)")
      ->check(CLI::Range(1, 64));
  app.add_option("--intra-op-threads", threads, "LibTorch intra-op threads (executor.intra_op_threads)")
      ->check(CLI::Range(1, 256));
  app.add_option("--queue-capacity", queue_capacity, "waiting decode requests (executor.queue_capacity)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off (log.level)");
  std::string log_format;
  app.add_option("--log-format", log_format,
                 "log line format: text, or json (one object per line) for log shippers "
                 "(log.format)")
      ->check(CLI::IsMember({"text", "json"}));
  std::string metrics_address;
  bool no_metrics = false;
  CLI::Option* metrics_address_option =
      app.add_option("--metrics-address", metrics_address,
                     "HOST:PORT of the Prometheus endpoint, e.g. 127.0.0.1:9464 or [::1]:0 "
                     "(port 0 = any free port); enables metrics (metrics.address, "
                     "metrics.port)");
  app.add_flag("--no-metrics", no_metrics,
               "no Prometheus endpoint and no metrics collection (metrics.enabled = false)")
      ->excludes(metrics_address_option);
  app.add_option("--model", model_flags,
                 "add or replace a model: "
                 "NAME=KIND[:WEIGHTS[:CONFIG[:AUDIO_WEIGHTS[:AUDIO_CONFIG]]]], e.g. "
                 "taef2=taef2:/path/taef2_decoder.safetensors, "
                 "h3=h3_video:/path/model.safetensors:/path/config.json or "
                 "h3=h3:VIDEO_WEIGHTS:VIDEO_CONFIG:AUDIO_WEIGHTS:AUDIO_CONFIG (KIND: taef2, "
                 "demo, h3_video, h3_audio (NAME=h3_audio:AUDIO_WEIGHTS:AUDIO_CONFIG), h3; an "
                 "H3 decoder without weights uses seeded random weights; empty fields are "
                 "allowed, e.g. h3=h3:::/a.safetensors:/a.json)");
  app.add_option("--taef2-weights", taef2_weights,
                 "shorthand for --model taef2=taef2:PATH that also makes taef2 the default "
                 "model unless --default-model says otherwise")
      ->check(CLI::ExistingFile);
  app.add_option("--default-model", default_model, "model used when a request names none (models.default)");
  std::string stack_tiling;
  app.add_option("--vae-stack-tiling", stack_tiling,
                 "tile scheduling of every tiled model when a request does not choose: auto "
                 "(stack when >= 2 same-shape tiles and the measured memory estimate fits), "
                 "true/on (always stack), false/off (one call per tile); sets each h3_video/h3 "
                 "entry's stack_tiling")
      ->check(CLI::IsMember({"auto", "true", "false", "on", "off"}));
  int64_t memory_budget_mib = -1;
  app.add_option("--memory-budget-mib", memory_budget_mib,
                 "tensor memory budget of the daemon in MiB, 0 = none "
                 "(executor.memory_budget_mib)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_flag("--print-config", print_config, "print the effective config as TOML and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    out.exit_now = true;
    out.exit_code = app.exit(e);
    return out;
  }

  auto fail = [&](const Status& s) {
    std::cerr << "vaed: " << s.message() << "\n";
    out.exit_now = true;
    out.exit_code = 2;
    return out;
  };

  auto base = ParseConfigToml(kDefaultConfigToml, "embedded defaults", DaemonOptions{});
  if (!base.ok()) return fail(base.status());
  DaemonOptions o = std::move(base).value();
  if (!config_path.empty()) {
    auto loaded = LoadConfigFile(config_path, std::move(o));
    if (!loaded.ok()) return fail(loaded.status());
    o = std::move(loaded).value();
  }
  if (!socket.empty()) o.server.socket = socket;
  if (threads > 0) o.executor.intra_op_threads = threads;
  if (group_ranks > 0) {
    o.group.ranks = group_ranks;
    if (o.group.qualified_sizes == std::vector<uint32_t>{1}) {
      for (uint32_t s = 2; s <= group_ranks; s *= 2) o.group.qualified_sizes.push_back(s);
    }
  }
  if (group_size > 0) o.group.size = group_size;
  if (queue_capacity > 0) o.executor.queue_capacity = queue_capacity;
  if (!log_level.empty()) o.log.level = log_level;
  if (!log_format.empty()) o.log.format = log_format;
  if (!metrics_address.empty()) {
    if (Status s = ParseMetricsAddress(metrics_address, &o.metrics); !s.ok()) return fail(s);
    o.metrics.enabled = true;
  }
  if (no_metrics) o.metrics.enabled = false;
  for (const auto& spec : model_flags) {
    auto m = ParseModelFlag(spec);
    if (!m.ok()) return fail(m.status());
    AddOrReplaceModel(&o.models.entries, std::move(m).value());
  }
  if (!taef2_weights.empty()) {
    models::ModelConfig m;
    m.name = "taef2";
    m.kind = "taef2";
    m.weights_path = taef2_weights;
    AddOrReplaceModel(&o.models.entries, std::move(m));
    o.models.default_model = "taef2";
  }
  if (!default_model.empty()) o.models.default_model = default_model;
  if (!stack_tiling.empty()) {
    const std::string value = stack_tiling == "true"    ? "on"
                              : stack_tiling == "false" ? "off"
                                                        : stack_tiling;
    for (models::ModelConfig& m : o.models.entries) {
      if (m.kind == "h3_video" || m.kind == "h3") m.stack_tiling = value;
    }
  }
  if (memory_budget_mib >= 0) o.executor.memory_budget_mib = static_cast<uint64_t>(memory_budget_mib);
  if (Status s = ValidateOptions(o); !s.ok()) return fail(s);
  if (print_config) {
    std::cout << ToToml(o);
    out.exit_now = true;
    return out;
  }
  out.options = std::move(o);
  return out;
}

namespace {

toml::array IntArray(const std::vector<uint32_t>& values) {
  toml::array a;
  for (uint32_t v : values) a.push_back(int64_t{v});
  return a;
}

toml::array StringArray(const std::vector<std::string>& values) {
  toml::array a;
  for (const std::string& v : values) a.push_back(v);
  return a;
}

}  // namespace

std::string ToToml(const DaemonOptions& o) {
  toml::table root;
  root.insert("server", toml::table{
                            {"socket", o.server.socket},
                            {"heartbeat_interval_ms", int64_t{o.server.heartbeat_interval_ms}},
                            {"client_timeout_ms", int64_t{o.server.client_timeout_ms}},
                            {"max_message_bytes", static_cast<int64_t>(o.server.max_message_bytes)},
                            {"heartbeat_liveness", int64_t{o.server.heartbeat_liveness}},
                            {"send_hwm", int64_t{o.server.send_hwm}},
                            {"recv_hwm", int64_t{o.server.recv_hwm}},
                            {"socket_group", o.server.socket_group},
                            {"allowed_uids", IntArray(o.server.allowed_uids)},
                            {"allowed_groups", StringArray(o.server.allowed_groups)},
                            {"admin_uids", IntArray(o.server.admin_uids)},
                            {"region_prefix", o.server.region_prefix},
                            {"max_in_flight_per_client",
                             int64_t{o.server.max_in_flight_per_client}},
                            {"max_clients_per_process",
                             int64_t{o.server.max_clients_per_process}},
                            {"max_connections", int64_t{o.server.max_connections}},
                            {"max_connections_per_uid",
                             int64_t{o.server.max_connections_per_uid}},
                            {"max_regions", int64_t{o.server.max_regions}},
                            {"max_regions_per_client", int64_t{o.server.max_regions_per_client}},
                            {"max_region_bytes_per_client",
                             static_cast<int64_t>(o.server.max_region_bytes_per_client)},
                        });
  root.insert("quarantine",
              toml::table{
                  {"fault_threshold", int64_t{o.quarantine.fault_threshold}},
                  {"window_ms", int64_t{o.quarantine.window_ms}},
                  {"duration_ms", int64_t{o.quarantine.duration_ms}},
                  {"max_duration_ms", int64_t{o.quarantine.max_duration_ms}},
              });
  root.insert("executor", toml::table{
                              {"intra_op_threads", int64_t{o.executor.intra_op_threads}},
                              {"queue_capacity", int64_t{o.executor.queue_capacity}},
                              {"retained_heap_mib",
                               static_cast<int64_t>(o.executor.retained_heap_mib)},
                              {"memory_budget_mib",
                               static_cast<int64_t>(o.executor.memory_budget_mib)},
                              {"allow_fault_injection", o.executor.allow_fault_injection},
                          });
  root.insert("group", toml::table{
                           {"ranks", int64_t{o.group.ranks}},
                           {"size", int64_t{o.group.size}},
                           {"qualified_sizes", IntArray(o.group.qualified_sizes)},
                           {"few_tiles", o.group.few_tiles},
                           {"backend", o.group.backend},
                           {"collective_timeout_ms", int64_t{o.group.collective_timeout_ms}},
                           {"host", o.group.host},
                           {"store_address", o.group.store_address},
                           {"world_nodes", int64_t{o.group.world_nodes}},
                           {"node_rank", int64_t{o.group.node_rank}},
                       });
  root.insert("log", toml::table{{"level", o.log.level}, {"format", o.log.format}});
  root.insert("metrics", toml::table{{"enabled", o.metrics.enabled},
                                     {"address", o.metrics.address},
                                     {"port", int64_t{o.metrics.port}}});
  toml::array allowed;
  for (const std::string& p : o.profiles.allowed) allowed.push_back(p);
  root.insert("profiles",
              toml::table{{"default", o.profiles.default_profile}, {"allowed", allowed}});
  toml::array entries;
  for (const auto& m : o.models.entries) {
    toml::table t{{"name", m.name}, {"kind", m.kind}};
    if (!m.weights_path.empty()) t.insert("weights", m.weights_path);
    if (!m.config_path.empty()) t.insert("config", m.config_path);
    if (!m.audio_weights_path.empty()) t.insert("audio_weights", m.audio_weights_path);
    if (!m.audio_config_path.empty()) t.insert("audio_config", m.audio_config_path);
    if (m.kind == "h3_video" || m.kind == "h3") {
      t.insert("compute_dtype", m.compute_dtype);
      t.insert("stack_tiling", m.stack_tiling);
      t.insert("plan_cache_capacity", m.plan_cache_capacity.value_or(8));
      t.insert("plan_after_sightings", m.plan_after_sightings.value_or(2));
      toml::array warm;
      for (const std::string& w : m.warm_shapes) warm.push_back(w);
      t.insert("warm_shapes", warm);
    }
    if (m.kind == "taef2" || m.kind == "demo") {
      t.insert("frame_batch", m.frame_batch.value_or(4));
    }
    if (m.seed) t.insert("seed", static_cast<int64_t>(*m.seed));
    entries.push_back(std::move(t));
  }
  root.insert("models", toml::table{{"default", o.models.default_model}, {"entry", entries}});
  std::ostringstream ss;
  ss << root << "\n";
  return ss.str();
}

}  // namespace vaed::server
