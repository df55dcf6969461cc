// Status and Result<T>: the one error vocabulary of vaed.
//
// Every fallible function returns a Status or a Result<T>. A Status holds a
// code (mirrored one-to-one by vaed.v1.ErrorCode on the wire) and a message
// that names what was being done and the rule that was broken, e.g.
// "decode: latent.shape[1] is 16, model 'taef2' needs 32 latent channels".
//
// Foreign error domains (errno, zmq, Boost.Interprocess, c10::Error, toml++)
// are translated into a Status in exactly one adapter each; see
// ErrnoStatus() below for errno.
//
// Thread-safety: Status and Result are value types; distinct objects may be
// used from different threads, a single object needs external locking.
#ifndef VAED_STATUS_H_
#define VAED_STATUS_H_

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace vaed {

// Error codes. The numeric values are part of the wire protocol
// (vaed.v1.ErrorCode); never renumber, only append.
enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,     // a request or config field broke a rule
  kNotFound = 2,            // unknown region, model, client
  kAlreadyExists = 3,       // duplicate registration
  kOutOfRange = 4,          // offset/size outside a region
  kFailedPrecondition = 5,  // e.g. Decode before Hello
  kResourceExhausted = 6,   // out of memory, quota
  kUnavailable = 7,         // daemon down or not answering
  kVersionMismatch = 8,     // protocol versions differ
  kProtocolError = 9,       // unparsable or malformed message
  kClientFault = 10,        // client memory faulted (SIGBUS/SIGSEGV) in a copy
  kInternal = 11,           // a bug or an unexpected foreign error
  kCancelled = 12,          // shutdown or client gone
  kDeadlineExceeded = 13,
  kIoError = 14,            // file system / OS failure
  kQuarantined = 15,        // the client faulted too often; see retry_after_ms()
  kBusy = 16,               // at capacity (queue, in-flight limit); see retry_after_ms()
  kPermissionDenied = 17,   // peer credentials not admitted
  kUnknownClient = 18,      // client id unknown to this daemon: Hello again
};

// Returns a stable lower_snake name for `code`, e.g. "invalid_argument".
std::string_view StatusCodeName(StatusCode code);

// Why an operation failed, where the code alone does not decide what the
// daemon does next. Set once, where the foreign error enters (the LibTorch
// adapter, a communicator, fault injection), and read downstream by value:
// nothing classifies an error by its message text. Kept by WithContext();
// not on the wire (clients see the code and the message).
enum class ErrorReason : uint8_t {
  kNone = 0,
  kOutOfMemory = 1,   // an allocation failed (host, device, or vaed's tensor
                      // budget): the failure ladder may retry with less memory
  kStickyDevice = 2,  // a device error after which no kernel of this process
                      // can be trusted: the daemon must restart (DESIGN.md §2.7)
  kCollective = 3,    // a collective of a VAE group failed or timed out
};

// "none", "out_of_memory", "sticky_device", "collective".
std::string_view ErrorReasonName(ErrorReason reason);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: <message>", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status WithContext(std::string_view context) const;

  // The request or config field the error is about ("options.group_size"),
  // when its source named one; "" otherwise. Kept by WithContext(); on the
  // wire as vaed.v1.Error.field.
  const std::string& field() const { return field_; }
  Status WithField(std::string field) const {
    Status s = *this;
    s.field_ = std::move(field);
    return s;
  }

  // The typed reason (ErrorReason); kNone unless the error's source set it.
  ErrorReason reason() const { return reason_; }
  Status WithReason(ErrorReason reason) const {
    Status s = *this;
    s.reason_ = reason;
    return s;
  }

  // kQuarantined / kBusy: milliseconds after which a retry may succeed
  // (vaed.v1.Error.retry_after_ms); 0 = not said. Kept by WithContext().
  uint32_t retry_after_ms() const { return retry_after_ms_; }
  Status WithRetryAfter(uint32_t ms) const {
    Status s = *this;
    s.retry_after_ms_ = ms;
    return s;
  }

  // A failed Decode that streamed its output (DecodeOptions.stream_output):
  // the output's pixel frames [0, final_frames()) and audio samples per
  // channel [0, final_samples()) were announced final before the failure
  // and stay valid (vaed.v1.Error.final_frames / final_samples); 0 = none.
  // Kept by WithContext().
  uint64_t final_frames() const { return final_frames_; }
  uint64_t final_samples() const { return final_samples_; }
  Status WithFinalOutput(uint64_t frames, uint64_t samples) const {
    Status s = *this;
    s.final_frames_ = frames;
    s.final_samples_ = samples;
    return s;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  uint32_t retry_after_ms_ = 0;
  ErrorReason reason_ = ErrorReason::kNone;
  std::string field_;
  uint64_t final_frames_ = 0;
  uint64_t final_samples_ = 0;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status VersionMismatch(std::string m) {
  return {StatusCode::kVersionMismatch, std::move(m)};
}
inline Status ProtocolError(std::string m) {
  return {StatusCode::kProtocolError, std::move(m)};
}
inline Status ClientFault(std::string m) { return {StatusCode::kClientFault, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Quarantined(std::string m, uint32_t retry_after_ms) {
  return Status(StatusCode::kQuarantined, std::move(m)).WithRetryAfter(retry_after_ms);
}
inline Status Busy(std::string m, uint32_t retry_after_ms) {
  return Status(StatusCode::kBusy, std::move(m)).WithRetryAfter(retry_after_ms);
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status UnknownClient(std::string m) { return {StatusCode::kUnknownClient, std::move(m)}; }

// The errno adapter: "<context>: <strerror(err)> (errno <err>)", code
// kNotFound for ENOENT, kResourceExhausted for ENOMEM/ENOSPC, kIoError
// otherwise.
Status ErrnoStatus(int err, std::string_view context);

// Result<T> holds either a T or a non-OK Status. Constructing a Result from
// an OK Status is a programming error (asserts in debug builds and becomes
// kInternal in release builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "Result<T> must not hold an OK status");
    if (status_.ok()) status_ = Internal("Result constructed from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  // OK when a value is held.
  const Status& status() const { return status_; }

  // Preconditions: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace vaed

#define VAED_CONCAT_INNER_(a, b) a##b
#define VAED_CONCAT_(a, b) VAED_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define VAED_RETURN_IF_ERROR(expr)                   \
  do {                                               \
    ::vaed::Status vaed_status_ = (expr);            \
    if (!vaed_status_.ok()) return vaed_status_;     \
  } while (0)

// `VAED_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or
// returns its Status from the enclosing function.
#define VAED_ASSIGN_OR_RETURN(lhs, expr) \
  VAED_ASSIGN_OR_RETURN_IMPL_(VAED_CONCAT_(vaed_result_, __LINE__), lhs, expr)
#define VAED_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // VAED_STATUS_H_
