// The protocol of one job on a VAE group (DESIGN.md §2 item 9):
// the collectives its ranks make around the model's own tile gathers.
//
//   output rank (rank 0 of the group)        other ranks
//   AnnounceJob: [spanning groups: store key "<G>/gen<g>/job<n>"]
//     broadcast header (group_job_header.h)  ReceiveJob: the header;
//       go = 0: the job will not run          stand down
//     broadcast the model name (bytes)        the name
//     broadcast the latent (float32)          the latent
//   model Decode(): tile gathers              model Decode(): tile gathers
//   GatherFigures: every rank's RankFigures   GatherFigures
//
// A failed collective aborts the communicator (communicator.h): the other
// ranks then fail at their next collective at once, not at their timeout.
// All LibTorch calls here go through the torch adapter: errors come back as
// a Status; nothing throws.
//
// Thread-safety: called by a rank's thread with its own communicator.
#ifndef VAED_DAEMON_ENGINE_GROUP_JOB_H_
#define VAED_DAEMON_ENGINE_GROUP_JOB_H_

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"
#include "daemon/engine/rank_communicators.h"
#include "daemon/parallel/group_layout.h"
#include "vaed/status.h"

namespace vaed::engine {

// The output rank: announces `job` on `latent` to the group (`channel` at
// `generation`; `spans_nodes`: wake the other daemons through the store
// first). `latent` null = the job will not run: the members stand down.
// A failure aborts the communicator and is returned.
Status AnnounceJob(GroupChannel& channel, const parallel::GroupSpec& spec, uint64_t generation,
                   bool spans_nodes, const DecodeJob* job, const torch::Tensor* latent);

// What a member receives of a job that runs.
struct ReceivedJob {
  std::string model_name;
  torch::Tensor latent;             // float32 on the member's device, the output rank's bytes
  models::DecodeSettings settings;  // MemberSettings() of the header
};

// A member: receives what AnnounceJob() sent, the latent into a buffer on
// `device` (the rank's, where its models are: ModelRegistry::device()).
// The header and the model name are control words read on the host, so
// they travel in CPU tensors on every backend (NCCL stages them). nullopt:
// the output rank stood down. Errors: a failed collective, or a header this
// daemon cannot read (the communicator is then aborted, so the output rank
// falls back).
Result<std::optional<ReceivedJob>> ReceiveJob(parallel::Communicator& comm,
                                              const torch::Device& device);

// Every rank after its decode: gathers each rank's figures (a CPU tensor
// of five float64 words, read on the host) to the output rank (in group
// order: index i = spec.ranks[i]); {} on the other ranks.
Result<std::vector<RankFigures>> GatherFigures(parallel::Communicator& comm,
                                               const parallel::GroupSpec& spec,
                                               const RankFigures& mine);

// A GroupReport of `figures` (group order): imbalance = max / mean of the
// decode seconds of the ranks that decoded tiles (1.0 when fewer than two
// did work or all took 0 s). A rank that decoded no tile (a 1-tile request
// on a group of 2) reports 0 s and is left out of the imbalance: its
// measured time was spent waiting in collectives, not decoding.
GroupReport MakeGroupReport(const parallel::GroupSpec& spec, uint64_t generation,
                            std::vector<RankFigures> figures);

// Seconds since the Unix epoch (wall clock), for RankFigures.
double UnixNow();

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_GROUP_JOB_H_
