// The one adapter from ZeroMQ errors to Status, shared by client and daemon.
// cppzmq throws zmq::error_t; callers catch it at their socket edge and
// translate it here, keeping the native errno and what was being done.
#ifndef VAED_ZMQ_STATUS_H_
#define VAED_ZMQ_STATUS_H_

#include <zmq.hpp>

#include <string>
#include <string_view>

#include "vaed/status.h"

namespace vaed {

// kCancelled for ETERM (context shut down), kUnavailable for
// EHOSTUNREACH/ECONNREFUSED/ENOENT (peer or socket gone), kIoError otherwise.
inline Status ZmqErrorStatus(const zmq::error_t& e, std::string_view context) {
  std::string m = std::string(context) + ": " + e.what() + " (zmq errno " +
                  std::to_string(e.num()) + ")";
  switch (e.num()) {
    case ETERM: return Cancelled(std::move(m));
    case EHOSTUNREACH:
    case ECONNREFUSED:
    case ENOENT: return Unavailable(std::move(m));
    default: return IoError(std::move(m));
  }
}

}  // namespace vaed

#endif  // VAED_ZMQ_STATUS_H_
