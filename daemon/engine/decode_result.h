// What the engine reports about a decode: the finished result, the
// progress events before it, and the VAE group's figures. Plain C++ values;
// the server renders them as protobuf replies (server/decode_reply.h).
//
// Thread-safety: value types.
#ifndef VAED_DAEMON_ENGINE_DECODE_RESULT_H_
#define VAED_DAEMON_ENGINE_DECODE_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/models/postprocess.h"
#include "daemon/models/vae_model.h"

namespace vaed::engine {

// One rank's part of a decode on a VAE group.
struct RankFigures {
  uint32_t rank = 0;     // global rank
  int64_t tiles = 0;     // tiles it decoded
  // Its model decode in seconds: the tile decode itself when the model
  // reports it (waiting in collectives is not work), else the wall time.
  double decode_seconds = 0;
  double started_unix = 0;   // wall clock of its part, Unix seconds
  double finished_unix = 0;
};

// The VAE group a video decode ran on (DESIGN.md §2 item 9).
struct GroupReport {
  std::string name;        // e.g. "s2.b0"
  int size = 1;            // ranks the request ran on (after group.few_tiles)
  uint64_t generation = 0; // communicator generation used
  std::vector<RankFigures> ranks;  // group order; ranks[0] is the output rank
  double imbalance = 1.0;  // max / mean of decode_seconds over ranks with tiles
  // Non-empty when the group failed or was unavailable and the output rank
  // decoded alone: why.
  std::string fallback;
};

// A finished decode, written into the client's output regions.
struct DecodeResult {
  // Component timings in seconds ("queue_wait", "copy_in", the model's,
  // "postprocess", "copy_out", "decode") and what a tiled decode did.
  models::DecodeReport report;
  std::optional<GroupReport> group;  // set for video decodes
  // Every rank that ran part of the request had decoded its shape bucket
  // before, in a request or in the start-up warm-up (DecodeHistory).
  bool warm = false;
  uint64_t peak_rss_bytes = 0;  // VmHWM during the request (process-wide)
  // Peak LibTorch host tensor bytes since the request started, on the rank
  // thread's own mark; the live bytes counted are every thread's.
  uint64_t peak_tensor_bytes = 0;
  uint64_t memory_budget_bytes = 0;  // executor.memory_budget_mib in bytes, 0 = none
  // Peaks above count host memory only (tensor_memory.h). CUDA ranks: the
  // highest bytes LibTorch's caching allocator had allocated on the rank's
  // device during the request (torch_cuda.h TorchDeviceMemory; reset at
  // its start); 0 on CPU ranks.
  uint64_t peak_device_bytes = 0;
  // CUDA outputs: the handle of the interprocess event the rank recorded on
  // its stream after its last write to them (cuda_events.h
  // OutputEventRing), for DecodeReply.outputs_ready_event; empty otherwise.
  std::string outputs_ready_event;
  // Copies between host and device memory for this request and their bytes
  // (region_io.h HostCopies): 0 on CPU ranks.
  uint32_t host_copies = 0;
  uint64_t host_copy_bytes = 0;
  std::optional<models::OutputStats> video_sanity;  // set for video decodes
  std::optional<models::OutputStats> audio_sanity;  // set for audio decodes
};

// How far a decode has come (DecodeJob::progress).
struct ProgressEvent {
  const char* stage = "";  // "video" or "audio"
  int64_t done = 0;        // units of the stage finished
  int64_t total = 0;       // units of the stage (> 0)
  const char* unit = "";   // "window", "frames", "audio"
  // Of the whole request, in (0, 1]: the video's units, then the audio as
  // one more unit of the video's size (the whole request without video).
  // Monotonic per request.
  double fraction = 0;
  double elapsed_seconds = 0;  // since the decode started (queue wait excluded)
  double eta_seconds = 0;      // elapsed * (1 - fraction) / fraction; 0 when done
  int64_t tiles_done = 0;      // tiled video: tiles decoded so far
  int64_t tiles_total = 0;
};

// A part of a streamed job's output that is final (DecodeJob::
// stream_output): its elements [begin, end) are written and this job never
// touches them again. Per stage the ranges are contiguous from 0 and the
// last ends at `total`.
struct FinalRangeEvent {
  const char* stage = "";  // "video" (the output) or "audio" (audio_output)
  const char* unit = "";   // "frames" (pixel frames) or "samples" (per channel)
  int64_t begin = 0;
  int64_t end = 0;
  int64_t total = 0;
  // CUDA outputs: the rank's event recorded after the range's writes
  // (cuda_events.h OutputEventRing); empty for host outputs.
  std::string ready_event;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_DECODE_RESULT_H_
