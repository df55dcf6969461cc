// The client library's adapter from C++ exceptions to Status. The library
// calls code that throws (protobuf and the standard library allocate; a
// user's progress callback may throw anything); these functions turn what
// was thrown into the library's error vocabulary at its edges: the C ABI
// (c_api.cc), the public Client and SharedRegion calls, and the heartbeat
// thread. zmq::error_t and Boost.Interprocess exceptions have their own
// adapters (vaed/zmq_status.h, vaed::CallInterprocess) and are translated
// before they get here.
//
// Thread-safety: pure functions of the exception being handled.
#ifndef VAED_CLIENT_SRC_EXCEPTION_STATUS_H_
#define VAED_CLIENT_SRC_EXCEPTION_STATUS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vaed/status.h"

namespace vaed::client {

// Call only inside a catch block. The exception being handled as a Status
// whose message starts with `context` followed by `detail` (e.g. "talking
// to vaed at " and the socket path; two parts, so that the caller builds no
// string inside its handler):
//   std::bad_alloc        kResourceExhausted "<context><detail>: out of memory"
//   std::exception        kInternal "<context><detail>: unexpected exception: <what()>"
//   anything else         kInternal "<context><detail>: unknown exception"
// Never throws: when even the message cannot be built, the Status is
// kResourceExhausted "out of memory" without the context.
Status StatusFromCurrentException(std::string_view context, std::string_view detail = {}) noexcept;

// Call only inside a catch block. The same classification for the C ABI:
// writes "<code name>: <context>: <message>" (as Status::ToString() would)
// into `err` (NUL-terminated, truncated to `err_len` bytes) when `err` is
// not NULL, and returns the code as a vaed_status. Never allocates and
// never throws.
int32_t WriteCurrentException(const char* context, char* err, size_t err_len) noexcept;

}  // namespace vaed::client

#endif  // VAED_CLIENT_SRC_EXCEPTION_STATUS_H_
