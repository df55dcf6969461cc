#include "daemon/server/control_loop.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "daemon/server/decode_reply.h"
#include "vaed/wire.h"
#include "vaed/zmq_status.h"

namespace vaed::server {

namespace {

// True when a process accepts connections on the Unix socket `path`.
bool SocketIsServed(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool served = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return served;
}

}  // namespace

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
    const DaemonOptions& options, std::vector<models::ModelRegistry*> registries, int stop_fd,
    PidAlive pid_alive) {
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
  VAED_RETURN_IF_ERROR(loop->Bind(group));
  VAED_ASSIGN_OR_RETURN(loop->completions_, CompletionQueue::Create());
  VAED_ASSIGN_OR_RETURN(loop->executor_,
                        engine::Executor::Create(options.executor, options.group,
                                                 std::move(registries), loop->completions_.get()));
  loop->sink_ = std::make_unique<ExecutorSink>(loop->executor_.get());
  loop->handler_ = std::make_unique<RequestHandler>(options, registry, loop->sink_.get(),
                                                    &loop->access_, std::move(pid_alive));
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
      stream_(context_, zmq::socket_type::stream) {}

ControlLoop::~ControlLoop() {
  stop_watching_.store(true);
  if (descriptor_watcher_.joinable()) descriptor_watcher_.join();
  if (executor_) executor_->Stop();
  // Unlink our socket file so a stale path does not look served; never
  // another daemon's (Bind() may have failed because it is served).
  if (bound_) {
    std::error_code ec;
    std::filesystem::remove(options_.server.socket, ec);
  }
}

Status ControlLoop::Bind(std::optional<gid_t> group) {
  const std::string& path = options_.server.socket;
  VAED_RETURN_IF_ERROR(PrepareSocketDirectory(path, group));
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    // ZeroMQ would unlink whatever is at the path: never a file, directory
    // or link of someone else's, and never a socket a live daemon serves.
    if (!std::filesystem::is_socket(std::filesystem::symlink_status(path, ec))) {
      return FailedPrecondition("server.socket " + path +
                                " exists and is not a socket; refusing to replace it");
    }
    if (SocketIsServed(path)) {
      return FailedPrecondition("another process is already serving " + path +
                                " (is vaed running? see `vaectl status`)");
    }
    std::filesystem::remove(path, ec);
  }
  socket_group_ = group;
  try {
    // Raw bytes in and out (vaed/framing.h frames the messages), with
    // connect / disconnect notices (ZMQ_STREAM_NOTIFY, on by default). A
    // message over server.max_message_bytes is answered from its header
    // and its bytes skipped unbuffered; ZeroMQ holds at most recv_hwm
    // chunks per connection before it stops reading from the peer.
    stream_.set(zmq::sockopt::linger, 500);
    stream_.set(zmq::sockopt::rcvhwm, static_cast<int>(options_.server.recv_hwm));
    stream_.set(zmq::sockopt::sndhwm, static_cast<int>(options_.server.send_hwm));
  } catch (const zmq::error_t& e) {
    return ZmqErrorStatus(e, "setting the control socket's options");
  }
  VAED_RETURN_IF_ERROR(Listen());
  struct rlimit lim {};
  const size_t limit = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                           ? static_cast<size_t>(lim.rlim_cur)
                           : size_t{1} << 20;
  const size_t headroom = std::max<size_t>(512, limit / 4);
  pause_at_ = limit > headroom ? limit - headroom : limit / 2;
  resume_at_ = pause_at_ - std::min(pause_at_ / 2, headroom / 2);
  return Status::Ok();
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

namespace {

// Open descriptors of this process (entries of /proc/self/fd).
size_t OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  size_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n > 0 ? n - 1 : 0;  // less the directory's own descriptor
}

}  // namespace

void ControlLoop::WatchDescriptors() {
  while (!stop_watching_.load()) {
    if (OpenDescriptors() >= pause_at_) descriptors_high_.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void ControlLoop::GuardDescriptors(std::chrono::steady_clock::time_point now) {
  const bool high = descriptors_high_.exchange(false);
  if (!high && (accepting_ || now - last_descriptor_check_ < std::chrono::milliseconds(50))) {
    return;
  }
  last_descriptor_check_ = now;
  const size_t open = OpenDescriptors();
  if (accepting_ && open >= pause_at_) {
    try {
      stream_.unbind("ipc://" + options_.server.socket);
      accepting_ = false;
      // ZeroMQ ends every connection accepted through the listener with
      // it, without disconnect notices: their clients go now (in-flight
      // decodes cancelled, regions released); client libraries reconnect
      // once the daemon listens again, as after a daemon restart.
      size_t clients = 0;
      for (const auto& [id, c] : connections_) {
        Retire(id);
        if (c.refused || c.closed) continue;
        if (handler_->HasClientOn(id)) ++clients;
        handler_->OnDisconnected(id);
      }
      spdlog::warn("access: {} descriptors open (pausing at {}): stopped listening on {} and "
                   "closed all {} connections ({} with clients) until their descriptors are "
                   "gone (a connection storm?)",
                   open, pause_at_, options_.server.socket, connections_.size(), clients);
      connections_.clear();
      socket_owner_.clear();
    } catch (const zmq::error_t& e) {
      spdlog::error("{}", ZmqErrorStatus(e, "pausing the control socket").ToString());
    }
  } else if (!accepting_ && open <= resume_at_) {
    if (Status s = Listen(); !s.ok()) {
      spdlog::error("access: cannot listen again: {}; retrying", s.ToString());
      return;
    }
    accepting_ = true;
    spdlog::warn("access: {} descriptors open: listening on {} again", open,
                 options_.server.socket);
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
  descriptor_watcher_ = std::thread([this] { WatchDescriptors(); });

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
      ExpireConnections(now);
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
  stop_watching_.store(true);
  if (descriptor_watcher_.joinable()) descriptor_watcher_.join();
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

void ControlLoop::OnConnectionEvent(const std::string& routing_id, zmq::message_t& notice) {
  const auto now = std::chrono::steady_clock::now();
  if (retired_.erase(routing_id) > 0) return;  // the late notice of a forgotten one
  if (auto it = connections_.find(routing_id); it != connections_.end()) {
    // The peer closed its socket or exited: its clients go now, not at
    // their timeout.
    const bool refused = it->second.refused;
    if (auto o = socket_owner_.find(it->second.inode);
        o != socket_owner_.end() && o->second == routing_id) {
      socket_owner_.erase(o);
    }
    connections_.erase(it);
    if (!refused) handler_->OnDisconnected(routing_id);
    return;
  }
  Connection conn{.peer = std::nullopt,
                  .reader = wire::FrameReader(options_.server.max_message_bytes),
                  .fd = -1,
                  .inode = 0,
                  .refused = false,
                  .close_at = std::nullopt,
                  .closed = false,
                  .forced = false,
                  .admin = false,
                  .had_client = false,
                  .no_client_since = now,
                  .message_started = now};
  std::string address;
  try {
    // Set by ZeroMQ from SO_PEERCRED: "<addr>:<uid>:<gid>:<pid>" on IPC.
    if (const char* a = notice.gets("Peer-Address")) address = a;
  } catch (const zmq::error_t&) {
    // No such property: no credentials.
  }
  conn.peer = ParsePeerAddress(address);
  conn.fd = zmq_msg_get(notice.handle(), ZMQ_SRCFD);
  struct stat st{};
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (conn.fd < 0 || fstat(conn.fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
      getsockopt(conn.fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
      (conn.peer && cred.pid != conn.peer->pid)) {
    // Not a live connection: the disconnect notice of one already
    // forgotten (its descriptor is closed or belongs to another peer now).
    spdlog::debug("control socket: ignoring the notice of a connection already closed");
    return;
  }
  conn.inode = st.st_ino;
  // Descriptor numbers are reused at once, so a late notice (of a
  // connection already gone unnoticed, e.g. in a pause) can name the socket
  // of a newer connection. ZeroMQ numbers ZMQ_STREAM connections in
  // increasing order (5-byte ids): of two notices naming one socket, the
  // later-numbered is that socket's own, the other a stale one.
  auto later = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a > b;
  };
  if (auto o = socket_owner_.find(conn.inode); o != socket_owner_.end()) {
    if (!later(routing_id, o->second)) {
      Retire(routing_id);
      return;  // stale
    }
    Retire(o->second);
    connections_.erase(o->second);  // the stale entry admitted before
    socket_owner_.erase(o);
  }
  socket_owner_[conn.inode] = routing_id;
  Status admit = conn.peer ? access_.Admit(*conn.peer)
                           : PermissionDenied("peer address '" + address.substr(0, 64) +
                                              "' carries no credentials (SO_PEERCRED)");
  size_t pending_refusals = 0;
  for (const auto& [id, c] : connections_) {
    if (c.refused) ++pending_refusals;
  }
  if (admit.ok()) {
    conn.admin = access_.IsAdmin(*conn.peer);
    // Admitted connections count until they are gone, closing ones too:
    // the descriptor is held until then.
    size_t of_process = 0, of_uid = 0, open = 0;
    for (const auto& [id, c] : connections_) {
      if (c.refused) continue;
      ++open;
      if (c.peer && c.peer->pid == conn.peer->pid) ++of_process;
      if (c.peer && c.peer->uid == conn.peer->uid) ++of_uid;
    }
    const size_t limit = options_.server.max_connections + (conn.admin ? kAdminReserve : 0);
    if (open >= limit) {
      admit = ResourceExhausted("vaed has " + std::to_string(open) +
                                " connections open (server.max_connections = " +
                                std::to_string(options_.server.max_connections) + ")");
    } else if (!conn.admin && of_uid >= options_.server.max_connections_per_uid) {
      admit = ResourceExhausted(
          "uid " + std::to_string(conn.peer->uid) + " already has " + std::to_string(of_uid) +
          " connections (server.max_connections_per_uid = " +
          std::to_string(options_.server.max_connections_per_uid) + "); close one first");
    } else if (of_process >= options_.server.max_clients_per_process) {
      admit = ResourceExhausted(
          "process " + std::to_string(conn.peer->pid) + " already has " +
          std::to_string(of_process) + " connections (server.max_clients_per_process = " +
          std::to_string(options_.server.max_clients_per_process) + "); close one first");
    }
  }
  if (!admit.ok()) {
    handler_->CountRejectedConnection();
    // At most one line a second: a storm of refused peers must not flood
    // the journal.
    ++refusals_since_log_;
    if (now - last_refusal_log_ >= std::chrono::seconds(1)) {
      spdlog::warn("access: refused a connection: {}{}", admit.message(),
                   refusals_since_log_ > 1
                       ? " (" + std::to_string(refusals_since_log_) + " refused since the last line)"
                       : std::string());
      last_refusal_log_ = now;
      refusals_since_log_ = 0;
    }
    conn.refused = true;
    if (pending_refusals >= kMaxPendingRefusals) {
      // A storm: no reply, the descriptor goes at once.
      auto [it, inserted] = connections_.emplace(routing_id, std::move(conn));
      CloseConnection(routing_id, it->second, now);
      ForceClose(it->second);
      return;
    }
    // One error reply (request id 0), then the connection is closed once
    // the reply had time to leave (closing drops what is still queued).
    v1::Reply reply;
    *reply.mutable_error() = ToProtoError(admit);
    (void)SendFramed(routing_id, reply.SerializeAsString());
    conn.close_at = now + std::chrono::milliseconds(200);
  }
  connections_.emplace(routing_id, std::move(conn));
}

void ControlLoop::CloseConnection(const std::string& routing_id, Connection& conn,
                                  std::chrono::steady_clock::time_point now) {
  try {
    // A zero-length message closes a ZMQ_STREAM connection.
    if (stream_.send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      stream_.send(zmq::message_t(), zmq::send_flags::dontwait);
    }
  } catch (const zmq::error_t& e) {
    spdlog::debug("{}", ZmqErrorStatus(e, "closing a connection").ToString());
  }
  conn.closed = true;
  conn.close_at = now + kForceCloseAfter;
}

void ControlLoop::Retire(const std::string& routing_id) {
  if (!retired_.insert(routing_id).second) return;
  retired_order_.push_back(routing_id);
  while (retired_order_.size() > kMaxRetired) {
    retired_.erase(retired_order_.front());
    retired_order_.pop_front();
  }
}

void ControlLoop::ForceClose(Connection& conn) {
  conn.forced = true;
  struct stat st{};
  if (conn.fd >= 0 && fstat(conn.fd, &st) == 0 && st.st_ino == conn.inode) {
    (void)shutdown(conn.fd, SHUT_RDWR);
  }
}

void ControlLoop::ExpireConnections(std::chrono::steady_clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(options_.server.client_timeout_ms);
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection& conn = it->second;
    struct stat st{};
    if (fstat(conn.fd, &st) != 0 || st.st_ino != conn.inode) {
      // Its socket is gone and ZeroMQ said nothing (connections ended by a
      // pause, or notices still queued): forget it now.
      if (!conn.refused && !conn.closed) handler_->OnDisconnected(it->first);
      Retire(it->first);
      if (auto o = socket_owner_.find(conn.inode);
          o != socket_owner_.end() && o->second == it->first) {
        socket_owner_.erase(o);
      }
      it = connections_.erase(it);
      continue;
    }
    if (conn.closed) {
      if (now >= *conn.close_at && !conn.forced) {
        // The peer does not read, so ZeroMQ's close waits behind replies.
        ForceClose(conn);
        conn.close_at = now + std::chrono::seconds(5);
      } else if (now >= *conn.close_at) {
        Retire(it->first);  // no disconnect notice came (yet)
        if (auto o = socket_owner_.find(conn.inode);
            o != socket_owner_.end() && o->second == it->first) {
          socket_owner_.erase(o);
        }
        it = connections_.erase(it);
        continue;
      }
    } else if (conn.refused) {
      if (now >= *conn.close_at) CloseConnection(it->first, conn, now);
    } else if (!conn.reader.at_boundary() && now - conn.message_started > timeout) {
      spdlog::info("closing a connection of {}: a message stayed incomplete for {} ms "
                   "(server.client_timeout_ms)",
                   conn.peer ? "pid " + std::to_string(conn.peer->pid) : std::string("?"),
                   timeout.count());
      handler_->OnDisconnected(it->first);
      CloseConnection(it->first, conn, now);
    } else if (handler_->HasClientOn(it->first)) {
      conn.had_client = true;
      conn.no_client_since.reset();
    } else if (!conn.no_client_since) {
      conn.no_client_since = now;  // its client was dropped
    } else if (now - *conn.no_client_since > (conn.had_client ? 4 * timeout : timeout)) {
      // A connection is for a client: without one for client_timeout_ms it
      // is closed, whatever it sends meanwhile. A client the daemon
      // dropped: its connection stays 4x as long, so the library hears
      // kUnknownClient (and says Hello again) first.
      spdlog::debug("closing a connection without a client");
      CloseConnection(it->first, conn, now);
    }
    ++it;
  }
}

void ControlLoop::ReceiveRequests() {
  // Bounded batch so executor replies and stop requests are not starved by
  // one busy peer. Each message is a chunk of one connection's byte stream
  // (or, empty, a connect / disconnect notice).
  for (int i = 0; i < 64 && !descriptors_high_.load(std::memory_order_relaxed); ++i) {
    zmq::message_t routing, chunk;
    try {
      if (!stream_.recv(routing, zmq::recv_flags::dontwait)) return;
      (void)stream_.recv(chunk, zmq::recv_flags::none);
    } catch (const zmq::error_t& e) {
      spdlog::error("{}", ZmqErrorStatus(e, "receiving a request").ToString());
      return;
    }
    const std::string routing_id = routing.to_string();
    if (chunk.size() == 0) {
      OnConnectionEvent(routing_id, chunk);
      continue;
    }
    auto it = connections_.find(routing_id);
    if (it == connections_.end() || it->second.refused || it->second.closed) {
      continue;  // refused or closed: dropped
    }
    Connection& conn = it->second;
    const auto now = std::chrono::steady_clock::now();
    if (conn.reader.at_boundary()) conn.message_started = now;
    conn.reader.Append(std::string_view(static_cast<const char*>(chunk.data()), chunk.size()));
    while (std::optional<wire::Frame> frame = conn.reader.Next()) {
      Incoming in;
      in.routing_id = routing_id;
      in.peer = conn.peer;
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

bool ControlLoop::SendFramed(const std::string& routing_id, const std::string& payload) {
  Result<std::string> frame = wire::EncodeFrame(payload);
  if (!frame.ok()) {
    // Replies are bounded far below the frame limit: a bug, not a peer's.
    spdlog::error("not sending a reply: {}", frame.status().ToString());
    return true;
  }
  try {
    if (!stream_.send(zmq::buffer(routing_id),
                      zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;  // EAGAIN: the peer's queue is at server.send_hwm
    }
    stream_.send(zmq::buffer(*frame), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH: the peer disconnected before its reply.
    spdlog::debug("{}", ZmqErrorStatus(e, "sending a reply").ToString());
  }
  return true;
}

void ControlLoop::SendReply(const std::string& routing_id, const v1::Reply& reply) {
  if (!SendFramed(routing_id, reply.SerializeAsString())) ReplyDropped(routing_id);
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
    const v1::Reply reply = c.progress ? handler_->OnJobProgress(*c.job, *c.progress, now)
                                       : handler_->OnJobDone(*c.job, *c.result, now);
    std::string bytes;
    reply.SerializeToString(&bytes);
    // A Progress message that does not fit the peer's queue is skipped:
    // only replies count against a client that does not read.
    if (!SendFramed(c.job->routing_id, bytes) && !reply.has_progress()) {
      ReplyDropped(c.job->routing_id);
    }
  }
}

}  // namespace vaed::server
