#include "vaed/client.h"

#include <fcntl.h>
#include <sys/acl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.hpp>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "vaed/framing.h"
#include "vaed/wire.h"
#include "vaed/zmq_status.h"

namespace vaed::client {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Hello back-off while reconnecting (the zguide's Paranoid Pirate values).
constexpr milliseconds kReconnectBackoffStart{100};
constexpr milliseconds kReconnectBackoffCap{2000};
// HelloReply.heartbeat_liveness when the daemon does not say.
constexpr uint32_t kDefaultLiveness = 3;
// User-visible region ids that would collide with one already handed out
// (daemon ids restart at 1 after a daemon restart) come from here; daemon
// ids never get this large.
constexpr uint64_t kFirstSyntheticRegionId = uint64_t{1} << 62;
// Largest reply taken from the daemon (status replies with long client
// lists are the largest; decode replies are a few KiB).
constexpr uint64_t kMaxReplyBytes = uint64_t{64} << 20;

// Turns an error reply into its Status; checks the body otherwise.
Status CheckReply(const v1::Reply& reply, v1::Reply::BodyCase expected, std::string_view what) {
  if (reply.has_error()) return FromProtoError(reply.error());
  if (reply.body_case() != expected) {
    return ProtocolError(std::string(what) + ": the daemon answered with body " +
                         std::to_string(reply.body_case()) + " instead of " +
                         std::to_string(expected));
  }
  return Status::Ok();
}

bool IsUnknownClient(const Result<v1::Reply>& reply) {
  return reply.ok() && reply->has_error() &&
         reply->error().code() == v1::ERROR_CODE_UNKNOWN_CLIENT;
}

// kUnavailable unless `path` is a socket, naming what is there instead.
Status CheckSocketFile(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == EACCES) {
      return PermissionDenied("cannot reach the control socket " + path +
                              ": permission denied on its directory (run as a member of the "
                              "daemon's socket group, e.g. group vaed)");
    }
    return Unavailable("vaed is not running: no control socket at " + path +
                       " (start it with `vaed` or `systemctl start vaed`)");
  }
  if (!S_ISSOCK(st.st_mode)) return Unavailable(path + " exists but is not a socket");
  return Status::Ok();
}

// Lets the daemon, and only the daemon, open segment `name` (created mode
// 0600). The daemon runs as the owner of the control socket file. Same uid
// as this process, or root: nothing to do. Another uid: a POSIX ACL grants
// read-write to exactly that uid (user:<uid>:rw-, mask rw-), so members of
// the daemon's group cannot open each other's segments through /dev/shm.
// On a file system without ACLs (ENOTSUP) the segment gets the socket's
// group and mode 0660 instead (this process is in that group to reach the
// socket). Best effort: when both fail, the daemon's registration error
// says what is wrong.
void GrantDaemonAccess(const std::string& name, const std::string& socket) {
  struct stat sock{};
  if (::stat(socket.c_str(), &sock) != 0) return;
  if (sock.st_uid == 0 || sock.st_uid == ::geteuid()) return;
  const int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) return;
  const std::string text =
      "u::rw-,u:" + std::to_string(sock.st_uid) + ":rw-,g::---,m::rw-,o::---";
  acl_t acl = ::acl_from_text(text.c_str());
  const bool granted = acl != nullptr && ::acl_set_fd(fd, acl) == 0;
  if (acl != nullptr) ::acl_free(acl);
  if (!granted) {
    struct stat seg{};
    if (::fstat(fd, &seg) == 0 && seg.st_gid != sock.st_gid) {
      (void)::fchown(fd, static_cast<uid_t>(-1), sock.st_gid);
    }
    (void)::fchmod(fd, 0660);
  }
  ::close(fd);
}

}  // namespace

struct Client::Impl {
  // The process that connected (see "fork()" in client.h).
  const pid_t owner_pid = ::getpid();
  // kFailedPrecondition in a forked child, else OK.
  Status CheckProcess() const {
    if (::getpid() == owner_pid) return Status::Ok();
    return FailedPrecondition("this vaed Client was connected by process " +
                              std::to_string(owner_pid) + "; process " +
                              std::to_string(::getpid()) +
                              " (a fork) must connect a Client of its own");
  }
  // A region this client registered, as needed to register it again.
  struct Region {
    std::string name;
    uint64_t size_bytes = 0;
    uint64_t daemon_id = 0;  // the id at the current daemon; 0 while `lost`
    Status lost;             // why the latest re-registration failed; OK otherwise
  };

  // Fills a request's body (client_id and request_id are set afterwards).
  // Called under `mu` once per attempt, so region ids are translated for
  // the daemon the attempt goes to.
  using Builder = std::function<Status(v1::Request*)>;

  explicit Impl(const ClientOptions& o) : options(o) {}

  const ClientOptions options;
  zmq::context_t context{1};

  std::mutex mu;  // serializes all use of `socket` and the state below
  // ZMQ_STREAM socket with vaed's framing (vaed/framing.h); guarded by mu,
  // replaced on reconnect, with the routing id of its one connection and
  // the reassembly of the daemon's byte stream.
  std::unique_ptr<zmq::socket_t> socket;
  std::string connection_id;
  wire::FrameReader reader{kMaxReplyBytes};
  uint64_t next_request_id = 1;           // guarded by mu
  // The running Decode's progress callback, or null; guarded by mu.
  const std::function<void(const v1::Progress&)>* on_progress = nullptr;
  // The daemon was found gone (heartbeats unanswered, or the connection
  // dropped) or answered kUnknownClient: the next call reconnects before it
  // sends. Guarded by mu.
  bool broken = false;
  std::map<uint64_t, Region> regions;  // guarded by mu; by user-visible id
  uint64_t next_synthetic_region_id = kFirstSyntheticRegionId;  // guarded by mu
  // Every Hello reply, latest last, so hello() references stay valid.
  std::vector<std::unique_ptr<v1::HelloReply>> hellos;  // guarded by mu
  std::atomic<const v1::HelloReply*> hello{nullptr};
  std::atomic<uint64_t> client_id{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint32_t> heartbeat_interval_ms{0};

  std::mutex hb_mu;
  std::condition_variable hb_cv;
  bool hb_stop = false;  // guarded by hb_mu
  std::thread heartbeat;

  uint32_t Liveness() const {
    const v1::HelloReply* h = hello.load();
    return h != nullptr && h->heartbeat_liveness() > 0 ? h->heartbeat_liveness()
                                                        : kDefaultLiveness;
  }

  // How long a waiting call stays silent before it sends a Heartbeat.
  milliseconds WaitPingInterval() const {
    milliseconds interval(options.wait_heartbeat_interval_ms);
    const uint32_t daemon_ms = heartbeat_interval_ms.load();
    if (daemon_ms > 0) interval = std::min(interval, milliseconds(daemon_ms));
    return interval;
  }

  // Precondition: mu held. Queues one framed message to the daemon without
  // blocking; false when it cannot be queued (no connection, the daemon
  // closed it, or its queue is full). Throws zmq::error_t on other errors.
  bool SendMessage(const std::string& bytes) {
    if (connection_id.empty()) return false;
    try {
      if (!socket->send(zmq::buffer(connection_id),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        return false;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EHOSTUNREACH) return false;  // the connection is gone
      throw;
    }
    // Requests are small (tensors travel by region): over the frame limit
    // only by a bug; the caller then sees the daemon as unreachable.
    Result<std::string> frame = wire::EncodeFrame(bytes);
    if (!frame.ok()) return false;
    socket->send(zmq::buffer(*frame), zmq::send_flags::dontwait);
    return true;
  }

  // Precondition: mu held. The next whole message from the daemon, waiting
  // up to `wait_ms` (-1 = forever) for bytes; nullopt when none completed
  // in time. kUnavailable (and `broken`) when the daemon closed the
  // connection; kProtocolError for a reply over kMaxReplyBytes.
  Result<std::optional<std::string>> NextMessage(long wait_ms) {
    for (;;) {
      if (std::optional<wire::Frame> frame = reader.Next()) {
        if (frame->oversized_bytes > 0) {
          return ProtocolError("the daemon sent a message of " +
                               std::to_string(frame->oversized_bytes) + " bytes (over " +
                               std::to_string(kMaxReplyBytes) + ")");
        }
        return std::optional<std::string>(std::move(frame->payload));
      }
      zmq::pollitem_t item{socket->handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, milliseconds(wait_ms));
      if (!(item.revents & ZMQ_POLLIN)) return std::optional<std::string>();
      zmq::message_t id, chunk;
      if (!socket->recv(id, zmq::recv_flags::dontwait)) continue;
      (void)socket->recv(chunk, zmq::recv_flags::none);
      if (chunk.size() == 0) {
        // ZMQ_STREAM's notice: the connection closed (the daemon exited or
        // refused this process). Reconnecting is the caller's business.
        broken = true;
        connection_id.clear();
        return Unavailable("vaed at " + options.socket + " closed the connection");
      }
      reader.Append(std::string_view(static_cast<const char*>(chunk.data()), chunk.size()));
      wait_ms = 0;  // a partial message: take what else is there now
    }
  }

  // Precondition: mu held. Sends a Heartbeat without waiting for its reply;
  // returns its request id (0 when it could not be queued).
  uint64_t SendPing() {
    v1::Request req;
    req.set_request_id(next_request_id++);
    req.set_client_id(client_id.load());
    req.mutable_heartbeat();
    if (!SendMessage(req.SerializeAsString())) return 0;
    return req.request_id();
  }

  // Precondition: mu held. Sends `bytes` and waits up to `timeout_ms`
  // (0 = forever) for the reply with request id `expect_id` (0 accepts any
  // reply but those to heartbeats sent here). Replies to earlier, timed-out
  // requests are discarded. With `ping`, a Heartbeat goes out after every
  // WaitPingInterval() of silence; when Liveness() of them in a row get no
  // answer within their interval, `broken` is set and kUnavailable
  // returned. Any message from the daemon restores the count. A timeout
  // returns kUnavailable with `broken` untouched.
  Result<v1::Reply> Exchange(const std::string& bytes, uint64_t expect_id, int timeout_ms,
                             bool ping) {
    try {
      // Without a connection or with a full queue a send would block; never
      // block a caller on it.
      if (!SendMessage(bytes)) {
        broken = true;
        return Unavailable("vaed at " + options.socket +
                           " is not connected (it went away) or not taking messages");
      }
      const auto start = Clock::now();
      const auto deadline = start + milliseconds(timeout_ms);
      const milliseconds ping_every = WaitPingInterval();
      uint32_t liveness = Liveness();
      auto next_ping = start + ping_every;
      std::vector<uint64_t> ping_ids;
      for (;;) {
        const auto now = Clock::now();
        if (timeout_ms > 0 && now >= deadline) break;
        auto until = Clock::time_point::max();
        if (ping) until = next_ping;
        if (timeout_ms > 0) until = std::min(until, deadline);
        long wait_ms = -1;
        if (until != Clock::time_point::max()) {
          wait_ms = std::max<long>(
              0, std::chrono::ceil<milliseconds>(until - now).count());
        }
        VAED_ASSIGN_OR_RETURN(std::optional<std::string> msg, NextMessage(wait_ms));
        if (msg) {
          v1::Reply reply;
          if (!reply.ParseFromString(*msg)) {
            return ProtocolError("the daemon sent " + std::to_string(msg->size()) +
                                 " bytes that are not a vaed.v1.Reply");
          }
          // Any message shows the daemon is alive.
          liveness = Liveness();
          next_ping = Clock::now() + ping_every;
          const uint64_t id = reply.request_id();
          if (std::find(ping_ids.begin(), ping_ids.end(), id) != ping_ids.end()) continue;
          if (expect_id != 0 && id != expect_id && id != 0) {
            continue;  // a late reply to a request that timed out
          }
          if (reply.has_progress()) {
            // Never the reply itself: progress of this request, or of an
            // earlier one that timed out.
            if (on_progress && id == expect_id) (*on_progress)(reply.progress());
            continue;
          }
          return reply;
        }
        if (ping && Clock::now() >= next_ping) {
          // `liveness` heartbeats may still go unanswered; the last one sent
          // has had its interval to be answered.
          if (liveness == 0) {
            broken = true;
            return Unavailable("vaed at " + options.socket + " stopped answering: " +
                               std::to_string(Liveness()) + " heartbeats " +
                               std::to_string(ping_every.count()) +
                               " ms apart went unanswered");
          }
          --liveness;
          // A raw request carries an id of its own choosing; never reuse it.
          if (next_request_id == expect_id) ++next_request_id;
          if (const uint64_t id = SendPing(); id != 0) ping_ids.push_back(id);
          next_ping = Clock::now() + ping_every;
        }
      }
    } catch (const zmq::error_t& e) {
      return ZmqErrorStatus(e, "talking to vaed at " + options.socket);
    }
    return Unavailable("no reply from vaed at " + options.socket + " within " +
                       std::to_string(timeout_ms) + " ms (is the daemon running and healthy? "
                       "see `vaectl status`)");
  }

  // Precondition: mu held. Closes the current socket (dropping whatever it
  // still queues), connects a fresh one, waits up to `connect_ms` for the
  // connection to be made, then says Hello and waits up to `reply_ms` for
  // the reply (0 = forever, both); adopts the reply's client id and
  // settings. Nothing is sent before the connection exists (ZMQ_STREAM
  // reports it with a notice carrying its routing id), so an attempt that
  // finds no daemon leaves no stray Hello behind (it would register a
  // client nobody uses). ZeroMQ does not reconnect the socket by itself: a
  // closed connection stays closed, and a send on it fails at once.
  Status HelloOnFreshSocket(int connect_ms, int reply_ms) {
    try {
      socket.reset();  // linger 0: stale requests and heartbeats are dropped
      connection_id.clear();
      reader = wire::FrameReader(kMaxReplyBytes);
      socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::stream);
      socket->set(zmq::sockopt::linger, 0);
      socket->set(zmq::sockopt::reconnect_ivl, -1);
      socket->connect("ipc://" + options.socket);
      // The connect notice: the routing id and an empty message.
      const auto deadline = Clock::now() + milliseconds(connect_ms);
      while (connection_id.empty()) {
        long wait_ms = -1;
        if (connect_ms > 0) {
          wait_ms = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
          if (wait_ms <= 0) {
            return Unavailable("no connection to vaed at " + options.socket + " within " +
                               std::to_string(connect_ms) +
                               " ms (not running, or not listening yet)");
          }
        }
        zmq::pollitem_t item{socket->handle(), 0, ZMQ_POLLIN, 0};
        zmq::poll(&item, 1, milliseconds(wait_ms));
        if (!(item.revents & ZMQ_POLLIN)) continue;
        zmq::message_t id, notice;
        if (!socket->recv(id, zmq::recv_flags::dontwait)) continue;
        (void)socket->recv(notice, zmq::recv_flags::none);
        if (notice.size() == 0) connection_id = id.to_string();
      }
    } catch (const zmq::error_t& e) {
      return ZmqErrorStatus(e, "connecting to ipc://" + options.socket);
    }
    v1::Request req;
    req.set_request_id(next_request_id++);
    v1::Hello* h = req.mutable_hello();
    h->set_protocol_version(kProtocolVersion);
    h->set_client_name(options.client_name);
    h->set_pid(static_cast<int32_t>(getpid()));
    VAED_ASSIGN_OR_RETURN(v1::Reply reply,
                          Exchange(req.SerializeAsString(), req.request_id(), reply_ms,
                                   /*ping=*/false));
    VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kHello, "hello"));
    hellos.push_back(std::make_unique<v1::HelloReply>(reply.hello()));
    hello.store(hellos.back().get());
    client_id.store(reply.hello().client_id());
    heartbeat_interval_ms.store(reply.hello().heartbeat_interval_ms());
    broken = false;
    return Status::Ok();
  }

  // Precondition: mu held, Hello done. Registers every remembered region
  // with the current daemon. A region the daemon refuses is marked lost
  // (requests naming it fail with the reason); kUnavailable when the daemon
  // went away again.
  Status ReregisterRegions() {
    for (auto& [user_id, region] : regions) {
      v1::Request req;
      req.set_request_id(next_request_id++);
      req.set_client_id(client_id.load());
      GrantDaemonAccess(region.name, options.socket);
      v1::HostShmRegion* host = req.mutable_register_region()->mutable_host();
      host->set_name(region.name);
      host->set_size_bytes(region.size_bytes);
      Result<v1::Reply> reply = Exchange(req.SerializeAsString(), req.request_id(),
                                         options.connect_timeout_ms, /*ping=*/true);
      if (!reply.ok()) return reply.status();
      if (IsUnknownClient(reply)) return Unavailable("the daemon forgot this client again");
      if (Status s = CheckReply(*reply, v1::Reply::kRegisterRegion, "register_region");
          !s.ok()) {
        region.daemon_id = 0;
        region.lost = s.WithContext("region_id " + std::to_string(user_id) + " ('" +
                                    region.name + "') could not be registered again after "
                                    "reconnecting to vaed");
        continue;
      }
      region.daemon_id = reply->register_region().region_id();
      region.lost = Status::Ok();
    }
    return Status::Ok();
  }

  // Precondition: mu held. Hello on fresh sockets with back-off until one
  // is answered and the regions are registered again, for up to
  // options.reconnect_timeout_ms. A refusal other than kUnavailable (version
  // mismatch, quarantine, permissions) ends it at once.
  Status Reconnect() {
    const auto start = Clock::now();
    const milliseconds budget(options.reconnect_timeout_ms);
    milliseconds backoff = kReconnectBackoffStart;
    Status last;
    int attempts = 0;
    for (;;) {
      const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
      if (elapsed >= budget) break;
      // Each attempt waits its back-off for a connection (or sleeps it when
      // there is no socket file), then gives up on that socket.
      const milliseconds wait = std::min(backoff, budget - elapsed);
      const auto attempt_end = Clock::now() + wait;
      ++attempts;
      Status s = CheckSocketFile(options.socket);
      if (s.ok()) {
        // A daemon that took the connection gets connect_timeout_ms (within
        // the budget) to answer.
        const auto left = budget - std::chrono::duration_cast<milliseconds>(Clock::now() - start);
        int reply_ms = static_cast<int>(std::max<int64_t>(1, left.count()));
        if (options.connect_timeout_ms > 0) {
          reply_ms = std::min(reply_ms, options.connect_timeout_ms);
        }
        s = HelloOnFreshSocket(static_cast<int>(std::max<int64_t>(1, wait.count())), reply_ms);
      }
      if (s.ok()) s = ReregisterRegions();
      if (s.ok()) {
        ++reconnects;
        return Status::Ok();
      }
      if (s.code() != StatusCode::kUnavailable) {
        broken = true;
        return s.WithContext("reconnecting to vaed at " + options.socket);
      }
      last = s;
      std::this_thread::sleep_until(attempt_end);
      backoff = std::min(backoff * 2, kReconnectBackoffCap);
    }
    broken = true;
    return Unavailable("vaed at " + options.socket + " went away and did not come back within " +
                       std::to_string(options.reconnect_timeout_ms) + " ms (" +
                       std::to_string(attempts) + " Hello attempts; last: " +
                       (last.ok() ? std::string("none") : last.message()) + ")");
  }

  bool MayReconnect() const { return options.reconnect_timeout_ms > 0; }

  // Precondition: mu held; the request is idempotent. Builds and sends a
  // request and waits for its reply, reconnecting first when the daemon was
  // found gone before, and reconnecting and resending once when it is found
  // gone or answers kUnknownClient now.
  Result<v1::Reply> CallLocked(const Builder& build, int timeout_ms) {
    VAED_RETURN_IF_ERROR(CheckProcess());
    if (broken && MayReconnect()) VAED_RETURN_IF_ERROR(Reconnect());
    for (int attempt = 0;; ++attempt) {
      v1::Request req;
      VAED_RETURN_IF_ERROR(build(&req));
      req.set_request_id(next_request_id++);
      req.set_client_id(client_id.load());
      Result<v1::Reply> reply =
          Exchange(req.SerializeAsString(), req.request_id(), timeout_ms, /*ping=*/true);
      if (IsUnknownClient(reply)) broken = true;
      const bool lost_daemon = broken;  // gone, or it forgot us
      if (!lost_daemon || !MayReconnect() || attempt > 0) {
        return reply;  // a broken connection is mended by the next call
      }
      VAED_RETURN_IF_ERROR(Reconnect());
    }
  }

  Result<v1::Reply> Call(const Builder& build, int timeout_ms) {
    VAED_RETURN_IF_ERROR(CheckProcess());  // before the lock: a fork may have copied it held
    std::lock_guard<std::mutex> lock(mu);
    return CallLocked(build, timeout_ms);
  }

  // Precondition: mu held. The daemon's id for the region the user knows as
  // `user_id`. An id this client never registered passes unchanged, for the
  // daemon to reject with its own message, unless after a reconnect it is
  // the daemon's id of another of this client's regions.
  Result<uint64_t> DaemonRegionId(uint64_t user_id, std::string_view field) const {
    auto it = regions.find(user_id);
    if (it == regions.end()) {
      for (const auto& [id, region] : regions) {
        if (region.daemon_id == user_id) {
          return NotFound(std::string(field) + " " + std::to_string(user_id) +
                          " is not a region registered by this client");
        }
      }
      return user_id;
    }
    if (!it->second.lost.ok()) return it->second.lost.WithContext(field);
    return it->second.daemon_id;
  }

  void HeartbeatLoop() {
    std::unique_lock<std::mutex> lock(hb_mu);
    uint32_t missed = 0;
    for (;;) {
      const uint32_t ms = heartbeat_interval_ms.load();
      const milliseconds interval(ms > 0 ? ms : 1000);
      if (hb_cv.wait_for(lock, interval, [&] { return hb_stop; })) return;
      // A request in flight already shows the daemon we are alive, and
      // watches its liveness itself.
      std::unique_lock<std::mutex> call_lock(mu, std::try_to_lock);
      if (!call_lock.owns_lock()) continue;
      if (ms == 0 || (broken && MayReconnect())) continue;  // the next call reconnects
      v1::Request req;
      req.set_request_id(next_request_id++);
      req.set_client_id(client_id.load());
      req.mutable_heartbeat();
      Result<v1::Reply> reply = Exchange(req.SerializeAsString(), req.request_id(),
                                         static_cast<int>(interval.count()), /*ping=*/false);
      if (!reply.ok()) {
        // Never reconnect from here: that could hold the destructor for
        // reconnect_timeout_ms. Mark it for the next call instead.
        if (++missed >= Liveness()) broken = true;
        continue;
      }
      missed = 0;
      if (IsUnknownClient(reply)) broken = true;
    }
  }
};

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.reconnect_timeout_ms < 0) {
    return InvalidArgument("ClientOptions.reconnect_timeout_ms is " +
                           std::to_string(options.reconnect_timeout_ms) +
                           "; must be >= 0 (0 = never reconnect)");
  }
  if (options.wait_heartbeat_interval_ms <= 0) {
    return InvalidArgument("ClientOptions.wait_heartbeat_interval_ms is " +
                           std::to_string(options.wait_heartbeat_interval_ms) +
                           "; must be > 0");
  }
  VAED_RETURN_IF_ERROR(CheckSocketFile(options.socket));
  auto impl = std::make_unique<Impl>(options);
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    VAED_RETURN_IF_ERROR(
        impl->HelloOnFreshSocket(options.connect_timeout_ms, options.connect_timeout_ms));
  }
  if (options.heartbeats && impl->heartbeat_interval_ms.load() > 0) {
    impl->heartbeat = std::thread([raw = impl.get()] { raw->HeartbeatLoop(); });
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  if (::getpid() != impl_->owner_pid) {
    // A forked child: the heartbeat thread, the socket and the ZeroMQ
    // context belong to the parent; joining, closing or destroying them
    // here would hang or corrupt them. The memory stays with the child.
    (void)impl_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->hb_mu);
    impl_->hb_stop = true;
  }
  impl_->hb_cv.notify_all();
  if (impl_->heartbeat.joinable()) impl_->heartbeat.join();
  std::lock_guard<std::mutex> lock(impl_->mu);
  // Best effort: the daemon also notices our exit. Pointless when it is
  // gone or no longer knows us.
  if (impl_->broken || !impl_->socket) return;
  v1::Request bye;
  bye.set_request_id(impl_->next_request_id++);
  bye.set_client_id(impl_->client_id.load());
  bye.mutable_goodbye();
  (void)impl_->Exchange(bye.SerializeAsString(), bye.request_id(), 500, /*ping=*/false);
}

uint64_t Client::client_id() const { return impl_->client_id.load(); }
const v1::HelloReply& Client::hello() const { return *impl_->hello.load(); }
uint64_t Client::reconnects() const { return impl_->reconnects.load(); }

Result<uint64_t> Client::RegisterRegion(const SharedRegion& region) {
  VAED_RETURN_IF_ERROR(impl_->CheckProcess());
  // Under one lock with the call, so a reconnect by another thread cannot
  // slip between the registration and its bookkeeping.
  std::lock_guard<std::mutex> lock(impl_->mu);
  VAED_ASSIGN_OR_RETURN(
      v1::Reply reply,
      impl_->CallLocked(
          [&](v1::Request* req) {
            GrantDaemonAccess(region.name(), impl_->options.socket);
            v1::HostShmRegion* host = req->mutable_register_region()->mutable_host();
            host->set_name(region.name());
            host->set_size_bytes(region.size());
            return Status::Ok();
          },
          impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kRegisterRegion, "register_region"));
  const uint64_t daemon_id = reply.register_region().region_id();
  // The daemon's id is the user's, unless a region registered before a
  // daemon restart already holds that value.
  uint64_t user_id = daemon_id;
  if (impl_->regions.count(user_id) != 0) user_id = impl_->next_synthetic_region_id++;
  impl_->regions[user_id] = Impl::Region{region.name(), region.size(), daemon_id, Status::Ok()};
  return user_id;
}

Status Client::UnregisterRegion(uint64_t region_id) {
  VAED_RETURN_IF_ERROR(impl_->CheckProcess());
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->regions.find(region_id);
  if (it != impl_->regions.end() && !it->second.lost.ok()) {
    impl_->regions.erase(it);  // the daemon does not have it
    return Status::Ok();
  }
  const bool ours = it != impl_->regions.end();
  Result<v1::Reply> reply = impl_->CallLocked(
      [&](v1::Request* req) {
        VAED_ASSIGN_OR_RETURN(uint64_t id,
                              impl_->DaemonRegionId(region_id, "unregister_region.region_id"));
        req->mutable_unregister_region()->set_region_id(id);
        return Status::Ok();
      },
      impl_->options.request_timeout_ms);
  Status s = reply.ok() ? CheckReply(*reply, v1::Reply::kUnregisterRegion, "unregister_region")
                        : reply.status();
  if (!ours) return s;
  if (auto now = impl_->regions.find(region_id);
      now != impl_->regions.end() && !now->second.lost.ok()) {
    impl_->regions.erase(now);  // lost in a reconnect during this call
    return Status::Ok();
  }
  // Forget it unless the daemon refused for another reason than not having
  // it: it is gone, or will not be re-registered.
  const bool refused = reply.ok() && !s.ok() && s.code() != StatusCode::kNotFound;
  if (!refused) impl_->regions.erase(region_id);
  if (s.code() == StatusCode::kNotFound) return Status::Ok();
  return s;
}

namespace {

// Translates a user-visible region id to the daemon's.
using RegionIdMap = std::function<Result<uint64_t>(uint64_t user_id, std::string_view field)>;

// The wire form of `request`; plan-only requests carry dtypes and shapes.
Status BuildDecode(const DecodeRequest& request, bool plan_only, const RegionIdMap& region_id,
                   v1::Decode* d) {
  d->set_model(request.model);
  d->set_plan_only(plan_only);
  d->set_output_format(static_cast<v1::OutputFormat>(request.format));
  d->mutable_options()->set_stack_tiling(static_cast<v1::StackTiling>(request.stack_tiling));
  d->mutable_options()->set_profile(request.profile);
  d->mutable_options()->set_compile(static_cast<v1::Compile>(request.compile));
  d->mutable_options()->set_deadline_ms(request.deadline_ms);
  d->mutable_options()->set_group_size(request.group_size);
  for (const std::string& f : request.inject_faults) d->mutable_options()->add_inject_faults(f);
  if (request.tiling) {
    d->mutable_options()->mutable_tiling()->set_tile_latent(request.tiling->tile_latent);
    d->mutable_options()->mutable_tiling()->set_overlap_latent(request.tiling->overlap_latent);
  }
  if (request.fps != 0 || request.independent_lengths) {
    d->mutable_av_sync()->set_fps(request.fps);
    d->mutable_av_sync()->set_independent_lengths(request.independent_lengths);
  }
  auto fill = [&](const TensorView& view, std::string_view field, v1::TensorRef* out) -> Status {
    if (plan_only) {
      out->set_dtype(ToProto(view.dtype));
      for (int64_t x : view.shape) out->add_shape(x);
      return Status::Ok();
    }
    VAED_ASSIGN_OR_RETURN(uint64_t id, region_id(view.region_id, field));
    TensorRef ref{id, view.offset, 0, view.dtype, view.shape};
    // The byte size is derived here; the daemon checks it again.
    auto bytes = ContiguousBytes(view.dtype, view.shape, "tensor");
    ref.size = bytes.ok() ? *bytes : 0;
    ToProto(ref, out);
    return Status::Ok();
  };
  if (IsSet(request.latent)) {
    VAED_RETURN_IF_ERROR(fill(request.latent, "latent.region_id", d->mutable_latent()));
  }
  if (IsSet(request.audio_latent)) {
    VAED_RETURN_IF_ERROR(
        fill(request.audio_latent, "audio_latent.region_id", d->mutable_audio_latent()));
  }
  if (!plan_only) {
    if (IsSet(request.output)) {
      VAED_RETURN_IF_ERROR(fill(request.output, "output.region_id", d->mutable_output()));
    }
    if (IsSet(request.audio_output)) {
      VAED_RETURN_IF_ERROR(
          fill(request.audio_output, "audio_output.region_id", d->mutable_audio_output()));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<v1::DecodeReply> Client::PlanDecode(const std::string& model, DType latent_dtype,
                                           const std::vector<int64_t>& latent_shape,
                                           OutputFormat format) {
  DecodeRequest request;
  request.model = model;
  request.latent.dtype = latent_dtype;
  request.latent.shape = latent_shape;
  request.format = format;
  return PlanDecode(request);
}

Result<v1::DecodeReply> Client::PlanDecode(const DecodeRequest& request) {
  VAED_ASSIGN_OR_RETURN(
      v1::Reply reply,
      impl_->Call(
          [&](v1::Request* req) {
            return BuildDecode(request, /*plan_only=*/true, nullptr, req->mutable_decode());
          },
          impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kDecode, "plan decode"));
  return reply.decode();
}

Result<v1::DecodeReply> Client::Decode(const DecodeRequest& request) {
  VAED_RETURN_IF_ERROR(impl_->CheckProcess());
  Impl* impl = impl_.get();
  std::lock_guard<std::mutex> lock(impl->mu);
  impl->on_progress = request.progress ? &request.progress : nullptr;
  Result<v1::Reply> called = impl->CallLocked(
      [&](v1::Request* req) {
        // Runs under impl->mu, per attempt: ids map to the current daemon.
        VAED_RETURN_IF_ERROR(BuildDecode(
            request, /*plan_only=*/false,
            [impl](uint64_t id, std::string_view field) {
              return impl->DaemonRegionId(id, field);
            },
            req->mutable_decode()));
        if (request.progress) req->mutable_decode()->mutable_options()->set_progress(true);
        return Status::Ok();
      },
      impl->options.request_timeout_ms);
  impl->on_progress = nullptr;
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, std::move(called));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kDecode, "decode"));
  return reply.decode();
}

Result<v1::StatusReply> Client::GetStatus() {
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl_->Call(
                                             [](v1::Request* req) {
                                               req->mutable_status();
                                               return Status::Ok();
                                             },
                                             impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kStatus, "status"));
  return reply.status();
}

Result<v1::ReleaseQuarantineReply> Client::ReleaseQuarantine(const std::string& client) {
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, impl_->Call(
                                             [&](v1::Request* req) {
                                               req->mutable_release_quarantine()->set_client(
                                                   client);
                                               return Status::Ok();
                                             },
                                             impl_->options.request_timeout_ms));
  VAED_RETURN_IF_ERROR(
      CheckReply(reply, v1::Reply::kReleaseQuarantine, "release_quarantine"));
  return reply.release_quarantine();
}

Result<v1::Reply> Client::SendRaw(const std::string& bytes) {
  VAED_RETURN_IF_ERROR(impl_->CheckProcess());
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->broken && impl_->MayReconnect()) VAED_RETURN_IF_ERROR(impl_->Reconnect());
  // Match the reply by the message's own request id when it has one.
  uint64_t expect_id = 0;
  v1::Request parsed;
  if (parsed.ParseFromString(bytes)) expect_id = parsed.request_id();
  return impl_->Exchange(bytes, expect_id, impl_->options.request_timeout_ms, /*ping=*/true);
}

}  // namespace vaed::client
