// The LibTorch error adapter: the one place c10::Error (and the standard
// exceptions LibTorch lets through) become a vaed Status.
//
// Thread-safety: pure functions; safe from any thread.
#ifndef VAED_DAEMON_MODELS_TORCH_STATUS_H_
#define VAED_DAEMON_MODELS_TORCH_STATUS_H_

#include <exception>
#include <string_view>

#include "vaed/status.h"

namespace vaed::models {

// Translates the exception currently being handled. Call it only inside a
// catch block (it rethrows std::current_exception() to inspect it):
//
//   try { ... } catch (...) { return CurrentTorchErrorStatus("taef2 decode"); }
//
// Result: "<context>: <message without the C++ backtrace>" with code
//   the DecodeCancelled's own (kCancelled, kDeadlineExceeded; cancel.h);
//   kResourceExhausted  std::bad_alloc, or a c10::Error whose message reports
//                       a failed memory allocation ("can't allocate memory",
//                       "out of memory");
//   kInternal           any other c10::Error, std::exception or unknown
//                       exception.
// Never throws.
Status CurrentTorchErrorStatus(std::string_view context) noexcept;

// LibTorch has no error code for allocation failure; it is only visible in
// the message ("DefaultCPUAllocator: can't allocate memory: you tried to
// allocate ...", "CUDA out of memory. Tried to allocate ...", vaed's own
// "out of memory: vaed tensor memory budget ...").
bool MentionsAllocationFailure(std::string_view message);

// True for the device errors after which no later kernel in this process
// can be trusted (CUDA "an illegal memory access was encountered",
// "unspecified launch failure", "device-side assert triggered", ECC, NCCL's
// "unhandled cuda error"): the daemon must restart (DESIGN.md §2 item 7).
// Matched on the message, as MentionsAllocationFailure().
bool IsStickyDeviceError(std::string_view message);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TORCH_STATUS_H_
