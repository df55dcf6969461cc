// The control loop: the daemon's sockets and its one serving thread. It owns
// the ZeroMQ ZMQ_STREAM socket on ipc://<server.socket> with vaed's own
// message framing (vaed/framing.h), admits each connection by its
// SO_PEERCRED credentials (access_control.h) and a connection count, and
// owns the executor; the protocol itself (registry, validation, limits,
// quarantine) is the RequestHandler's.
//
// Every request gets exactly one reply: a validation error is answered at
// once (naming the field and the rule), an accepted decode is answered by
// the executor when it finishes or is cancelled. A malformed message never
// stops the loop; it is answered with ERROR_CODE_PROTOCOL_ERROR and counted.
//
// Stopping: Run() returns after `stop_fd` becomes readable (main passes an
// eventfd written by its SIGTERM/SIGINT handler). It then cancels queued
// decodes (each answered with ERROR_CODE_CANCELLED), waits for the running
// ones (one per busy VAE group), sends the last replies and joins the
// executor's threads.
//
// Thread-safety: Create() and Run() from one thread; everything else is
// internal to that thread.
#ifndef VAED_DAEMON_SERVER_CONTROL_LOOP_H_
#define VAED_DAEMON_SERVER_CONTROL_LOOP_H_

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "daemon/engine/executor.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/access_control.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/completion_queue.h"
#include "daemon/server/config.h"
#include "daemon/server/metrics.h"
#include "daemon/server/metrics_http.h"
#include "daemon/server/request_handler.h"
#include "daemon/server/systemd_notify.h"
#include "vaed/framing.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

class ControlLoop {
 public:
  // Prepares the socket directory (access_control.h: created 0750 with
  // server.socket_group if missing; an existing one must grant nothing to
  // other users), binds the control socket (mode 0660, same group), starts
  // and starts the executor. Each new connection is admitted by its
  // SO_PEERCRED ids (server.allowed_uids / allowed_groups) and the
  // connection limits (server.max_connections in all,
  // server.max_clients_per_process per process); a refused one gets one
  // error reply (PERMISSION_DENIED or RESOURCE_EXHAUSTED, request id 0) and
  // is closed. Errors: kFailedPrecondition when another live daemon already
  // serves the socket or the directory is open to everyone,
  // kInvalidArgument for an unknown group in the config, kIoError when the
  // path cannot be bound. `registry` must outlive the loop.
  // `registries`: one per local rank (group.ranks), rank 0's first; the
  // control loop validates requests against rank 0's.
  static Result<std::unique_ptr<ControlLoop>> Create(const DaemonOptions& options,
                                                     std::vector<models::ModelRegistry*> registries,
                                                     int stop_fd,
                                                     PidAlive pid_alive = ProcessExists);
  ~ControlLoop();
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Serves until stop_fd is readable (returns OK), or until a sticky device
  // error made the daemon unhealthy: it then stops pinging the systemd
  // watchdog, answers for kUnhealthyGrace (status says why, decodes get
  // UNAVAILABLE) and returns kInternal so that main exits non-zero and
  // systemd restarts it. Notifies systemd READY=1 on entry and STOPPING=1
  // on exit; pings the watchdog while healthy.
  Status Run();

  static constexpr std::chrono::milliseconds kUnhealthyGrace{1000};

 private:
  class ExecutorSink;

  ControlLoop(const DaemonOptions& options, models::ModelRegistry* registry, int stop_fd);
  Status Bind(std::optional<gid_t> group);

  // One connection on the control socket, by its ZeroMQ routing id.
  struct Connection {
    std::optional<PeerCredentials> peer;
    wire::FrameReader reader;
    // The connection's socket as ZeroMQ accepted it (ZMQ_SRCFD of the
    // connect notice) and its inode, so a close can be forced on exactly
    // that socket (ForceClose) even when its peer never reads.
    int fd = -1;
    ino_t inode = 0;
    bool refused = false;  // refused at connect: dropped unread, closed at close_at
    // Refused: closed at this time (after its error reply had time to
    // leave). Closed: when the close is forced, then when the entry is
    // forgotten (ZeroMQ's disconnect notice normally comes first).
    std::optional<std::chrono::steady_clock::time_point> close_at;
    bool closed = false;
    bool forced = false;
    bool admin = false;  // root, the daemon's uid or server.admin_uids
    bool had_client = false;  // a client said Hello on it at some point
    // Since when no client is on it (connect, or its client was dropped):
    // a connection is for a client, whatever else it sends.
    std::optional<std::chrono::steady_clock::time_point> no_client_since;
    // When the message now being received began (incomplete-message timeout).
    std::chrono::steady_clock::time_point message_started{};
  };
  // Extra connections admin peers may open past server.max_connections, so
  // an operator's vaectl gets in while the limit is taken.
  static constexpr uint32_t kAdminReserve = 16;
  // Refused connections waiting for their error reply to leave; past this
  // many, a refused connection is closed at once without a reply.
  static constexpr size_t kMaxPendingRefusals = 64;
  // A close ZeroMQ could not carry out this long (its peer does not read,
  // so the close waits behind unsent replies) is forced on the socket.
  static constexpr std::chrono::milliseconds kForceCloseAfter{1000};

  void ReceiveRequests();
  // A connection opened (routing id new) or closed (known).
  void OnConnectionEvent(const std::string& routing_id, zmq::message_t& notice);
  // Frames the payload and queues it to the peer; false when it could not
  // be queued (peer gone, or its queue at server.send_hwm).
  bool SendFramed(const std::string& routing_id, const std::string& payload);
  // Closes refused connections whose reply had time to leave, idle
  // connections without a client, and messages left incomplete, each after
  // its time; forgets closed ones once their notice is overdue.
  void ExpireConnections(std::chrono::steady_clock::time_point now);
  // Sends ZeroMQ's close for `routing_id` and marks the entry closed; the
  // entry keeps counting against the limits until the connection is gone.
  void CloseConnection(const std::string& routing_id, Connection& conn,
                       std::chrono::steady_clock::time_point now);
  // shutdown(2) on the connection's own socket (checked by inode, so a
  // reused descriptor is never touched): ZeroMQ then sees the end of the
  // stream, drops what it could not send and closes the descriptor.
  static void ForceClose(Connection& conn);
  // Answers what the executor finished (and forwards its progress events):
  // each becomes a reply to its connection, accounted by the handler.
  void DeliverCompletions();
  void SendReply(const std::string& routing_id, const v1::Reply& reply);
  void ReplyDropped(const std::string& routing_id);
  // Marks the daemon unhealthy once the executor reports a sticky error.
  void CheckHealth();
  // Connection storms: ZeroMQ's I/O thread accepts connections without
  // bound, faster than this loop can refuse and close them, and libzmq
  // aborts the process when accept() fails with EMFILE. So a watcher thread
  // counts the open descriptors every 2 ms (WatchDescriptors) and flags
  // this loop, which then stops listening (unbinds the control socket: new
  // connects fail, the client library retries) while pause_at_ or more are
  // open, and listens again at resume_at_ or fewer.
  // pause_at_ = open-files limit - max(512, limit / 4): room for what the
  // I/O thread accepts before it processes the unbind.
  void GuardDescriptors(std::chrono::steady_clock::time_point now);
  void WatchDescriptors();
  Status Listen();  // binds the control socket and secures its file

  const DaemonOptions options_;
  models::ModelRegistry* const registry_;
  const int stop_fd_;

  zmq::context_t context_;
  zmq::socket_t stream_;  // ZMQ_STREAM on ipc://<server.socket>
  // Prometheus metrics (metrics.enabled): the registry the handler feeds and
  // its HTTP endpoint; declared before the handler, which points at them.
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  // The executor's answers; declared before the executor, which uses it.
  std::unique_ptr<CompletionQueue> completions_;
  std::unique_ptr<engine::Executor> executor_;
  std::unique_ptr<ExecutorSink> sink_;
  AccessPolicy access_;
  std::unique_ptr<RequestHandler> handler_;
  std::unordered_map<std::string, Connection> connections_;
  // Routing ids of connections forgotten before ZeroMQ's disconnect notice
  // came (forced closes, a pause): their late notice must not look like a
  // new connection. Oldest first; at most kMaxRetired.
  void Retire(const std::string& routing_id);
  std::unordered_set<std::string> retired_;
  // The routing id each live entry's socket (by inode) belongs to.
  std::unordered_map<ino_t, std::string> socket_owner_;
  std::deque<std::string> retired_order_;
  static constexpr size_t kMaxRetired = 1 << 16;
  SystemdNotifier notifier_;

  bool bound_ = false;  // we own the socket path and unlink it at exit
  std::optional<gid_t> socket_group_;
  bool accepting_ = true;
  std::atomic<bool> descriptors_high_{false};  // set by the watcher thread
  std::atomic<bool> stop_watching_{false};
  std::thread descriptor_watcher_;
  size_t pause_at_ = 0, resume_at_ = 0;
  std::chrono::steady_clock::time_point last_descriptor_check_{};
  std::chrono::steady_clock::time_point last_tick_{};
  std::chrono::steady_clock::time_point last_drop_log_{};
  std::chrono::steady_clock::time_point last_refusal_log_{};
  uint64_t refusals_since_log_ = 0;
  std::optional<std::chrono::steady_clock::time_point> unhealthy_since_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CONTROL_LOOP_H_
