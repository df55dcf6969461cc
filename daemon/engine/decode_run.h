// One decode of a job, on the rank that answers it (its group's output
// rank):
//   1. copy the latents in from the client's regions (region_io.h), onto
//      the rank's device when it is not the CPU (counted as host copies),
//      and refuse non-finite ones;
//   2. decode the video on the job's group (video_on_group.h), then the
//      audio (the official pipeline's order);
//   3. summarise the outputs (sanity figures: reported, never fatal) and
//      format them (output_format.h);
//   4. copy them out into the client's regions (through host memory when
//      the rank's device is not the CPU, counted), and state the result:
//      timings, tiling, group, warm/cold, memory peaks, host copies.
// Cancellation (deadline, client gone, shutdown) is checked before the
// audio and before the output is written; models check it between units of
// work. Client memory is touched only in steps 1 and 4 (and, streamed,
// during step 2), all inside the job's lifetime (DESIGN.md §2 item 12):
// RunDecode returns, whatever way the decode ends, only after the rank's
// stream has finished the device work it queued (RequestFence,
// rank_stream.h).
//
// Memory figures, each reset at the start of the decode. The peak RSS is
// the process's one watermark (VmHWM, engine/process_memory.h): with
// several decodes running at once (on disjoint groups) a later start resets
// an earlier decode's, so it is the process's peak since the most recent
// start. The peak tensor bytes use the rank thread's own mark
// (models/tensor_memory.h), which no other rank's start resets; the live
// bytes it follows are process-wide, so it includes the tensors other
// decodes hold meanwhile. On a GPU rank the device peak is the caching
// allocator's for the rank's device, shared by every rank on that device.
//
// Thread-safety: the rank's thread; DecodeHistory is shared and
// thread-safe.
#ifndef VAED_DAEMON_ENGINE_DECODE_RUN_H_
#define VAED_DAEMON_ENGINE_DECODE_RUN_H_

#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"
#include "daemon/engine/rank_context.h"
#include "vaed/status.h"

namespace vaed::engine {

// Runs `job` on ctx's rank. `work` gets the rank's share of the model work
// (also when the decode fails). Errors: kClientFault (a region faulted),
// kInvalidArgument (non-finite latents), the model's errors (kInternal,
// kResourceExhausted, with their ErrorReason), kCancelled /
// kDeadlineExceeded; an injected device_fatal fault is kInternal with
// reason kStickyDevice; the fence's error (rank_stream.h AfterFence).
// Precondition: ctx.stream is the rank's, current on the calling thread.
Result<DecodeResult> RunDecode(const DecodeJob& job, const RankContext& ctx, RankWork* work);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_DECODE_RUN_H_
