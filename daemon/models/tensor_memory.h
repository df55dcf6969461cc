// Host tensor memory of the daemon: what LibTorch has allocated on the CPU
// right now, its peak since a mark, and an optional budget.
//
// InstallTensorMemoryTracking() puts a counting allocator in front of
// LibTorch's default CPU allocator (c10::SetCPUAllocator). Every CPU tensor
// allocated afterwards (weights loaded later, activations, outputs) is
// counted in bytes as requested from the allocator (storage nbytes, before
// the allocator's 64-byte alignment). Memory LibTorch takes outside its
// allocator (MKL/oneDNN scratch, glibc arenas, thread stacks) is not
// counted; the process's peak RSS (engine/process_memory.h) covers those.
//
// Budget: with SetTensorMemoryBudget(b > 0), an allocation that would take
// the live bytes above b throws c10::OutOfMemoryError (message starting
// "out of memory: vaed tensor memory budget"), the same exception type and
// path as a real allocation failure, so the decode's failure ladder
// (h3/tiled_decode.h) handles both alike. This is the per-daemon memory
// budget of the config (executor.memory_budget_mib) and the injectable
// budget of the tests.
//
// Peaks: the live bytes are process-wide (every rank's tensors, the
// resident weights, other requests' buffers), but each thread has its own
// peak mark. A rank resets its mark before a request and reads it after, so
// the figure is the process's highest live tensor bytes while that request
// ran; requests decoding at the same time on other ranks count in it (their
// tensors were live), but their resets do not lower it. (Before marks were
// per thread, a request starting on another rank reset the one shared mark
// and the first request under-reported its peak.)
//
// Thread-safety: all functions may be called from any thread (atomics);
// the peak functions act on the calling thread's mark.
#ifndef VAED_DAEMON_MODELS_TENSOR_MEMORY_H_
#define VAED_DAEMON_MODELS_TENSOR_MEMORY_H_

#include <cstdint>
#include <exception>

namespace vaed::models {

// Installs the counting allocator once (later calls do nothing). Returns
// false when LibTorch refused it (then every reading below is 0).
bool InstallTensorMemoryTracking();
bool TensorMemoryTracked();

// Bytes of live CPU tensors allocated through the tracking allocator, by
// any thread.
uint64_t LiveTensorBytes();
// Highest LiveTensorBytes() since the calling thread's last
// ResetPeakTensorBytes() (or since its first call of a peak function).
uint64_t PeakTensorBytes();
// Sets the calling thread's peak mark to the current live bytes; other
// threads' marks are untouched.
void ResetPeakTensorBytes();

// Measures the peak of one nested span (a decoder call) on the calling
// thread's mark without losing the enclosing span's peak: the constructor
// saves the peak so far and resets it to the live bytes; Peak() is the
// span's peak; the destructor restores max(saved, span peak). Construct and
// destroy it on one thread. The span's peak counts every thread's tensors:
// start_live() and Peak() include what other ranks allocated meanwhile, so
// Peak() - start_live() is this span's own use only when nothing else
// allocated or freed during it.
class ScopedTensorPeak {
 public:
  ScopedTensorPeak();
  ~ScopedTensorPeak();
  ScopedTensorPeak(const ScopedTensorPeak&) = delete;
  ScopedTensorPeak& operator=(const ScopedTensorPeak&) = delete;
  uint64_t start_live() const { return start_live_; }
  uint64_t Peak() const;

 private:
  uint64_t saved_peak_;
  uint64_t start_live_;
};

// 0 = no budget (the default).
void SetTensorMemoryBudget(uint64_t bytes);
uint64_t TensorMemoryBudget();

// Bytes the budget still admits (budget - live, 0 when over), or, without
// a budget, the host's MemAvailable (/proc/meminfo; 0 if unreadable).
uint64_t TensorMemoryHeadroom();

// True when `e` is an allocation failure: c10::OutOfMemoryError (budget or
// a real one), std::bad_alloc, or a c10::Error whose message says the
// allocation failed (LibTorch's CPU allocator reports malloc failures as
// plain c10::Error "DefaultCPUAllocator: can't allocate memory").
bool IsOutOfMemory(const std::exception_ptr& e);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_TENSOR_MEMORY_H_
