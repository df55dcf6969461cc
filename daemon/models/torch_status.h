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
//   kInternal, reason kStickyDevice: a c10::Error reporting a device error
//                       after which no kernel of this process can be trusted
//                       (CUDA "an illegal memory access was encountered",
//                       "unspecified launch failure", "device-side assert
//                       triggered", ECC, NCCL's "unhandled cuda error"):
//                       the daemon must restart (DESIGN.md §2 item 7);
//   kInternal           any other c10::Error, std::exception or unknown
//                       exception.
// By type and code where LibTorch gives them: c10::OutOfMemoryError is out
// of memory, and c10::AcceleratorError carries the CUDA error code,
// classified by CudaErrorReason(). Errors LibTorch raises as a plain
// c10::Error (e.g. a CPU allocation failure of a kernel's scratch space)
// show their kind only in the message, so this adapter (and
// tensor_memory.cc's allocator, the other LibTorch edge) are the only
// readers of message text.
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

// What a CUDA runtime error code means for the daemon: kOutOfMemory for
// cudaErrorMemoryAllocation (2); kStickyDevice for the errors after which
// the CUDA context is unusable (cuda_runtime_api.h: ECC uncorrectable 214,
// illegal address 700, launch timeout 702, context destroyed 709, device
// assert 710, hardware stack error 714, illegal instruction 715,
// misaligned address 716, invalid address space 717, invalid PC 718,
// launch failure 719); kNone otherwise.
ErrorReason CudaErrorReason(int code);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TORCH_STATUS_H_
