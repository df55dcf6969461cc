// The client's connection to the daemon: one raw ZeroMQ socket (vaed/raw_socket.h) carrying
// vaed's framed messages (vaed/framing.h says why vaed frames its own), the
// Hello on a fresh connection, and Exchange(), the wait for one reply with
// the zguide's heartbeats while waiting.
#include <algorithm>
#include <cerrno>

#include "client_impl.h"
#include "exception_status.h"
#include "fault_points.h"
#include "reply_conversion.h"
#include "vaed/raw_socket.h"
#include "vaed/wire.h"
#include "vaed/zmq_status.h"

namespace vaed::client {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// HelloReply.heartbeat_liveness when the daemon does not say.
constexpr uint32_t kDefaultLiveness = 3;

}  // namespace

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
  return reply.ok() && reply->has_error() && reply->error().code() == v1::ERROR_CODE_UNKNOWN_CLIENT;
}

Status Client::Impl::CheckProcess() const {
  if (::getpid() == owner_pid) return Status::Ok();
  return FailedPrecondition("this vaed Client was connected by process " +
                            std::to_string(owner_pid) + "; process " + std::to_string(::getpid()) +
                            " (a fork) must connect a Client of its own");
}

uint32_t Client::Impl::Liveness() const {
  const HelloRecord* h = hello.load();
  return h != nullptr && h->reply.heartbeat_liveness > 0 ? h->reply.heartbeat_liveness
                                                         : kDefaultLiveness;
}

milliseconds Client::Impl::WaitPingInterval() const {
  milliseconds interval(options.wait_heartbeat_interval_ms);
  const uint32_t daemon_ms = heartbeat_interval_ms.load();
  if (daemon_ms > 0) interval = std::min(interval, milliseconds(daemon_ms));
  return interval;
}

bool Client::Impl::SendMessage(const std::string& bytes) {
  if (connection_id.empty()) return false;
  // Requests are small (tensors travel by region): over the frame limit
  // only by a bug; the caller then sees the daemon as unreachable.
  Result<std::string> frame = wire::EncodeFrame(bytes);
  if (!frame.ok()) return false;
  try {
    if (!socket->send(zmq::buffer(connection_id),
                      zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;  // the connection is gone
    throw;
  }
  socket->send(zmq::buffer(*frame), zmq::send_flags::dontwait);
  return true;
}

Result<std::optional<std::string>> Client::Impl::NextMessage(long wait_ms) {
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
      // The socket's notice: the connection closed (the daemon exited or
      // refused this process). Reconnecting is the caller's business.
      broken = true;
      connection_id.clear();
      return Unavailable("vaed at " + options.socket + " closed the connection");
    }
    reader.Append(std::string_view(static_cast<const char*>(chunk.data()), chunk.size()));
    wait_ms = 0;  // a partial message: take what else is there now
  }
}

uint64_t Client::Impl::SendPing() {
  v1::Request req;
  req.set_request_id(next_request_id++);
  req.set_client_id(client_id.load());
  req.mutable_heartbeat();
  if (!SendMessage(req.SerializeAsString())) return 0;
  return req.request_id();
}

void Client::Impl::ReportProgress(const v1::Progress& progress) {
  try {
    (*on_progress)(FromProtocol(progress));
  } catch (...) {
    // Decode() rethrows it once the reply is in and the lock released;
    // unwinding from here would leave the request's reply unread.
    progress_error = std::current_exception();
    on_progress = nullptr;
    streamed.callback = nullptr;
  }
}

void Client::Impl::ReportFinalRange(const v1::FinalRange& range) {
  if (streamed.callback == nullptr) return;
  const bool video = range.stage() == "video";
  uint64_t& delivered = video ? streamed.video_frames : streamed.audio_samples;
  if (range.end() <= delivered) return;  // a retry inside the daemon
  if (!range.ready_event().empty()) {
    Result<internal::CudaStreamSync*> sync = CudaSync();
    Status waited = sync.ok() ? (*sync)->WaitOutputsReady(streamed.cuda_stream,
                                                          range.ready_event())
                              : sync.status();
    if (!waited.ok()) {
      streamed.error = waited.WithContext("streamed output: ordering a final range (" +
                                          range.stage() + " [" + std::to_string(range.begin()) +
                                          ", " + std::to_string(range.end()) + "))");
      streamed.callback = nullptr;
      return;
    }
  }
  try {
    FinalRange part = FromProtocol(range);
    part.begin = delivered;
    (*streamed.callback)(part);
    delivered = range.end();
  } catch (...) {
    // As ReportProgress: Decode() rethrows it once the reply is in.
    progress_error = std::current_exception();
    streamed.callback = nullptr;
    on_progress = nullptr;
  }
}

Result<v1::Reply> Client::Impl::Exchange(const std::string& bytes, uint64_t expect_id,
                                         int timeout_ms, bool ping) {
  try {
    return ExchangeOrThrow(bytes, expect_id, timeout_ms, ping);
  } catch (const zmq::error_t& e) {
    return ZmqErrorStatus(e, "talking to vaed at " + options.socket);
  } catch (...) {
    // Out of memory (or a bug) mid-request: the socket may hold half a
    // message, so the next call starts on a fresh connection.
    broken = true;
    return StatusFromCurrentException("talking to vaed at ", options.socket);
  }
}

Result<v1::Reply> Client::Impl::ExchangeOrThrow(const std::string& bytes, uint64_t expect_id,
                                                int timeout_ms, bool ping) {
  // Without a connection or with a full queue a send would block; never
  // block a caller on it.
  if (!SendMessage(bytes)) {
    broken = true;
    return Unavailable("vaed at " + options.socket +
                       " is not connected (it went away) or not taking messages");
  }
  internal::FaultPoint("client.exchange");
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
      wait_ms = std::max<long>(0, std::chrono::ceil<milliseconds>(until - now).count());
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
        if (on_progress && id == expect_id) ReportProgress(reply.progress());
        continue;
      }
      if (reply.has_final_range()) {
        // Likewise never the reply: a final part of this request's output.
        if (id == expect_id) ReportFinalRange(reply.final_range());
        continue;
      }
      return reply;
    }
    if (ping && Clock::now() >= next_ping) {
      // `liveness` heartbeats may still go unanswered; the last one sent
      // has had its interval to be answered.
      if (liveness == 0) {
        broken = true;
        return Unavailable("vaed at " + options.socket +
                           " stopped answering: " + std::to_string(Liveness()) + " heartbeats " +
                           std::to_string(ping_every.count()) + " ms apart went unanswered");
      }
      --liveness;
      // A raw request carries an id of its own choosing; never reuse it.
      if (next_request_id == expect_id) ++next_request_id;
      if (const uint64_t id = SendPing(); id != 0) ping_ids.push_back(id);
      next_ping = Clock::now() + ping_every;
    }
  }
  return Unavailable("no reply from vaed at " + options.socket + " within " +
                     std::to_string(timeout_ms) +
                     " ms (is the daemon running and healthy? see `vaectl status`)");
}

Status Client::Impl::HelloOnFreshSocket(int connect_ms, int reply_ms) {
  try {
    socket.reset();  // linger 0: stale requests and heartbeats are dropped
    connection_id.clear();
    reader = wire::FrameReader(kMaxReplyBytes);
    socket = std::make_unique<zmq::socket_t>(wire::OpenRawSocket(context));
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
  VAED_ASSIGN_OR_RETURN(v1::Reply reply, Exchange(req.SerializeAsString(), req.request_id(),
                                                  reply_ms, /*ping=*/false));
  VAED_RETURN_IF_ERROR(CheckReply(reply, v1::Reply::kHello, "hello"));
  hellos.push_back(
      std::make_unique<const HelloRecord>(HelloRecord{reply.hello(), FromProtocol(reply.hello())}));
  hello.store(hellos.back().get());
  client_id.store(reply.hello().client_id());
  heartbeat_interval_ms.store(reply.hello().heartbeat_interval_ms());
  broken = false;
  return Status::Ok();
}

}  // namespace vaed::client
