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
// Result: "<context>: <message without the C++ backtrace>", classified here,
// once, so that nothing downstream reads the text:
//   DecodeCancelled, CollectiveFailed  the Status they carry (cancel.h,
//                       tile_group.h), with the context;
//   kResourceExhausted, reason kOutOfMemory: std::bad_alloc, or a c10::Error
//                       whose message reports a failed allocation
//                       ("can't allocate memory", "out of memory");
//   kInternal, reason kStickyDevice: a c10::AcceleratorError whose CUDA
//                       code leaves the context unusable
//                       (IsStickyCudaErrorCode, vaed/cuda_error_class.h):
//                       the daemon must restart (DESIGN.md §2 item 7);
//   kInternal           any other c10::Error, std::exception or unknown
//                       exception.
// By type and code where LibTorch gives them: c10::OutOfMemoryError is out
// of memory, and c10::AcceleratorError carries the CUDA error code,
// classified by CudaErrorCodeReason (the one classifier of CUDA codes).
// A device error is never recognised by its text. Only a failed host
// allocation, which LibTorch raises as a plain c10::Error (e.g. a kernel's
// scratch space), shows its kind in the message alone, so this adapter
// (and tensor_memory.cc's allocator, the other LibTorch edge) read message
// text for that and nothing else.
// Never throws.
Status CurrentTorchErrorStatus(std::string_view context) noexcept;

// Runs LibTorch code at the adapter edge: whatever `fn` throws becomes a
// Status (CurrentTorchErrorStatus(context)). `fn` returns a Status or a
// Result<T>; so does RunTorch.
template <typename Fn>
auto RunTorch(std::string_view context, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (...) {
    return CurrentTorchErrorStatus(context);
  }
}

// Whether a LibTorch message reports a failed allocation ("DefaultCPUAllocator:
// can't allocate memory: you tried to allocate ...", "CUDA out of memory.
// Tried to allocate ...", vaed's own "out of memory: vaed tensor memory
// budget ..."). For the LibTorch adapters only (see above).
bool MentionsAllocationFailure(std::string_view message);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TORCH_STATUS_H_
