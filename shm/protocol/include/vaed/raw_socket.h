// The ZeroMQ socket of vaed's control channel, on both ends: raw bytes over
// Unix-socket connections (vaed/framing.h frames the messages), each
// connection named by a routing id, with a zero-length notice when a
// connection opens and when it closes (the notice of an accepted one
// carries "Peer-Address" and ZMQ_SRCFD). Sending is two parts: the routing
// id (ZMQ_SNDMORE), then the bytes; a zero-length second part closes that
// connection.
//
// The socket is a ZMQ_ROUTER in raw mode (ZMQ_ROUTER_RAW) that reports an
// unroutable send (ZMQ_ROUTER_MANDATORY): the routing-id part fails with
// EAGAIN when that connection's queue is at ZMQ_SNDHWM and EHOSTUNREACH
// when the connection is unknown or closing. Why not ZMQ_STREAM, which
// moves the same bytes: libzmq's ZMQ_STREAM (4.3.4, Debian 12's) loses a
// message it cannot queue. When the connection starts closing between the
// two parts (the socket handles ZeroMQ's internal commands on each send,
// so a peer that disconnects then is seen at the second part),
// stream_t::xsend drops the data part without freeing it: one leaked
// allocation of the part's size plus 40 bytes per such reply, for the
// daemon's life. ZMQ_ROUTER's xsend frees a part it cannot queue.
//
// Throws zmq::error_t (the caller's socket edge converts it,
// vaed/zmq_status.h). Thread-safety: a ZeroMQ socket; one thread at a time.
#ifndef VAED_RAW_SOCKET_H_
#define VAED_RAW_SOCKET_H_

#include <zmq.hpp>

namespace vaed::wire {

inline zmq::socket_t OpenRawSocket(zmq::context_t& context) {
  zmq::socket_t socket(context, zmq::socket_type::router);
  // cppzmq names no option for ZMQ_ROUTER_RAW (libzmq lists it among its
  // deprecated options, kept since 4.0); set through the C API.
  const int on = 1;
  if (zmq_setsockopt(socket.handle(), ZMQ_ROUTER_RAW, &on, sizeof(on)) != 0) {
    throw zmq::error_t();
  }
  socket.set(zmq::sockopt::router_mandatory, 1);
  return socket;
}

}  // namespace vaed::wire

#endif  // VAED_RAW_SOCKET_H_
