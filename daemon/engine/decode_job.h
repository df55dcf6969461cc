// A decode job: what the request handler (daemon/server/) accepted and
// hands to the executor. Plain C++: the engine speaks no wire format; the
// server turns a Decode request into a DecodeJob (decode_admission.h) and
// the job's DecodeResult back into a reply.
//
// Everything here was validated before the job was queued: shapes against
// the model's plan, byte ranges against the regions (overflow-safe), the
// settings against the model's capabilities. A job fails in the engine
// only on what cannot be known earlier (a client segment that faults,
// non-finite latents, a LibTorch error, cancellation, shutdown).
//
// Ownership and lifetime: the executor shares the job (std::shared_ptr)
// between the ranks that decode it and the ResultSink that answers it; its
// regions (HostRegion, CudaRegion) stay mapped for as long as the job
// lives. The model
// pointer is borrowed from rank 0's registry, which outlives the executor.
//
// Thread-safety: immutable once queued, except `cancel` (thread-safe).
#ifndef VAED_DAEMON_ENGINE_DECODE_JOB_H_
#define VAED_DAEMON_ENGINE_DECODE_JOB_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/engine/cuda_region.h"
#include "daemon/models/cancel.h"
#include "daemon/models/vae_model.h"
#include "vaed/host_region.h"
#include "vaed/tensor_ref.h"

namespace vaed::engine {

// The layout of the video output a request asked for (the server maps the
// wire's OutputFormat onto it).
enum class OutputFormat {
  kUint8Nhwc,        // uint8 [frames, height_px, width_px, channels]: the model's
                     // ToUnitRange, clamp, round half to even
  kFloat32Nchw,      // float32 [frames, channels, height_px, width_px]: raw decoder output
  kFloat32NchwUnit,  // float32 NCHW: ToUnitRange, clamped to [0, 1]
};

// The video (or image) part of a request.
struct VideoPart {
  models::DecodePlan plan;
  OutputFormat format = OutputFormat::kUint8Nhwc;
  TensorRef latent;  // checked against latent_region's bounds
  TensorRef output;  // checked against output_region's bounds (plan-only: the expected layout)
  // Where they live: a host region, or a CUDA region (then the host one
  // is null). Both null in plan-only requests.
  std::shared_ptr<HostRegion> latent_region;
  std::shared_ptr<HostRegion> output_region;
  std::shared_ptr<CudaRegion> latent_cuda;
  std::shared_ptr<CudaRegion> output_cuda;
};

// The audio part of a request: latent [channels, 32, T] in, float32
// [channels, samples] out.
struct AudioPart {
  models::AudioPlan plan;
  TensorRef latent;
  TensorRef output;
  std::shared_ptr<HostRegion> latent_region;  // as VideoPart's
  std::shared_ptr<HostRegion> output_region;
  std::shared_ptr<CudaRegion> latent_cuda;
  std::shared_ptr<CudaRegion> output_cuda;
};

// Request-wide facts the reply states: durations, the A/V length rule as
// applied (AvSync), and the resolved profile and compile decision.
struct RequestFacts {
  double fps = models::kDefaultFps;          // video frames per second used
  int64_t expected_audio_latent_frames = 0;  // 0: no video or no audio decoder
  bool independent_lengths = false;
  // Decode.latent_space as admitted (also in DecodeJob::settings).
  models::LatentSpace latent_space = models::LatentSpace::kNormalized;
  std::string profile;                       // e.g. "safe"
  std::string compile_decision;              // e.g. "off (profile safe)"
  std::string stack_decision;                // ResolvedOptions::stack_decision
  std::vector<std::string> output_changing;  // ResolvedOptions::output_changing
};

// What a streamed job has announced final so far (DecodeJob::
// stream_output): its video output's pixel frames [0, video_frames) and its
// audio output's samples per channel [0, audio_samples). Written by the
// rank thread before each announcement, read by the server when it answers
// a failed job (Error.final_frames / final_samples). Only grows.
struct StreamedSoFar {
  std::atomic<uint64_t> video_frames{0};
  std::atomic<uint64_t> audio_samples{0};
};

// One accepted Decode request: a video part, an audio part, or both.
struct DecodeJob {
  // Where the answer goes: opaque to the engine (the server's connection
  // routing id), handed back with the result.
  std::string routing_id;
  uint64_t client_id = 0;
  uint64_t request_id = 0;
  // The model the handler resolved: rank 0's instance (plans, info) and its
  // position in every rank's registry (all registries are built from one
  // config, in config order), so that rank r decodes with its own instance
  // without looking the name up again.
  models::VaeModel* model = nullptr;
  size_t model_index = 0;
  models::DecodeSettings settings;  // validated against the model's capabilities
  std::optional<VideoPart> video;
  std::optional<AudioPart> audio;
  RequestFacts av;
  // DecodeOptions.group_size (0 = group.size); validated as qualified.
  uint32_t requested_group_size = 0;
  // DecodeOptions.progress: report progress (ResultSink::OnProgress) after
  // each unit of work, before the result.
  bool progress = false;
  // DecodeOptions.stream_output: write each part of the output as soon as
  // it is final and announce it (ResultSink::OnFinalRange) before the
  // result; `streamed` then records what was announced (shared: copies of
  // the job see one record).
  bool stream_output = false;
  std::shared_ptr<StreamedSoFar> streamed = std::make_shared<StreamedSoFar>();
  // Decode.inputs_ready_event: the 64-byte cudaIpcEventHandle_t of an event
  // the worker recorded after its last use of the request's CUDA tensors
  // (admission checked its size and that a tensor is in a CUDA region);
  // the output rank's stream waits on it before its first access to them
  // (rank_stream.h). Empty: none.
  std::string inputs_ready_event;
  std::chrono::steady_clock::time_point received;
  // Deadline (DecodeOptions.deadline_ms, from `received`) and cancellation
  // (client gone or quarantined, shutdown); never null for queued jobs.
  std::shared_ptr<models::CancelToken> cancel = std::make_shared<models::CancelToken>();
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_DECODE_JOB_H_
