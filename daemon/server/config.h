// Daemon configuration: parsed once into plain Options structs, validated
// as a whole before anything starts.
//
// Sources, later ones win: the structs' defaults below, the embedded
// default config (kDefaultConfigToml: the built-in demo model, so that vaed
// serves with no external file), the TOML file given by --config, then
// command-line flags (command_line.h; `vaed --help` lists them). Environment
// variables are not read.
//
// Each TOML key is one row of its section's table (config_keys.h): the
// member below it sets, its range or allowed values and a one-line doc.
// systemd/vaed.toml documents every key with its default.
//
// Thread-safety: plain values.
#ifndef VAED_DAEMON_SERVER_CONFIG_H_
#define VAED_DAEMON_SERVER_CONFIG_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/engine/engine_options.h"
#include "daemon/models/model_config.h"
#include "daemon/server/log_options.h"
#include "daemon/server/profile_options.h"
#include "vaed/status.h"

namespace vaed::server {

struct ServerOptions {
  // Unix socket path of the control channel (ipc://<socket>). Its directory
  // is created if missing (mode 0750); systemd's RuntimeDirectory= normally
  // provides it.
  std::string socket = "/run/vaed/vaed.sock";
  // Clients are told to send a heartbeat at least this often.
  uint32_t heartbeat_interval_ms = 5000;
  // A client silent for longer than this with nothing in flight is dropped
  // and its regions are unmapped. A client whose pid no longer exists is
  // dropped at once. Larger: idle clients survive longer pauses; smaller:
  // dead clients' mappings are released sooner.
  uint32_t client_timeout_ms = 30000;
  // Largest control message accepted (bytes). A larger one is answered with
  // a protocol error as soon as its length header arrives, counted as a
  // client fault, and its bytes are skipped unbuffered (vaed/framing.h).
  // Messages are small: tensors travel by region.
  uint64_t max_message_bytes = 1 << 20;
  // Heartbeats a client may miss before its library treats the daemon as
  // gone and reconnects (sent to clients in HelloReply).
  uint32_t heartbeat_liveness = 3;
  // ZeroMQ high-water marks of the control socket per connection
  // (ZMQ_SNDHWM / ZMQ_RCVHWM): replies queued to a peer (past it, replies
  // to a peer that does not read are dropped), and chunks of at most 8 KiB
  // received ahead of the daemon (past it, ZeroMQ stops reading from the
  // peer until the daemon catches up).
  uint32_t send_hwm = 1000;
  uint32_t recv_hwm = 1000;

  // Access control (access_control.h). Group of the socket directory (when
  // vaed creates it) and of the socket file: a name or gid; "" = the
  // daemon's primary group.
  std::string socket_group;
  // Peers admitted at connection time by SO_PEERCRED uid, or by primary or
  // supplementary group (names or gids). Both empty: every peer that can
  // reach the socket. uid 0 and the daemon's own uid are always admitted.
  std::vector<uint32_t> allowed_uids;
  std::vector<std::string> allowed_groups;
  // May run admin requests (vaectl quarantine release), besides uid 0 and
  // the daemon's own uid.
  std::vector<uint32_t> admin_uids;
  // Every registered shm segment name must start with this (the client
  // library names its segments "vaed-<pid>-..."). "" = any valid name.
  std::string region_prefix = "vaed-";

  // Per-client limits. Decodes queued or running per client (past it:
  // BUSY, counted as a fault); registered regions and their mapped bytes
  // per client (past them: resource_exhausted, counted as a fault).
  uint32_t max_in_flight_per_client = 4;
  // Clients (Hellos) one process may hold at once; past it Hello fails with
  // resource_exhausted, counted as a fault. A second Hello on one
  // connection replaces that connection's client.
  uint32_t max_clients_per_process = 64;
  // Connections open at once on the control socket, and per process
  // max_clients_per_process of them; a connection past either gets one
  // RESOURCE_EXHAUSTED reply and is closed. Bounds the daemon's buffers:
  // each connection holds at most max_message_bytes of a partial message
  // plus recv_hwm ZeroMQ chunks (8 KiB each).
  uint32_t max_connections = 256;
  // Connections one uid may hold (admin peers excepted), so that one user's
  // processes cannot take every place from the others'. Connections
  // without a client (no Hello) for client_timeout_ms are closed, whatever
  // they send.
  uint32_t max_connections_per_uid = 128;
  // Regions registered at once by all clients together (each holds a file
  // descriptor; vaed raises its open-files limit to cover
  // max_connections + max_regions + 528 at start-up, or refuses to start).
  uint32_t max_regions = 4096;
  uint32_t max_regions_per_client = 64;
  uint64_t max_region_bytes_per_client = uint64_t{64} << 30;
};

// Quarantine of faulting client processes (quarantine.h).
struct QuarantineOptions {
  // Faults within window_ms that quarantine a process; 0 = never.
  uint32_t fault_threshold = 10;
  uint32_t window_ms = 10000;
  // First quarantine; each repeat doubles it, up to max_duration_ms.
  uint32_t duration_ms = 30000;
  uint32_t max_duration_ms = 3600000;
};

// The Prometheus endpoint (metrics_http.h). Collection itself always runs
// while enabled; the endpoint serves it over HTTP.
struct MetricsOptions {
  // Off: no endpoint and no collection (vaectl status then has no component
  // latencies).
  bool enabled = true;
  // Address the endpoint binds: loopback by default, so that only local
  // scrapers (or a proxy) reach it; "0.0.0.0" or a node address exposes it
  // to the network (the endpoint has no authentication).
  std::string address = "127.0.0.1";
  // TCP port; 0 = any free port (the start-up log says which). 9464 is the
  // port OpenTelemetry's Prometheus exporters use by convention.
  uint32_t port = 9464;
};

struct ModelsOptions {
  // The model used when a request names none.
  std::string default_model = "demo";
  std::vector<models::ModelConfig> entries;
};

struct DaemonOptions {
  ServerOptions server;
  engine::ExecutorOptions executor;
  engine::GroupOptions group;
  LogOptions log;
  MetricsOptions metrics;
  ModelsOptions models;
  ProfileOptions profiles;
  QuarantineOptions quarantine;
  // Where the options came from, for the start-up log line.
  std::string source = "embedded defaults";
};

// The embedded default configuration (TOML), read over DaemonOptions{}: the
// built-in demo model (deterministic seeded weights, flagged as demo
// everywhere) as the one model and the default.
extern const char* const kDefaultConfigToml;

// Parses TOML text on top of `base`: keys present replace base's values
// (lists and [[models.entry]] as a whole). Unknown tables or keys, wrong
// value types, out-of-range integers and names outside a key's closed set
// are errors (kInvalidArgument) that name the source and the key, e.g.
// "vaed.toml: executor.intra_op_threads is 0; must be 1..256",
// "vaed.toml: group.backend is 'mpi'; must be \"gloo\" or \"nccl\"".
// Whole-config rules are ValidateOptions' (config.cc). `keys_set`, when
// given, receives the dotted keys the text sets ("group.ranks",
// "models.default"; [[models.entry]] as "models.entry"), so that later
// sources can tell a value the text chose from one it left as it was.
Result<DaemonOptions> ParseConfigToml(std::string_view toml, std::string_view source_name,
                                      DaemonOptions base,
                                      std::set<std::string>* keys_set = nullptr);

// Reads and parses a TOML file on top of `base`; the result's source is
// `path`. Errors: the file's errno (reading), or ParseConfigToml's.
// `keys_set`: as ParseConfigToml's.
Result<DaemonOptions> LoadConfigFile(const std::string& path, DaemonOptions base,
                                     std::set<std::string>* keys_set = nullptr);

// Checks options however they were set (TOML, flags, code) before anything
// starts: every key's rule (CheckKeyRules: ranges, allowed strings), then
// what single keys cannot say (default model present, unique model names,
// a store for groups spanning daemons, groups resolvable, each model entry
// against its kind, ...). kInvalidArgument naming the key(s).
Status ValidateOptions(const DaemonOptions& options);

// Renders options as TOML (for --print-config) that ParseConfigToml reads
// back to the same settings: every key, sections and keys in alphabetical
// order; each [[models.entry]] with the keys of its kind, unset ones as the
// model's defaults.
std::string ToToml(const DaemonOptions& options);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CONFIG_H_
