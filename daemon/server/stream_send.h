// Sending on the control socket (vaed/raw_socket.h: raw bytes per
// connection): every message out is framed here (vaed/framing.h), and a
// connection is closed here. Neither blocks: a peer that does not read
// must never stall the control loop.
//
// Thread-safety: the socket's owner thread (the control loop's).
#ifndef VAED_DAEMON_SERVER_STREAM_SEND_H_
#define VAED_DAEMON_SERVER_STREAM_SEND_H_

#include <zmq.hpp>

#include <string>

namespace vaed::server {

// Frames `payload` and queues it to connection `routing_id`. Returns false
// when it could not be queued because the peer's queue is at
// server.send_hwm (EAGAIN: the peer does not read); true otherwise, also
// when it was dropped for a reason that is not the peer's reading (the
// peer disconnected first: logged at debug level; a payload over the frame
// limit: a bug, logged as an error).
bool SendFramed(zmq::socket_t& stream, const std::string& routing_id, const std::string& payload);

// Asks ZeroMQ to close connection `routing_id` (a zero-length message).
// ZeroMQ closes it once what is queued to it has left, so a close waits
// behind unsent replies (connections.h forces it later). Failures are
// logged at debug level.
void SendClose(zmq::socket_t& stream, const std::string& routing_id);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_STREAM_SEND_H_
