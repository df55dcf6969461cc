// The engine's plain C++ values on the wire: decode replies (finished and
// plan-only), progress messages, and the executor's ranks and groups in a
// status reply. The server alone speaks protobuf (vaed.v1); the engine
// hands it DecodeJob/DecodeResult/ProgressEvent/ExecutorStatus.
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_SERVER_DECODE_REPLY_H_
#define VAED_DAEMON_SERVER_DECODE_REPLY_H_

#include <optional>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"
#include "daemon/engine/executor.h"
#include "daemon/models/vae_model.h"
#include "vaed/status.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::server {

// The engine's output format for the wire's (UNSPECIFIED = UINT8_NHWC; the
// handler has refused unknown values).
engine::OutputFormat ToEngineFormat(v1::OutputFormat format);

// Fills the part of a DecodeReply that the plans decide: model, latent and
// output shapes/dtypes/bytes, pixel frames and size, fps and durations, the
// audio geometry (channels, samples, sample rate, seconds), the A/V rule's
// expected audio length, compute dtype, the demo flag and a tiled
// model's tile grid and temporal windows (DecodeReply.tiling). Used for
// plan-only replies and for finished decodes, so both always report the
// same fields.
void FillDecodeGeometry(const models::VaeModel& model,
                        const std::optional<engine::VideoPart>& video,
                        const std::optional<engine::AudioPart>& audio,
                        const engine::RequestFacts& av, v1::DecodeReply* out);

// The reply that ends `job`: its DecodeReply (geometry, timings, tiling,
// group, sanity, memory, warm) or its error.
v1::Reply FinishedReply(const engine::DecodeJob& job,
                        const Result<engine::DecodeResult>& result);

// A Progress message of `job` (request id echoed; not the end of it).
v1::Reply ProgressReply(const engine::DecodeJob& job, const engine::ProgressEvent& event);

// A FinalRange message of a streamed `job` (request id echoed).
v1::Reply FinalRangeReply(const engine::DecodeJob& job, const engine::FinalRangeEvent& event);

// The error `status` that ended `job`, saying what of a streamed output was
// final before it (Status::final_frames/final_samples from job.streamed,
// and "streamed: output frames [0, N) are final: " before the message);
// `status` itself when the job did not stream.
Status WithStreamedSoFar(const engine::DecodeJob& job, const Status& status);

// StatusReply.ranks, groups and rank_status.
void FillExecutorStatus(const engine::ExecutorStatus& executor, v1::StatusReply* out);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_DECODE_REPLY_H_
