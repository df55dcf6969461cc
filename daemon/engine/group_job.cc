#include "daemon/engine/group_job.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>

#include "daemon/engine/group_job_header.h"
#include "daemon/models/torch_status.h"

namespace vaed::engine {

namespace {

// RankFigures as the float64 [5] each rank contributes to the gather:
// tiles, decode seconds, start, end (Unix seconds), 1.
constexpr int64_t kFigureWords = 5;

}  // namespace

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status AnnounceJob(GroupChannel& channel, const parallel::GroupSpec& spec, uint64_t generation,
                   bool spans_nodes, const DecodeJob* job, const torch::Tensor* latent) {
  parallel::Communicator& comm = *channel.comm;
  if (spans_nodes && channel.store) {
    // Wakes the other daemons' ranks (store_watcher.h), which then enter
    // the broadcasts below.
    const int64_t n = channel.jobs_announced;
    Status s = channel.store->Set(JobKey(spec, generation, n), "1");
    if (s.ok() && n >= 2) s = channel.store->Delete(JobKey(spec, generation, n - 2));
    if (!s.ok()) {
      comm.Abort("announcing a job to the other daemons: " + s.message());
      return s;
    }
    ++channel.jobs_announced;
  }
  const bool go = latent != nullptr && job != nullptr;
  const std::string name = go ? job->model->info().name : "";
  const GroupJobHeader header =
      go ? MakeGroupJobHeader(latent->sizes().vec(), static_cast<int64_t>(name.size()),
                              job->settings)
         : GroupJobHeader{};
  std::array<int64_t, kGroupJobHeaderWords> words = EncodeGroupJobHeader(header);
  return models::RunTorch("announcing a job to group " + spec.name, [&]() -> Status {
    torch::Tensor t =
        torch::from_blob(words.data(), {static_cast<int64_t>(words.size())}, torch::kLong).clone();
    VAED_RETURN_IF_ERROR(comm.Broadcast(t, 0));
    if (!go) return Status::Ok();
    torch::Tensor name_bytes = torch::empty({static_cast<int64_t>(name.size())}, torch::kUInt8);
    std::memcpy(name_bytes.data_ptr(), name.data(), name.size());
    VAED_RETURN_IF_ERROR(comm.Broadcast(name_bytes, 0));
    torch::Tensor copy = *latent;
    return comm.Broadcast(copy, 0);
  });
}

Result<std::optional<ReceivedJob>> ReceiveJob(parallel::Communicator& comm,
                                              const torch::Device& device) {
  using Out = Result<std::optional<ReceivedJob>>;
  return models::RunTorch("receiving a group job", [&]() -> Out {
    torch::Tensor t = torch::zeros({static_cast<int64_t>(kGroupJobHeaderWords)}, torch::kLong);
    VAED_RETURN_IF_ERROR(comm.Broadcast(t, 0));
    Result<GroupJobHeader> header = DecodeGroupJobHeader(
        std::span<const int64_t>(t.data_ptr<int64_t>(), kGroupJobHeaderWords));
    if (!header.ok()) {
      // The output rank must not wait for this rank until its timeout.
      comm.Abort("the job the output rank sent: " + header.status().message());
      return header.status();
    }
    if (!header->go) return std::optional<ReceivedJob>();
    ReceivedJob received;
    torch::Tensor name_bytes = torch::empty({header->model_name_bytes}, torch::kUInt8);
    VAED_RETURN_IF_ERROR(comm.Broadcast(name_bytes, 0));
    received.model_name.assign(static_cast<const char*>(name_bytes.data_ptr()),
                               static_cast<size_t>(header->model_name_bytes));
    received.latent = torch::empty(header->latent_shape,
                                   torch::TensorOptions().dtype(torch::kFloat).device(device));
    VAED_RETURN_IF_ERROR(comm.Broadcast(received.latent, 0));
    received.settings = MemberSettings(*header);
    return std::optional<ReceivedJob>(std::move(received));
  });
}

Result<std::vector<RankFigures>> GatherFigures(parallel::Communicator& comm,
                                               const parallel::GroupSpec& spec,
                                               const RankFigures& mine) {
  using Out = Result<std::vector<RankFigures>>;
  return models::RunTorch("gathering the ranks' figures", [&]() -> Out {
    torch::Tensor t = torch::zeros({kFigureWords}, torch::kDouble);
    double* w = t.data_ptr<double>();
    w[0] = static_cast<double>(mine.tiles);
    w[1] = mine.decode_seconds;
    w[2] = mine.started_unix;
    w[3] = mine.finished_unix;
    w[4] = 1.0;
    VAED_ASSIGN_OR_RETURN(std::vector<torch::Tensor> all, comm.Gather(t, 0));
    std::vector<RankFigures> figures;
    for (size_t i = 0; i < all.size() && i < spec.ranks.size(); ++i) {
      const double* f = all[i].data_ptr<double>();
      figures.push_back({.rank = static_cast<uint32_t>(spec.ranks[i]),
                         .tiles = static_cast<int64_t>(f[0]),
                         .decode_seconds = f[1],
                         .started_unix = f[2],
                         .finished_unix = f[3]});
    }
    return figures;
  });
}

GroupReport MakeGroupReport(const parallel::GroupSpec& spec, uint64_t generation,
                            std::vector<RankFigures> figures) {
  GroupReport out;
  out.name = spec.name;
  out.size = spec.size;
  out.generation = generation;
  double max_s = 0, sum_s = 0;
  int working = 0;
  for (RankFigures& f : figures) {
    if (f.tiles == 0) {
      f.decode_seconds = 0;  // no tile work: its wall time was waiting
      continue;
    }
    ++working;
    max_s = std::max(max_s, f.decode_seconds);
    sum_s += f.decode_seconds;
  }
  const double mean = working == 0 ? 0 : sum_s / working;
  out.imbalance = mean > 0 ? max_s / mean : 1.0;
  out.ranks = std::move(figures);
  return out;
}

}  // namespace vaed::engine
