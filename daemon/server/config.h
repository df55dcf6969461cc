// Daemon configuration: parsed once into plain Options structs, validated
// as a whole before anything starts.
//
// Sources, later ones win: the embedded default config (kDefaultConfigToml,
// which serves the built-in demo model with no external file), then the
// TOML file given by --config, then command-line flags. Environment
// variables are not read.
//
// Thread-safety: plain values.
#ifndef VAED_DAEMON_SERVER_CONFIG_H_
#define VAED_DAEMON_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/parallel/group_layout.h"
#include "daemon/models/model_config.h"
#include "daemon/server/decode_options.h"
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

struct ExecutorOptions {
  // LibTorch intra-op threads of the executor (at::set_num_threads). More
  // threads: faster single decodes until memory bandwidth saturates; fewer:
  // leaves cores to the DiT workers on the same node.
  int intra_op_threads = 2;
  // Decode requests waiting beyond the one running; past it requests are
  // answered at once with BUSY and a retry-after (back-pressure).
  uint32_t queue_capacity = 64;
  // Heap the daemon keeps between requests for reuse (MiB). Freed decode
  // activations are kept as a pool because re-faulting pages is expensive;
  // after a request leaving more heap than this, the free part is returned
  // to the OS. Larger: fewer page faults for big decodes; smaller: lower
  // idle RSS after one.
  uint64_t retained_heap_mib = 4096;
  // Budget for LibTorch host tensors of the whole daemon (weights, cached
  // plans, decode buffers), MiB; 0 = none. An allocation past it fails as
  // out of memory, which the decode's failure ladder handles (fewer tiles
  // per call) before answering resource_exhausted; stack_tiling auto
  // checks its measured estimate against it. Smaller: a hard cap on what
  // vaed takes from the node; too small: requests fail.
  uint64_t memory_budget_mib = 0;
  // Testing only: honour DecodeOptions.inject_faults. Off in production
  // (requests carrying faults are then refused).
  bool allow_fault_injection = false;
};

struct LogOptions {
  // spdlog level: trace, debug, info, warn, error, critical, off.
  std::string level = "info";
  // Line format (logging.h): "text" (human-readable, as before) or "json"
  // (one JSON object per line with ts, level, msg, for log shippers; the
  // per-request decode records carry their fields as JSON keys).
  std::string format = "text";
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

// The daemon's own VAE process group (issue 7; daemon/parallel/): its local
// ranks and the group sizes requests run on.
struct GroupOptions {
  // Local ranks (CPU builds: worker ranks, each with its own executor thread
  // and its own copy of the models, sharing executor.intra_op_threads
  // cores each; GPU builds: one per device).
  uint32_t ranks = 1;
  // Group size of a request that asks for none (DecodeOptions.group_size
  // 0); one of qualified_sizes.
  uint32_t size = 1;
  // Sizes requests may ask for (1 is always allowed). Every size forms
  // contiguous blocks of ranks (group_layout.h).
  std::vector<uint32_t> qualified_sizes = {1};
  // Fewer tiles per window than the group has ranks: "pad" (idle ranks send
  // empty payloads) or "shrink" (the largest qualified size the tiles fill).
  std::string few_tiles = "pad";
  // Communicator backend: "gloo" (every build; LibTorch c10d) or "nccl"
  // (builds with VAED_WITH_CUDA; local rank r uses CUDA device r).
  std::string backend = "gloo";
  // Limit of a collective and of a (re)built communicator's rendezvous.
  uint32_t collective_timeout_ms = 30000;
  // Address the Gloo transport binds and announces to its peers: loopback
  // for one daemon; the node's address when groups span daemons.
  std::string host = "127.0.0.1";
  // Groups spanning daemons (nodes): "host:port" of the TCPStore that node
  // 0 serves and every node joins ("" = this daemon alone, an in-process
  // store). world_nodes daemons with the same group.ranks each; node_rank
  // is this daemon's index. Global rank = node_rank * ranks + local rank.
  std::string store_address;
  uint32_t world_nodes = 1;
  uint32_t node_rank = 0;
};

struct DaemonOptions {
  ServerOptions server;
  ExecutorOptions executor;
  GroupOptions group;
  LogOptions log;
  MetricsOptions metrics;
  ModelsOptions models;
  ProfileOptions profiles;
  QuarantineOptions quarantine;
  // Where the options came from, for the start-up log line.
  std::string source = "embedded defaults";
};

// The embedded default configuration (TOML). It serves the built-in demo
// model (deterministic seeded weights, flagged as demo everywhere).
extern const char* const kDefaultConfigToml;

// Parses TOML text on top of `base`. Unknown tables or keys, wrong value
// types and out-of-range values are errors that name the key, e.g.
// "vaed.toml: executor.intra_op_threads is 0; must be 1..256".
Result<DaemonOptions> ParseConfigToml(std::string_view toml, std::string_view source_name,
                                      DaemonOptions base);

// Reads and parses a TOML file on top of `base`.
Result<DaemonOptions> LoadConfigFile(const std::string& path, DaemonOptions base);

// The VAE groups of `group` (all nodes; group_layout.h). Errors name the
// group.* key (ranks, size, qualified_sizes). Inline: the request handler
// uses it without the TOML reader.
inline Result<parallel::GroupLayout> MakeGroupLayout(const GroupOptions& group) {
  parallel::GroupLayoutOptions layout;
  layout.ranks_per_node = static_cast<int>(group.ranks);
  layout.world_nodes = static_cast<int>(group.world_nodes);
  layout.node_rank = static_cast<int>(group.node_rank);
  layout.qualified_sizes.assign(group.qualified_sizes.begin(), group.qualified_sizes.end());
  layout.default_size = static_cast<int>(group.size);
  return parallel::GroupLayout::Plan(layout);
}

// Whole-config checks that single keys cannot make (default model present,
// unique model names, ...).
Status ValidateOptions(const DaemonOptions& options);

// The outcome of command-line parsing: options to run with, or an exit
// (for --help, --version, --print-config or a usage error).
struct CommandLine {
  DaemonOptions options;
  bool exit_now = false;
  int exit_code = 0;
};

// Parses argv: --config FILE, --socket PATH, --intra-op-threads N,
// --queue-capacity N, --log-level L, --log-format text|json,
// --metrics-address HOST:PORT (also enables metrics), --no-metrics,
// --model NAME=KIND[:WEIGHTS[:CONFIG[:AUDIO_WEIGHTS[:AUDIO_CONFIG]]]] (repeatable),
// --vae-stack-tiling auto|true|false (every tiled model's stack_tiling),
// --memory-budget-mib N,
// --taef2-weights PATH (adds model "taef2" and makes it the default),
// --default-model NAME,
// --print-config, --help, --version. Errors print to stderr with usage.
CommandLine ParseCommandLine(int argc, char** argv);

// Renders options back as TOML (for --print-config and the start-up log).
std::string ToToml(const DaemonOptions& options);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CONFIG_H_
