// Process-wide allocator policy for decode workloads.
//
// A decode allocates and frees activations of tens to hundreds of MiB many
// times per request (TAEF2 at 640x272: 64 channels x 174,080 pixels x 4 B =
// 44.6 MB per activation, x frame_batch). glibc serves such blocks with
// mmap and returns them with munmap, so every layer re-faults its pages:
// measured on the 2-core CI machine, bikes (4 frames, 2 threads) took
// 2.47 s/frame with glibc's defaults and 0.35 s/frame with this policy
// (`vaed_bench_decode --skip-daemon --frames 4`), most of the difference
// being kernel time.
//
// The policy keeps freed memory in the heap for reuse instead: it acts as
// the daemon's memory pool. Page faults are expensive (trimming the heap
// after every bikes request doubled its decode time through the daemon), so
// the heap is kept across requests, up to a bound: after a request whose
// peak left more than executor.retained_heap_mib of heap, the executor hands
// the free part back (ReleaseFreedMemoryAbove), so one huge decode does not
// pin its peak RSS for the daemon's life.
//
// Thread-safety: call once, from main(), before any thread is started.
#ifndef VAED_DAEMON_ENGINE_MEMORY_POLICY_H_
#define VAED_DAEMON_ENGINE_MEMORY_POLICY_H_

#include <cstdint>

namespace vaed::engine {

// Uses one malloc arena for all threads started afterwards (M_ARENA_MAX =
// 1), disables mmap for large allocations (M_MMAP_MAX = 0) and heap
// trimming (M_TRIM_THRESHOLD = INT_MAX). Returns false if glibc refused a
// setting.
bool RetainFreedMemoryForReuse();

// When the malloc heap holds more than `retained_bytes` (mallinfo2 arena
// bytes), returns its free memory to the OS (malloc_trim) and returns true.
// Call when idle, e.g. after a request; thread-safe.
bool ReleaseFreedMemoryAbove(uint64_t retained_bytes);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_MEMORY_POLICY_H_
