#include "exception_status.h"

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <utility>

namespace vaed::client {

namespace {

// The classification shared by both functions: the code and a message
// that lives as long as the exception (a literal or what()).
struct Classified {
  StatusCode code;
  const char* prefix;  // "out of memory", "unexpected exception: ", ...
  const char* what;    // what() of a std::exception, else ""
};

Classified ClassifyCurrentException() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return {StatusCode::kResourceExhausted, "out of memory", ""};
  } catch (const std::exception& e) {
    return {StatusCode::kInternal, "unexpected exception: ", e.what()};
  } catch (...) {
    return {StatusCode::kInternal, "unknown exception", ""};
  }
}

}  // namespace

Status StatusFromCurrentException(std::string_view context, std::string_view detail) noexcept {
  const Classified c = ClassifyCurrentException();
  try {
    std::string message(context);
    message.append(detail).append(": ").append(c.prefix).append(c.what);
    return Status(c.code, std::move(message));
  } catch (...) {
    // Short enough for the small-string buffer: constructing it allocates nothing.
    return Status(StatusCode::kResourceExhausted, "out of memory");
  }
}

int32_t WriteCurrentException(const char* context, char* err, size_t err_len) noexcept {
  const Classified c = ClassifyCurrentException();
  if (err != nullptr && err_len > 0) {
    // As Status::ToString() writes it: "<code name>: <message>".
    const std::string_view code = StatusCodeName(c.code);
    std::snprintf(err, err_len, "%.*s: %s: %s%s", static_cast<int>(code.size()), code.data(),
                  context, c.prefix, c.what);
  }
  return static_cast<int32_t>(c.code);
}

}  // namespace vaed::client
