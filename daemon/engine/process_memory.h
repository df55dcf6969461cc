// Peak resident memory of the daemon process, per request.
//
// Linux keeps the process's peak resident set size (VmHWM in
// /proc/self/status); writing "5" to /proc/self/clear_refs resets it to the
// current RSS (proc(5)). The executor resets it when a decode starts and
// reads it when the decode ends (decode_run.h), so a reply reports the peak
// since then, weights that stay resident included. The watermark is
// process-wide: with several decodes running at once (on disjoint VAE
// groups) a reading includes the others' memory, and a decode that starts
// later resets an earlier one's watermark; the figure is then the
// process's peak since the most recent start, not that request's own.
// Without /proc (or if the reset is refused) the reading is the process's
// lifetime peak, which only over-reports.
//
// Thread-safety: any thread (the kernel keeps the state).
#ifndef VAED_DAEMON_ENGINE_PROCESS_MEMORY_H_
#define VAED_DAEMON_ENGINE_PROCESS_MEMORY_H_

#include <cstdint>

namespace vaed::engine {

// Resets the peak-RSS watermark to the current RSS. Returns false if the
// kernel refused (the next PeakRssBytes() is then a lifetime peak).
bool ResetPeakRss();

// Peak resident set size in bytes (VmHWM), 0 when unavailable.
uint64_t PeakRssBytes();

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_PROCESS_MEMORY_H_
