#include "daemon/server/control_loop.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "daemon/server/decode_reply.h"
#include "daemon/server/startup_checks.h"
#include "daemon/server/stream_send.h"
#include "daemon/server/warm_up_plan.h"
#include "vaed/raw_socket.h"
#include "vaed/zmq_status.h"

namespace vaed::server {

// The executor as the request handler's job sink.
class ControlLoop::ExecutorSink : public JobSink {
 public:
  explicit ExecutorSink(engine::Executor* executor) : executor_(executor) {}
  Status Submit(std::unique_ptr<engine::DecodeJob> job) override {
    return executor_->Submit(std::shared_ptr<engine::DecodeJob>(std::move(job)));
  }
  size_t CancelClient(uint64_t client_id, const Status& why) override {
    return executor_->CancelClient(client_id, why);
  }
  size_t queue_depth() const override { return executor_->queue_depth(); }
  void FillGroups(v1::StatusReply* status) const override {
    FillExecutorStatus(executor_->Snapshot(), status);
  }
  size_t running() const override { return executor_->running(); }

 private:
  engine::Executor* const executor_;
};

Result<std::unique_ptr<ControlLoop>> ControlLoop::Create(
    const DaemonOptions& options, const engine::RuntimeFacts& facts,
    std::vector<models::ModelRegistry*> registries, int stop_fd, PidAlive pid_alive) {
  if (registries.empty()) return InvalidArgument("no model registry");
  models::ModelRegistry* registry = registries.front();
  std::optional<gid_t> group;
  if (!options.server.socket_group.empty()) {
    VAED_ASSIGN_OR_RETURN(group, ResolveGroup(options.server.socket_group, "server.socket_group"));
  }
  std::unique_ptr<ControlLoop> loop(new ControlLoop(options, registry, stop_fd));
  VAED_ASSIGN_OR_RETURN(loop->access_,
                        AccessPolicy::Create(options.server.allowed_uids,
                                             options.server.allowed_groups,
                                             options.server.admin_uids));
  // A socket another daemon serves fails the start now, not after the
  // warm-up.
  VAED_RETURN_IF_ERROR(loop->CheckSocketPath(group));
  VAED_ASSIGN_OR_RETURN(loop->completions_, CompletionQueue::Create());
  // The executor warms the configured shapes up on every rank before it
  // returns; the socket is bound after it, READY (Run()) comes after both.
  VAED_ASSIGN_OR_RETURN(std::vector<engine::WarmUp> warm_ups,
                        PlanWarmUps(*registry, options.profiles, facts.request_memory));
  VAED_ASSIGN_OR_RETURN(loop->executor_,
                        engine::Executor::Create(options.executor, options.group,
                                                 std::move(registries), loop->completions_.get(),
                                                 std::move(warm_ups), nullptr, facts.rank_devices));
  VAED_RETURN_IF_ERROR(loop->Bind(group));
  loop->sink_ = std::make_unique<ExecutorSink>(loop->executor_.get());
  loop->handler_ = std::make_unique<RequestHandler>(options, registry, loop->sink_.get(),
                                                    &loop->access_, std::move(pid_alive), facts);
  loop->connections_ = std::make_unique<Connections>(loop->options_.server, &loop->access_,
                                                     &loop->stream_, loop->handler_.get());
  if (options.metrics.enabled) {
    // Collection runs whether or not the endpoint can be served: a port
    // another process holds must not stop decoding (status still has the
    // component latencies); the warning says what to change.
    loop->metrics_ = std::make_unique<Metrics>();
    Result<std::unique_ptr<MetricsServer>> server = MetricsServer::Start(
        loop->metrics_.get(), options.metrics.address, static_cast<uint16_t>(options.metrics.port));
    std::string url;
    if (server.ok()) {
      loop->metrics_server_ = std::move(server).value();
      url = loop->metrics_server_->url();
      spdlog::info("metrics: Prometheus endpoint {}", url);
    } else {
      spdlog::warn("metrics: no Prometheus endpoint: {}; metrics are still collected (vaectl "
                   "status); set metrics.address / metrics.port (--metrics-address HOST:PORT, "
                   "port 0 = any free port) or metrics.enabled = false",
                   server.status().ToString());
    }
    loop->handler_->set_metrics(loop->metrics_.get(), url);
  } else {
    spdlog::info("metrics: disabled (metrics.enabled = false)");
  }
  return loop;
}

ControlLoop::ControlLoop(const DaemonOptions& options, models::ModelRegistry* registry,
                         int stop_fd)
    : options_(options),
      registry_(registry),
      stop_fd_(stop_fd),
      context_(1),
      stream_(wire::OpenRawSocket(context_)) {}

ControlLoop::~ControlLoop() {
  descriptors_.Stop();
  if (executor_) executor_->Stop();
  // Unlink our socket file so a stale path does not look served; never
  // another daemon's (Bind() may have failed because it is served).
  if (bound_) {
    std::error_code ec;
    std::filesystem::remove(options_.server.socket, ec);
  }
}

Status ControlLoop::CheckSocketPath(std::optional<gid_t> group) {
  return server::CheckSocketPath(options_.server.socket, group);
}

Status ControlLoop::Bind(std::optional<gid_t> group) {
  const std::string& path = options_.server.socket;
  // Again: the warm-up may have taken a while.
  VAED_RETURN_IF_ERROR(CheckSocketPath(group));
  std::error_code ec;
  std::filesystem::remove(path, ec);  // a stale socket (or nothing)
  socket_group_ = group;
  try {
    // Raw bytes in and out (vaed/framing.h frames the messages), with
    // connect / disconnect notices (vaed/raw_socket.h). A
    // message over server.max_message_bytes is answered from its header
    // and its bytes skipped unbuffered; ZeroMQ holds at most recv_hwm
    // chunks per connection before it stops reading from the peer.
    stream_.set(zmq::sockopt::linger, 500);
    stream_.set(zmq::sockopt::rcvhwm, static_cast<int>(options_.server.recv_hwm));
    stream_.set(zmq::sockopt::sndhwm, static_cast<int>(options_.server.send_hwm));
  } catch (const zmq::error_t& e) {
    return ZmqErrorStatus(e, "setting the control socket's options");
  }
  return Listen();
}

Status ControlLoop::Listen() {
  const std::string& path = options_.server.socket;
  try {
    stream_.bind("ipc://" + path);
  } catch (const zmq::error_t& e) {
    return ZmqErrorStatus(e, "binding control socket ipc://" + path);
  }
  bound_ = true;
  // Members of the socket's group may connect (the directory's mode decides
  // who reaches the socket at all).
  return SecureSocketFile(path, socket_group_);
}

void ControlLoop::GuardDescriptors(std::chrono::steady_clock::time_point now) {
  size_t open = 0;
  switch (descriptors_.Check(accepting_, now, &open)) {
    case DescriptorGuard::Step::kNone:
      return;
    case DescriptorGuard::Step::kPause:
      try {
        stream_.unbind("ipc://" + options_.server.socket);
        accepting_ = false;
        // ZeroMQ ends every connection accepted through the listener with
        // it, without disconnect notices: their clients go now (in-flight
        // decodes cancelled, regions released); client libraries reconnect
        // once the daemon listens again, as after a daemon restart.
        const Connections::Dropped dropped = connections_->DropAll();
        spdlog::warn("access: {} descriptors open (pausing at {}): stopped listening on {} and "
                     "closed all {} connections ({} with clients) until their descriptors are "
                     "gone (a connection storm?)",
                     open, descriptors_.pause_at(), options_.server.socket, dropped.connections,
                     dropped.with_clients);
      } catch (const zmq::error_t& e) {
        spdlog::error("{}", ZmqErrorStatus(e, "pausing the control socket").ToString());
      }
      return;
    case DescriptorGuard::Step::kResume:
      if (Status s = Listen(); !s.ok()) {
        spdlog::error("access: cannot listen again: {}; retrying", s.ToString());
        return;
      }
      accepting_ = true;
      spdlog::warn("access: {} descriptors open: listening on {} again", open,
                   options_.server.socket);
      return;
  }
}

Status ControlLoop::Run() {
  std::string models;
  for (const models::VaeModel* m : registry_->models()) {
    models += (models.empty() ? "" : ", ") + m->info().name +
              (m->info().demo_weights ? " (DEMO weights)" : "");
  }
  spdlog::info("vaed {} serving ipc://{} (pid {}), models: {}; access: {}", VAED_VERSION,
               options_.server.socket, getpid(), models,
               access_.restricted() ? "by server.allowed_uids/allowed_groups"
                                    : "any peer that can reach the socket");
  notifier_.Ready("serving " + options_.server.socket);
  descriptors_.Start();

  bool stop = false;
  Status exit_status;
  while (!stop) {
    zmq::pollitem_t items[] = {
        {stream_.handle(), 0, ZMQ_POLLIN, 0},
        {nullptr, completions_->fd(), ZMQ_POLLIN, 0},
        {nullptr, stop_fd_, ZMQ_POLLIN, 0},
    };
    try {
      // At most 250 ms so client expiry and health checks keep turning.
      zmq::poll(items, 3, std::min(notifier_.poll_budget(), std::chrono::milliseconds(250)));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return ZmqErrorStatus(e, "polling the control socket");
    }
    if (items[2].revents & ZMQ_POLLIN) stop = true;
    if (items[1].revents & ZMQ_POLLIN) DeliverCompletions();
    if (items[0].revents & ZMQ_POLLIN) ReceiveRequests();
    const auto now = std::chrono::steady_clock::now();
    if (now - last_tick_ >= std::chrono::milliseconds(250)) {
      last_tick_ = now;
      handler_->Tick(now);
      connections_->Expire(now);
    }
    GuardDescriptors(now);
    CheckHealth();
    if (unhealthy_since_) {
      // No watchdog pings while unhealthy: if exiting fails, systemd's
      // watchdog still restarts the daemon.
      if (now - *unhealthy_since_ >= kUnhealthyGrace) stop = true;
    } else {
      notifier_.MaybePingWatchdog();
    }
  }

  if (unhealthy_since_) {
    // Also when a stop request came first: never exit 0 unhealthy.
    exit_status = Internal("unhealthy: " + handler_->health() +
                           "; exiting so that systemd restarts vaed");
  }
  descriptors_.Stop();
  spdlog::info("vaed: {}; cancelling queued decodes",
               unhealthy_since_ ? "exiting unhealthy" : "stop requested");
  notifier_.Stopping(exit_status.ok() ? "stopping" : exit_status.message());
  executor_->Stop();
  DeliverCompletions();
  spdlog::info("vaed: stopped (served {} decodes, {} failed)", handler_->requests_served(),
               handler_->requests_failed());
  return exit_status;
}

void ControlLoop::CheckHealth() {
  if (unhealthy_since_) return;
  const std::string fatal = executor_->fatal_error();
  if (fatal.empty()) return;
  unhealthy_since_ = std::chrono::steady_clock::now();
  handler_->set_health("sticky device error: " + fatal);
  spdlog::critical("vaed: unhealthy ({}); stopping the watchdog and exiting in {} ms",
                   handler_->health(), kUnhealthyGrace.count());
  notifier_.SetStatus("unhealthy: " + handler_->health());
}

void ControlLoop::ReceiveRequests() {
  // Bounded batch so executor replies and stop requests are not starved by
  // one busy peer. Each message is a chunk of one connection's byte stream
  // (or, empty, a connect / disconnect notice).
  for (int i = 0; i < 64 && !descriptors_.high(); ++i) {
    zmq::message_t routing, chunk;
    try {
      if (!stream_.recv(routing, zmq::recv_flags::dontwait)) return;
      (void)stream_.recv(chunk, zmq::recv_flags::none);
    } catch (const zmq::error_t& e) {
      spdlog::error("{}", ZmqErrorStatus(e, "receiving a request").ToString());
      return;
    }
    const std::string routing_id = routing.to_string();
    const auto now = std::chrono::steady_clock::now();
    if (chunk.size() == 0) {
      connections_->OnNotice(routing_id, chunk, now);
      continue;
    }
    Connection* conn = connections_->Reading(routing_id);
    if (conn == nullptr) continue;  // unknown, refused or closing: dropped
    if (conn->reader.at_boundary()) conn->message_started = now;
    conn->reader.Append(std::string_view(static_cast<const char*>(chunk.data()), chunk.size()));
    while (std::optional<wire::Frame> frame = conn->reader.Next()) {
      Incoming in;
      in.routing_id = routing_id;
      in.peer = conn->peer;
      in.payload = frame->payload;
      in.oversized_bytes = frame->oversized_bytes;
      if (std::optional<v1::Reply> reply =
              handler_->Handle(in, std::chrono::steady_clock::now())) {
        SendReply(routing_id, *reply);
      }
      // Handle() may have dropped the connection's clients; the connection
      // itself stays until the peer closes it.
    }
  }
}

void ControlLoop::SendReply(const std::string& routing_id, const v1::Reply& reply) {
  if (!SendFramed(stream_, routing_id, reply.SerializeAsString())) ReplyDropped(routing_id);
}

void ControlLoop::ReplyDropped(const std::string& routing_id) {
  const auto now = std::chrono::steady_clock::now();
  handler_->OnReplyDropped(routing_id, now);
  // One log line per second at most: a peer that never reads must not
  // flood the journal.
  if (now - last_drop_log_ >= std::chrono::seconds(1)) {
    spdlog::warn("replies dropped: a peer does not read its replies (its queue is at "
                 "server.send_hwm); {} dropped since start",
                 handler_->dropped_replies());
    last_drop_log_ = now;
  }
}

void ControlLoop::DeliverCompletions() {
  for (Completion& c : completions_->Drain()) {
    const auto now = std::chrono::steady_clock::now();
    const std::string& routing_id = c.job->routing_id;
    if (c.progress) {
      // A Progress message that does not fit the peer's queue is skipped:
      // only replies count against a client that does not read.
      (void)SendFramed(stream_, routing_id,
                       handler_->OnJobProgress(*c.job, *c.progress, now).SerializeAsString());
      continue;
    }
    if (c.final_range) {
      // Skipped likewise: ranges are cumulative (every frame before `end`
      // is final), so the next one, or the reply, covers a skipped one.
      (void)SendFramed(stream_, routing_id,
                       handler_->OnJobFinalRange(*c.job, *c.final_range, now).SerializeAsString());
      continue;
    }
    const RequestHandler::JobReplies replies = handler_->OnJobDone(*c.job, *c.result, now);
    // The decode's reply first: an UnregisterRegion answered after it
    // tells the client that its region is no longer used.
    SendReply(routing_id, replies.decode);
    for (const v1::Reply& unregistered : replies.unregistered) SendReply(routing_id, unregistered);
  }
}

}  // namespace vaed::server
