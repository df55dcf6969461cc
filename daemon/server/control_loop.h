// The control loop: the daemon's sockets and its one serving thread. It owns
// the raw ZeroMQ socket (vaed/raw_socket.h) on ipc://<server.socket>
// with vaed's own message framing (vaed/framing.h), the executor, and the request handler;
// each turn it answers what the executor finished, reads requests, expires
// connections and clients, guards the descriptor count and checks health.
//
// Where each step of a decode request lives (request_handler.h has the
// whole walk):
//   socket     ReceiveRequests() here reads chunks of each connection's
//              byte stream; connections.h admitted the connection (peer
//              credentials, limits) and keeps its FrameReader, which cuts
//              the stream into messages;
//   handler    RequestHandler::Handle() answers at once (validation
//              errors name the field and the rule; plan-only requests) or
//              hands a job to the executor (engine/executor.h), through
//              the ExecutorSink adapter here;
//   reply      the executor's results and progress events arrive through
//              the CompletionQueue (completion_queue.h), whose eventfd this
//              loop polls; DeliverCompletions() has the handler turn each
//              into a reply and sends it (stream_send.h frames every
//              message out).
// Around it: descriptor_guard.h stops listening during connection storms;
// metrics_http.h serves the Prometheus endpoint; systemd_notify.h tells
// systemd READY/STOPPING and pings its watchdog.
//
// Every request gets exactly one reply: a validation error is answered at
// once, an accepted decode is answered when the executor finishes or
// cancels it, and an UnregisterRegion of a region that decodes still use
// right after the last of them is answered (client_registry.h: region
// lifetime; not at all when its client went away first). A malformed
// message never stops the loop; it is answered with
// ERROR_CODE_PROTOCOL_ERROR and counted.
//
// Stopping: Run() returns after `stop_fd` becomes readable (main passes an
// eventfd written by its SIGTERM/SIGINT handler). It then cancels queued
// decodes (each answered with ERROR_CODE_CANCELLED), waits for the running
// ones (several may run at once, one per busy VAE group), sends the last
// replies and joins the executor's threads.
//
// Thread-safety: Create() and Run() from one thread; everything else is
// internal to that thread (the executor's rank threads reach it only
// through the CompletionQueue; the descriptor watcher only through its
// flag).
#ifndef VAED_DAEMON_SERVER_CONTROL_LOOP_H_
#define VAED_DAEMON_SERVER_CONTROL_LOOP_H_

#include <sys/types.h>
#include <zmq.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/engine/executor.h"
#include "daemon/engine/runtime_facts.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/access_control.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/completion_queue.h"
#include "daemon/server/config.h"
#include "daemon/server/connections.h"
#include "daemon/server/descriptor_guard.h"
#include "daemon/server/metrics.h"
#include "daemon/server/metrics_http.h"
#include "daemon/server/request_handler.h"
#include "daemon/server/systemd_notify.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

class ControlLoop {
 public:
  // Prepares the socket directory (access_control.h: created 0750 with
  // server.socket_group if missing; an existing one must grant nothing to
  // other users), checks that no live daemon serves the socket, starts the
  // executor (which warms the configured shapes up on every rank,
  // engine/warm_up.h), then binds the control socket (mode 0660, same
  // group): the socket appears once the daemon can answer, so a client
  // never waits on a daemon that is still warming up. Connections are
  // admitted as connections.h says
  // (peer credentials, connection limits; a refused one gets one error
  // reply and is closed). Errors: kFailedPrecondition when another live
  // daemon already serves the socket or the directory is open to everyone,
  // kInvalidArgument for an unknown group in the config or no registry,
  // kIoError when the path cannot be bound, and the executor's own errors.
  // `registries`: one per local rank (group.ranks), rank 0's first; the
  // handler validates requests against rank 0's. They must outlive the
  // loop.
  // `facts`: the ranks' devices and the request memory limit, resolved at
  // start-up (runtime_facts.h).
  static Result<std::unique_ptr<ControlLoop>> Create(const DaemonOptions& options,
                                                     const engine::RuntimeFacts& facts,
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
  // Prepares the socket's directory and refuses a path that holds
  // something other than a socket, or a socket a live daemon serves.
  Status CheckSocketPath(std::optional<gid_t> group);
  Status Bind(std::optional<gid_t> group);
  Status Listen();  // binds the control socket and secures its file

  // Reads a bounded batch of what the control socket received: connect and
  // disconnect notices (connections.h), and chunks of each open
  // connection's byte stream, whose whole messages go to the handler.
  void ReceiveRequests();
  // Answers what the executor finished (and forwards its progress events):
  // each becomes a reply to its connection, accounted by the handler,
  // followed by the replies of the unregisters that waited for it.
  void DeliverCompletions();
  void SendReply(const std::string& routing_id, const v1::Reply& reply);
  // A reply could not be queued: the handler counts it against the client;
  // logged at most once a second.
  void ReplyDropped(const std::string& routing_id);
  // Marks the daemon unhealthy once the executor reports a sticky error.
  void CheckHealth();
  // Acts on the descriptor guard's verdict: unbinds the control socket
  // (dropping every connection: ZeroMQ ends them with the listener) or
  // binds it again.
  void GuardDescriptors(std::chrono::steady_clock::time_point now);

  const DaemonOptions options_;
  models::ModelRegistry* const registry_;
  const int stop_fd_;

  zmq::context_t context_;
  zmq::socket_t stream_;  // vaed/raw_socket.h, on ipc://<server.socket>
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
  std::unique_ptr<Connections> connections_;  // uses stream_, access_ and handler_
  DescriptorGuard descriptors_;
  SystemdNotifier notifier_;

  bool bound_ = false;  // we own the socket path and unlink it at exit
  std::optional<gid_t> socket_group_;
  bool accepting_ = true;
  std::chrono::steady_clock::time_point last_tick_{};
  std::chrono::steady_clock::time_point last_drop_log_{};
  std::optional<std::chrono::steady_clock::time_point> unhealthy_since_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CONTROL_LOOP_H_
