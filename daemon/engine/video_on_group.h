// The video decode of a job on its VAE group, as the output rank runs it
// (DESIGN.md §2 items 7 and 9): announce the job to the group, decode the
// rank's tiles and gather the others' (the model's TileGroup calls), gather
// every rank's figures; and when the group fails or is unavailable, decode
// again on this rank alone (weights and compiled plans are untouched),
// stating it in the tiling fallbacks and the GroupReport.
//
// Thread-safety: the rank's thread.
#ifndef VAED_DAEMON_ENGINE_VIDEO_ON_GROUP_H_
#define VAED_DAEMON_ENGINE_VIDEO_ON_GROUP_H_

#include <torch/torch.h>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"
#include "daemon/engine/rank_context.h"
#include "vaed/status.h"

namespace vaed::engine {

struct VideoOnGroup {
  torch::Tensor raw;  // the model's raw output (video)
  GroupReport group;
  // The figures are every rank's (the group decoded; its imbalance is
  // meaningful), not this rank's alone.
  bool whole_group = false;
};

// Decodes `latent` with `settings` (cancellation and progress already set)
// on ctx.spec; adds timings and tiling facts to `report`. `*announced` is
// set once the job was announced to the group (until then an early return
// of the caller must let the members stand down). `work` gets this rank's
// share even when the decode fails. Errors: the model's (a collective
// failure is not one: it falls back).
Result<VideoOnGroup> DecodeVideoOnGroup(const DecodeJob& job, const RankContext& ctx,
                                        const torch::Tensor& latent,
                                        models::DecodeSettings settings,
                                        models::DecodeReport* report, bool* announced,
                                        RankWork* work);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_VIDEO_ON_GROUP_H_
