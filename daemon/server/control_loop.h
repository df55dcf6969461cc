// The control loop: the daemon's one ZeroMQ ROUTER socket on
// ipc://<server.socket>, the client and region registry, request
// validation, and the hand-off of accepted decodes to the executor.
//
// Every request gets exactly one reply: a validation error is answered at
// once (naming the field and the rule), an accepted decode is answered by
// the executor when it finishes or is cancelled. A malformed message never
// stops the loop; it is answered with ERROR_CODE_PROTOCOL_ERROR and counted.
//
// Stopping: Run() returns after `stop_fd` becomes readable (main passes an
// eventfd written by its SIGTERM/SIGINT handler). It then cancels queued
// decodes (each answered with ERROR_CODE_CANCELLED), waits for the running
// one, forwards the last replies and joins the executor thread.
//
// Thread-safety: Create() and Run() from one thread; everything else is
// internal to that thread.
#ifndef VAED_DAEMON_SERVER_CONTROL_LOOP_H_
#define VAED_DAEMON_SERVER_CONTROL_LOOP_H_

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/engine/executor.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/config.h"
#include "daemon/server/systemd_notify.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

class ControlLoop {
 public:
  // Binds the control socket (creating its directory with mode 0750 if
  // missing; the socket file gets mode 0660) and starts the executor.
  // Errors: kFailedPrecondition when another live daemon already serves the
  // socket, kIoError when the path cannot be bound.
  // `registry` must outlive the loop.
  static Result<std::unique_ptr<ControlLoop>> Create(const DaemonOptions& options,
                                                     models::ModelRegistry* registry,
                                                     int stop_fd,
                                                     PidAlive pid_alive = ProcessExists);
  ~ControlLoop();
  ControlLoop(const ControlLoop&) = delete;
  ControlLoop& operator=(const ControlLoop&) = delete;

  // Serves until stop_fd is readable. Notifies systemd READY=1 on entry and
  // STOPPING=1 on exit; pings the watchdog while serving.
  Status Run();

 private:
  ControlLoop(const DaemonOptions& options, models::ModelRegistry* registry, int stop_fd,
              PidAlive pid_alive);
  Status Bind();

  void HandleMessage(const std::string& routing_id, const std::string& payload);
  void HandleHello(const std::string& routing_id, const v1::Request& req, v1::Reply* reply);
  Status HandleRegister(ClientState* client, const v1::RegisterRegion& req, v1::Reply* reply);
  // Returns true when the reply is sent later by the executor.
  Result<bool> HandleDecode(ClientState* client, const std::string& routing_id,
                            const v1::Request& req, v1::Reply* reply);
  void FillStatus(v1::StatusReply* status) const;

  void ForwardExecutorReplies();
  void DropExpiredClients();
  void SendReply(const std::string& routing_id, const v1::Reply& reply);

  const DaemonOptions options_;
  models::ModelRegistry* const registry_;
  const int stop_fd_;
  const std::chrono::steady_clock::time_point started_;

  zmq::context_t context_;
  zmq::socket_t router_;
  zmq::socket_t replies_;
  std::unique_ptr<engine::Executor> executor_;
  ClientRegistry clients_;
  SystemdNotifier notifier_;

  bool bound_ = false;  // we own the socket path and unlink it at exit
  uint64_t requests_served_ = 0;
  uint64_t requests_failed_ = 0;
  uint64_t protocol_errors_ = 0;
  std::chrono::steady_clock::time_point last_reap_{};
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CONTROL_LOOP_H_
