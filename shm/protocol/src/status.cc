#include "vaed/status.h"

#include <cerrno>
#include <cstring>

namespace vaed {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kAlreadyExists: return "already_exists";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kVersionMismatch: return "version_mismatch";
    case StatusCode::kProtocolError: return "protocol_error";
    case StatusCode::kClientFault: return "client_fault";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kQuarantined: return "quarantined";
    case StatusCode::kBusy: return "busy";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kUnknownClient: return "unknown_client";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m))
      .WithRetryAfter(retry_after_ms_)
      .WithReason(reason_)
      .WithField(field_)
      .WithFinalOutput(final_frames_, final_samples_);
}

std::string_view ErrorReasonName(ErrorReason reason) {
  switch (reason) {
    case ErrorReason::kNone:
      return "none";
    case ErrorReason::kOutOfMemory:
      return "out_of_memory";
    case ErrorReason::kStickyDevice:
      return "sticky_device";
    case ErrorReason::kCollective:
      return "collective";
  }
  return "unknown";
}

Status ErrnoStatus(int err, std::string_view context) {
  char buf[256];
  // GNU strerror_r returns the message pointer (may not use buf).
  const char* text = strerror_r(err, buf, sizeof(buf));
  std::string m(context);
  m += ": ";
  m += text;
  m += " (errno ";
  m += std::to_string(err);
  m += ")";
  StatusCode code = StatusCode::kIoError;
  if (err == ENOENT) code = StatusCode::kNotFound;
  if (err == ENOMEM || err == ENOSPC) code = StatusCode::kResourceExhausted;
  if (err == EACCES || err == EPERM) code = StatusCode::kFailedPrecondition;
  return Status(code, std::move(m));
}

}  // namespace vaed
