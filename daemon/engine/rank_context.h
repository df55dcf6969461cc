// What a rank brings to a decode it runs as the output rank of a group:
// its model instance, its place in the group and its communicator, and the
// executor's shared history. Built by the executor for each job.
//
// Thread-safety: used by the rank's thread only, for one job.
#ifndef VAED_DAEMON_ENGINE_RANK_CONTEXT_H_
#define VAED_DAEMON_ENGINE_RANK_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "daemon/engine/decode_history.h"
#include "daemon/engine/decode_result.h"
#include "daemon/engine/rank_communicators.h"
#include "daemon/engine/rank_stream.h"
#include "daemon/models/vae_model.h"
#include "daemon/parallel/group_layout.h"

namespace vaed::engine {

using ProgressFn = std::function<void(const ProgressEvent&)>;
using FinalRangeFn = std::function<void(const FinalRangeEvent&)>;

struct RankContext {
  int local_rank = 0;
  int global_rank = 0;
  models::VaeModel* model = nullptr;          // this rank's own instance
  const parallel::GroupSpec* spec = nullptr;  // the group the job runs on
  uint64_t generation = 0;
  // This rank's communicator of `spec`; null for a group of one, or when it
  // could not be built (then `unavailable` says why).
  GroupChannel* channel = nullptr;
  std::string unavailable;
  bool spans_nodes = false;  // `spec` has ranks on other daemons
  DecodeHistory* history = nullptr;
  ProgressFn progress;  // null: the job asked for none
  FinalRangeFn final_range;  // null: the job does not stream its output
  // The rank's device work (rank_stream.h), owned by the executor for the
  // rank's life; never null (a CPU rank's has no device).
  RankStream* stream = nullptr;
};

// A rank's share of the work of one decode, for its status figures:
// model decode seconds (the tile decode itself when the model reports it,
// else the wall time) and tiles decoded.
struct RankWork {
  double seconds = 0;
  int64_t tiles = 0;
};

// RankWork of a finished model decode that ran from `started_unix` to
// `finished_unix` (Unix seconds).
RankWork WorkOf(const models::DecodeReport& report, double started_unix, double finished_unix);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_RANK_CONTEXT_H_
