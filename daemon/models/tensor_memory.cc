#include "daemon/models/tensor_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <string>

#include "daemon/models/torch_status.h"

namespace vaed::models {
namespace {

// Each block carries its size in a header in front of the data, so the raw
// deleter (a plain function of the data pointer) can uncount it. 64 bytes
// keep the data at the default allocator's 64-byte alignment.
constexpr size_t kHeader = 64;

std::atomic<uint64_t> g_live{0};
std::atomic<uint64_t> g_budget{0};
std::atomic<bool> g_installed{false};
c10::Allocator* g_base = nullptr;
c10::DeleterFnPtr g_base_deleter = nullptr;

// Peak marks, one per thread that asks for one (a rank measuring its
// request, say), so that one thread's ResetPeakTensorBytes() does not lower
// the mark another thread is measuring with. Every allocation raises every
// mark in [0, g_marks_end); a thread claims a free slot on first use and
// frees it when it exits. Slot 0 is shared by the threads that find no free
// slot (more than kMaxPeakMarks - 1 at once), which then disturb each other
// as a single process-wide mark would.
constexpr size_t kMaxPeakMarks = 256;
std::atomic<uint64_t> g_marks[kMaxPeakMarks];
std::atomic<bool> g_mark_taken[kMaxPeakMarks];
std::atomic<size_t> g_marks_end{1};

void RaiseMark(std::atomic<uint64_t>& mark, uint64_t live) {
  uint64_t peak = mark.load(std::memory_order_relaxed);
  while (live > peak && !mark.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void RaisePeaks(uint64_t live) {
  const size_t end = g_marks_end.load(std::memory_order_acquire);
  for (size_t i = 0; i < end; ++i) RaiseMark(g_marks[i], live);
}

// The calling thread's slot, claimed on first use (its mark starts at the
// live bytes then) and released when the thread exits.
class ThreadMark {
 public:
  ThreadMark() {
    for (size_t i = 1; i < kMaxPeakMarks; ++i) {
      bool expected = false;
      if (g_mark_taken[i].compare_exchange_strong(expected, true)) {
        index_ = i;
        break;
      }
    }
    size_t end = g_marks_end.load();
    while (index_ >= end && !g_marks_end.compare_exchange_weak(end, index_ + 1)) {
    }
    mark().store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  ~ThreadMark() {
    if (index_ != 0) g_mark_taken[index_].store(false);
  }
  ThreadMark(const ThreadMark&) = delete;
  ThreadMark& operator=(const ThreadMark&) = delete;

  std::atomic<uint64_t>& mark() { return g_marks[index_]; }

 private:
  size_t index_ = 0;
};

std::atomic<uint64_t>& MyMark() {
  thread_local ThreadMark mark;
  return mark.mark();
}

void Free(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeader;
  uint64_t n = 0;
  std::memcpy(&n, block, sizeof(n));
  g_live.fetch_sub(n, std::memory_order_relaxed);
  g_base_deleter(block);
}

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const uint64_t live = g_live.fetch_add(n, std::memory_order_relaxed) + n;
    const uint64_t budget = g_budget.load(std::memory_order_relaxed);
    if (budget > 0 && live > budget) {
      g_live.fetch_sub(n, std::memory_order_relaxed);
      TORCH_CHECK_WITH(OutOfMemoryError, false,
                       "out of memory: vaed tensor memory budget of ", budget,
                       " bytes (executor.memory_budget_mib) would be exceeded by an allocation "
                       "of ", n, " bytes (", live - n, " bytes live)");
    }
    void* block = nullptr;
    try {
      block = g_base->raw_allocate(n + kHeader);
    } catch (...) {
      g_live.fetch_sub(n, std::memory_order_relaxed);
      throw;
    }
    RaisePeaks(live);
    const uint64_t size = n;
    std::memcpy(block, &size, sizeof(size));
    void* data = static_cast<char*>(block) + kHeader;
    return {data, data, &Free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }
  // Host memory on both sides: a plain copy (LibTorch's clone of a CPU
  // storage goes through here).
  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

CountingAllocator g_counting;

uint64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib << 10;
  }
  return 0;
}

}  // namespace

bool InstallTensorMemoryTracking() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* base = c10::GetCPUAllocator();
    if (base == nullptr || base->raw_deleter() == nullptr) return;
    g_base = base;
    g_base_deleter = base->raw_deleter();
    // Priority above the default registration (0), so the default
    // allocator's own registration cannot win later.
    c10::SetCPUAllocator(&g_counting, /*priority=*/1);
    g_installed = c10::GetCPUAllocator() == &g_counting;
  });
  return g_installed.load();
}

bool TensorMemoryTracked() { return g_installed.load(); }

uint64_t LiveTensorBytes() { return g_live.load(std::memory_order_relaxed); }
uint64_t PeakTensorBytes() { return MyMark().load(std::memory_order_relaxed); }
void ResetPeakTensorBytes() { MyMark().store(g_live.load(std::memory_order_relaxed)); }

ScopedTensorPeak::ScopedTensorPeak()
    : saved_peak_(PeakTensorBytes()), start_live_(LiveTensorBytes()) {
  ResetPeakTensorBytes();
}

ScopedTensorPeak::~ScopedTensorPeak() { RaiseMark(MyMark(), saved_peak_); }

uint64_t ScopedTensorPeak::Peak() const { return PeakTensorBytes(); }

void SetTensorMemoryBudget(uint64_t bytes) { g_budget.store(bytes); }
uint64_t TensorMemoryBudget() { return g_budget.load(); }

uint64_t TensorMemoryHeadroom() {
  const uint64_t budget = g_budget.load();
  if (budget == 0) return MemAvailableBytes();
  const uint64_t live = g_live.load(std::memory_order_relaxed);
  return live >= budget ? 0 : budget - live;
}

bool IsOutOfMemory(const std::exception_ptr& e) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const c10::OutOfMemoryError&) {
    return true;
  } catch (const c10::Error& err) {
    return MentionsAllocationFailure(err.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace vaed::models
