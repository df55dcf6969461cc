#include "daemon/engine/video_on_group.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

#include "daemon/engine/group_job.h"

namespace vaed::engine {

namespace {

// Injected collective failure (FaultInjection.collective_failure): the
// output rank's collectives are the job's header, model name and latent,
// then the first tile gather, which fails.
constexpr int kFailingCollective = 4;

// Why the group failed during a decode on it (empty: it did not). A decode that
// failed for its own reasons (cancelled, out of memory, ...) aborts the
// communicator, so that the members do not wait for this rank's gathers
// until their timeout.
std::string GroupFailure(parallel::Communicator* comm, const Result<torch::Tensor>& decoded) {
  if (comm == nullptr || decoded.ok()) return "";
  if (comm->aborted()) return comm->abort_reason();
  comm->Abort("the output rank failed: " + decoded.status().message());
  return "";
}

// Decodes again on this rank alone after the group failed (`why`).
Result<torch::Tensor> DecodeAlone(const DecodeJob& job, const RankContext& ctx,
                                  const torch::Tensor& latent,
                                  const models::DecodeSettings& settings, const std::string& why,
                                  models::DecodeReport* report) {
  spdlog::warn("decode: request {} client {}: fallback: {}", job.request_id, job.client_id, why);
  models::DecodeSettings alone = settings;
  alone.group = nullptr;
  alone.faults = {};
  models::DecodeReport retry;
  Result<torch::Tensor> decoded = ctx.model->Decode(latent, alone, &retry);
  for (const auto& [name, seconds] : retry.timings.entries()) report->timings.Add(name, seconds);
  report->tiling = retry.tiling;
  report->tiling.fallbacks.insert(report->tiling.fallbacks.begin(),
                                  {.kind = models::FallbackKind::kCollective,
                                   .detail = "group: " + why});
  return decoded;
}

}  // namespace

Result<VideoOnGroup> DecodeVideoOnGroup(const DecodeJob& job, const RankContext& ctx,
                                        const torch::Tensor& latent,
                                        models::DecodeSettings settings,
                                        models::DecodeReport* report, bool* announced,
                                        RankWork* work) {
  parallel::Communicator* comm = ctx.channel != nullptr ? ctx.channel->comm.get() : nullptr;
  if (comm != nullptr) {
    if (settings.faults.collective_failure > 0) comm->FailNthCollective(kFailingCollective);
    *announced = true;
    // A failed announcement aborts the communicator: the decode falls back.
    (void)AnnounceJob(*ctx.channel, *ctx.spec, ctx.generation, ctx.spans_nodes, &job, &latent);
    if (!comm->aborted()) settings.group = comm;
  }
  const std::string alone = "decoded on rank " + std::to_string(ctx.global_rank) + " alone";
  std::string unavailable;
  if (comm == nullptr && ctx.spec->size > 1) {
    unavailable = "group " + ctx.spec->name + " generation " + std::to_string(ctx.generation) +
                  " unavailable (" + ctx.unavailable + "); " + alone;
  }
  const double started = UnixNow();
  std::string fallback;
  Result<torch::Tensor> decoded = Internal("not decoded");
  if (comm != nullptr && settings.group == nullptr) {
    fallback = comm->abort_reason();  // the announcement failed: straight to the fallback
  } else {
    decoded = ctx.model->Decode(latent, settings, report);
    if (!unavailable.empty()) {
      report->tiling.fallbacks.insert(report->tiling.fallbacks.begin(),
                                      {.kind = models::FallbackKind::kCollective,
                                       .detail = "group: " + unavailable});
    }
    fallback = GroupFailure(comm, decoded);
  }
  if (!fallback.empty()) {
    fallback += "; " + alone;
    decoded = DecodeAlone(job, ctx, latent, settings, fallback, report);
  }
  const double finished = UnixNow();
  *work = WorkOf(*report, started, finished);
  VAED_ASSIGN_OR_RETURN(torch::Tensor raw, std::move(decoded));

  const RankFigures mine{.rank = static_cast<uint32_t>(ctx.global_rank),
                         .tiles = work->tiles,
                         .decode_seconds = work->seconds,
                         .started_unix = started,
                         .finished_unix = finished};
  VideoOnGroup out;
  out.raw = std::move(raw);
  if (settings.group != nullptr && fallback.empty()) {
    // Every rank's figures, for the reply. A failure here costs only them.
    Result<std::vector<RankFigures>> all = GatherFigures(*comm, *ctx.spec, mine);
    if (all.ok() && !all->empty()) {
      out.group = MakeGroupReport(*ctx.spec, ctx.generation, std::move(all).value());
      out.whole_group = true;
      return out;
    }
  }
  // This rank alone (a group of one, or after a fallback).
  parallel::GroupSpec self = *ctx.spec;
  self.ranks = {ctx.global_rank};
  out.group = MakeGroupReport(self, ctx.generation, {mine});
  out.group.fallback = fallback.empty() ? unavailable : fallback;
  return out;
}

}  // namespace vaed::engine
