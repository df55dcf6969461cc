#include "daemon/models/torch_status.h"

#include <c10/util/Exception.h>

#include <new>
#include <string>

namespace vaed::models {

bool MentionsAllocationFailure(std::string_view message) {
  return message.find("can't allocate memory") != std::string_view::npos ||
         message.find("out of memory") != std::string_view::npos ||
         message.find("Out of memory") != std::string_view::npos;
}

namespace {

Status Make(StatusCode code, std::string_view context, std::string_view message) {
  std::string m(context);
  m += ": ";
  m += message;
  return Status(code, std::move(m));
}

}  // namespace

Status CurrentTorchErrorStatus(std::string_view context) noexcept {
  try {
    try {
      throw;
    } catch (const c10::Error& e) {
      const std::string_view message = e.what_without_backtrace();
      return Make(MentionsAllocationFailure(message) ? StatusCode::kResourceExhausted
                                                     : StatusCode::kInternal,
                  context, message);
    } catch (const std::bad_alloc& e) {
      return Make(StatusCode::kResourceExhausted, context, e.what());
    } catch (const std::exception& e) {
      return Make(StatusCode::kInternal, context, e.what());
    } catch (...) {
      return Make(StatusCode::kInternal, context, "unknown exception");
    }
  } catch (...) {
    // Building the message itself failed (out of memory).
    return Status(StatusCode::kResourceExhausted, std::string());
  }
}

}  // namespace vaed::models
