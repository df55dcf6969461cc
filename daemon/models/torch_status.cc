#include "daemon/models/torch_status.h"

#include <c10/util/Exception.h>

#include "daemon/models/cancel.h"
#include "daemon/models/tile_group.h"
#include "vaed/cuda_error_class.h"

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

// A CUDA error LibTorch reported with its code.
Status FromCudaError(int code, std::string_view context, std::string_view message) {
  const ErrorReason reason = CudaErrorCodeReason(code);
  if (reason == ErrorReason::kOutOfMemory) {
    return Make(StatusCode::kResourceExhausted, context, message).WithReason(reason);
  }
  return Make(StatusCode::kInternal, context, message).WithReason(reason);
}

}  // namespace

Status CurrentTorchErrorStatus(std::string_view context) noexcept {
  try {
    try {
      throw;
    } catch (const DecodeCancelled& e) {
      return e.status().WithContext(context);
    } catch (const CollectiveFailed& e) {
      return e.status().WithContext(context);
    } catch (const c10::OutOfMemoryError& e) {
      return Make(StatusCode::kResourceExhausted, context, e.what_without_backtrace())
          .WithReason(ErrorReason::kOutOfMemory);
    } catch (const c10::AcceleratorError& e) {
      return FromCudaError(e.get_error_code(), context, e.what_without_backtrace());
    } catch (const c10::Error& e) {
      const std::string_view message = e.what_without_backtrace();
      if (MentionsAllocationFailure(message)) {
        return Make(StatusCode::kResourceExhausted, context, message)
            .WithReason(ErrorReason::kOutOfMemory);
      }
      return Make(StatusCode::kInternal, context, message);
    } catch (const std::bad_alloc& e) {
      return Make(StatusCode::kResourceExhausted, context, e.what())
          .WithReason(ErrorReason::kOutOfMemory);
    } catch (const std::exception& e) {
      return Make(StatusCode::kInternal, context, e.what());
    } catch (...) {
      return Make(StatusCode::kInternal, context, "unknown exception");
    }
  } catch (...) {
    // Building the message itself failed (out of memory).
    return Status(StatusCode::kResourceExhausted, std::string())
        .WithReason(ErrorReason::kOutOfMemory);
  }
}

}  // namespace vaed::models
