// Peak resident memory of the daemon process, per request.
//
// Linux keeps the process's peak resident set size (VmHWM in
// /proc/self/status); writing "5" to /proc/self/clear_refs resets it to the
// current RSS (proc(5)). The executor resets it before a request and reads
// it after, so a reply reports the peak during that request (weights that
// stay resident included). Without /proc (or if the reset is refused) the
// reading is the process's lifetime peak, which only over-reports.
//
// Thread-safety: process-wide state; call from the executor thread only
// (one decode at a time makes the per-request reading meaningful).
#ifndef VAED_DAEMON_ENGINE_PROCESS_MEMORY_H_
#define VAED_DAEMON_ENGINE_PROCESS_MEMORY_H_

#include <cstdint>

namespace vaed::engine {

// Resets the peak-RSS watermark to the current RSS. Returns false if the
// kernel refused (the next PeakRssBytes() is then a lifetime peak).
bool ResetPeakRss();

// Peak resident set size in bytes (VmHWM), 0 when unavailable.
uint64_t PeakRssBytes();

// Current resident set size in bytes (VmRSS), 0 when unavailable.
uint64_t CurrentRssBytes();

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_PROCESS_MEMORY_H_
