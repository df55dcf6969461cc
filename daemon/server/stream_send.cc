#include "daemon/server/stream_send.h"

#include <spdlog/spdlog.h>

#include "vaed/framing.h"
#include "vaed/status.h"
#include "vaed/zmq_status.h"

namespace vaed::server {

bool SendFramed(zmq::socket_t& stream, const std::string& routing_id, const std::string& payload) {
  Result<std::string> frame = wire::EncodeFrame(payload);
  if (!frame.ok()) {
    // Replies are bounded far below the frame limit: a bug, not a peer's.
    spdlog::error("not sending a reply: {}", frame.status().ToString());
    return true;
  }
  try {
    if (!stream.send(zmq::buffer(routing_id),
                     zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;  // EAGAIN: the peer's queue is at server.send_hwm
    }
    stream.send(zmq::buffer(*frame), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH: the peer disconnected before its reply.
    spdlog::debug("{}", ZmqErrorStatus(e, "sending a reply").ToString());
  }
  return true;
}

void SendClose(zmq::socket_t& stream, const std::string& routing_id) {
  try {
    // A zero-length message closes the connection (vaed/raw_socket.h).
    if (stream.send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      stream.send(zmq::message_t(), zmq::send_flags::dontwait);
    }
  } catch (const zmq::error_t& e) {
    spdlog::debug("{}", ZmqErrorStatus(e, "closing a connection").ToString());
  }
}

}  // namespace vaed::server
