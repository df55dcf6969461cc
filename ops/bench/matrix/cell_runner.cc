#include "ops/bench/matrix/cell_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "ops/common/sample_stats.h"
#include "ops/common/text_format.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace vaed::bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t CountDifferingBytes(const uint8_t* a, const uint8_t* b, uint64_t n) {
  uint64_t diff = 0;
  for (uint64_t i = 0; i < n; ++i) diff += a[i] != b[i];
  return diff;
}

}  // namespace

Status CellRunner::Run() {
  client::Client& c = daemon_->client();
  v1::DecodeReply plan;
  VAED_RETURN_IF_ERROR(PrepareRegions(c, &plan));
  AddModes(plan);
  for (ModeResult& m : cell_->modes) {
    if (m.active()) RunOnce(&m, Phase::kFirst, 0);
  }
  for (int i = 0; i < o_.warmup; ++i) {
    for (ModeResult& m : cell_->modes) {
      if (m.active()) RunOnce(&m, Phase::kWarmup, i);
    }
  }
  for (int i = 0; i < o_.iterations; ++i) {
    for (ModeResult& m : cell_->modes) {
      if (m.active()) RunOnce(&m, Phase::kTimed, i);
    }
  }
  Summarize();
  if (!daemon_->HasExited()) {
    (void)c.UnregisterRegion(in_id_);
    (void)c.UnregisterRegion(out_id_);
  }
  return Status::Ok();
}

const char* CellRunner::PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kFirst:
      return "first";
    case Phase::kWarmup:
      return "warmup";
    case Phase::kTimed:
      return "timed";
  }
  return "?";
}

std::string CellRunner::Label() const {
  return ComputeDtypeName(cell_->dtype) + " " + ShapeText(cell_->latent.shape);
}

Status CellRunner::PrepareRegions(client::Client& c, v1::DecodeReply* plan) {
  VAED_ASSIGN_OR_RETURN(
      *plan, ClientProtocol::PlanDecode(c, kModelName, DType::kFloat32, cell_->latent.shape,
                                        client::OutputFormat::kUInt8NHWC));
  cell_->output_shape.assign(plan->output_shape().begin(), plan->output_shape().end());
  cell_->output_bytes = plan->output_bytes();
  const uint64_t latent_bytes = cell_->latent.values.size() * sizeof(float);
  VAED_ASSIGN_OR_RETURN(in_, client::SharedRegion::Create(latent_bytes));
  VAED_ASSIGN_OR_RETURN(out_, client::SharedRegion::Create(plan->output_bytes()));
  VAED_ASSIGN_OR_RETURN(in_id_, c.RegisterRegion(*in_));
  VAED_ASSIGN_OR_RETURN(out_id_, c.RegisterRegion(*out_));
  std::memcpy(in_->data(), cell_->latent.values.data(), latent_bytes);
  return Status::Ok();
}

void CellRunner::AddModes(const v1::DecodeReply& plan) {
  // Eager first: its first output is the reference for every mode.
  std::vector<std::string> order = o_.modes;
  std::stable_partition(order.begin(), order.end(),
                        [](const std::string& m) { return IsBaselineMode(m); });
  // Each mode at each group size, the baseline size first: eager at it
  // is the byte reference.
  std::vector<uint32_t> sizes = o_.group_sizes;
  if (sizes.empty()) sizes.push_back(0);
  for (const std::string& name : order) {
    for (uint32_t size : sizes) {
      ModeResult m;
      m.spec = FindMode(name);
      m.group_size = size;
      m.request.group_size = size;
      m.request.model = kModelName;
      m.request.latent = {in_id_, 0, DType::kFloat32, cell_->latent.shape};
      m.request.output = {out_id_, 0, FromProto(plan.output_dtype()), cell_->output_shape};
      m.request.format = client::OutputFormat::kUInt8NHWC;
      m.request.profile = m.spec->profile;
      m.request.stack_tiling = m.spec->stack_tiling;
      m.request.compile = m.spec->compile;
      CheckSupported(&m);
      cell_->modes.push_back(std::move(m));
    }
  }
}

void CellRunner::CheckSupported(ModeResult* m) {
  std::vector<std::string> missing;
  std::vector<std::string> required = RequiredCapabilities(*m->spec);
  if (m->group_size > 1) required.push_back("spatial_sharding");
  for (const std::string& cap : required) {
    if (std::find(caps_.begin(), caps_.end(), cap) == caps_.end()) missing.push_back(cap);
  }
  auto planned = ClientProtocol::PlanDecode(daemon_->client(), m->request);
  if (planned.ok()) {
    if (!missing.empty()) {
      spdlog::warn("{}: mode {}: the model lacks capability {} but the daemon accepts it", Label(),
                   m->name(), ops::Join(missing, ", "));
    }
    return;
  }
  if (planned.status().code() == StatusCode::kInvalidArgument) {
    m->state = ModeState::kUnsupported;
    m->reason = planned.status().message();
    if (!missing.empty()) {
      m->reason += " [model capabilities lack: " + ops::Join(missing, ", ") + "]";
    }
    spdlog::info("{}: mode {} unsupported: {}", Label(), m->name(), m->reason);
    return;
  }
  m->state = ModeState::kFailed;
  m->reason = "plan: " + planned.status().ToString();
}

void CellRunner::RunOnce(ModeResult* m, Phase phase, int index) {
  // A mode that writes nothing must not pass the equality check on the
  // previous mode's bytes.
  std::memset(out_->data(), 0, out_->size());
  const auto start = Clock::now();
  auto reply = ClientProtocol::Decode(daemon_->client(), m->request);
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (!reply.ok()) {
    if (phase == Phase::kFirst && reply.status().code() == StatusCode::kInvalidArgument) {
      m->state = ModeState::kUnsupported;
      m->reason = reply.status().message();
      spdlog::info("{}: mode {} unsupported: {}", Label(), m->name(), m->reason);
    } else {
      m->state = ModeState::kFailed;
      m->reason = std::string(PhaseName(phase)) + " request: " + reply.status().ToString();
      spdlog::error("{}: mode {} failed: {}", Label(), m->name(), m->reason);
      (void)daemon_->HasExited();
    }
    return;
  }
  const v1::DecodeReply& r = *reply;
  if (phase == Phase::kFirst) {
    m->first_request_s = wall;
    m->first_request_warm = r.warm();
  }
  std::optional<double> vae;
  for (const auto& t : r.timings()) {
    if (t.component() == VaeComponent(o_.model_kind)) vae = t.seconds();
    if (phase == Phase::kTimed) m->timing_s[t.component()].push_back(t.seconds());
  }
  if (phase == Phase::kTimed) m->wall_s.push_back(wall);
  m->peak_tensor_bytes = std::max<uint64_t>(m->peak_tensor_bytes, r.peak_tensor_bytes());
  m->peak_rss_bytes = std::max<uint64_t>(m->peak_rss_bytes, r.peak_rss_bytes());
  if (r.has_tiling()) m->tiling = r.tiling();
  m->compile_decision = r.compile_decision();
  m->profile = r.profile();
  m->compute_dtype = r.compute_dtype();
  if (r.has_group()) RecordGroup(r.group(), phase, m);
  CompareOutput(m, phase);
  LogProgress(*m, r, phase, index, wall, vae);
}

void CellRunner::CompareOutput(ModeResult* m, Phase phase) {
  const uint8_t* out = out_->data();
  const uint64_t n = cell_->output_bytes;
  if (!reference_.empty()) {
    const uint64_t diff = CountDifferingBytes(out, reference_.data(), n);
    m->max_bytes_differing = std::max(m->max_bytes_differing, diff);
    ++m->runs_compared;
  } else if (m->spec->baseline && phase == Phase::kFirst) {
    reference_.assign(out, out + n);
  }
}

void CellRunner::LogProgress(const ModeResult& m, const v1::DecodeReply& r, Phase phase, int index,
                             double wall, std::optional<double> vae) const {
  std::string progress = Label() + " [" + PhaseName(phase);
  if (phase != Phase::kFirst) {
    progress += " " + std::to_string(index + 1) + "/" +
                std::to_string(phase == Phase::kWarmup ? o_.warmup : o_.iterations);
  }
  progress += "] " + m.name() + ": " + ops::FormatFixed(wall, 3) + " s";
  if (vae) progress += " (vae " + ops::FormatFixed(*vae, 3) + " s)";
  if (m.group_size > 0 && r.has_group()) {
    progress +=
        " group " + r.group().name() + " imbalance " + ops::FormatFixed(r.group().imbalance(), 2);
  }
  if (phase == Phase::kFirst) progress += r.warm() ? " warm" : " cold";
  spdlog::info("{}", progress);
}

void CellRunner::RecordGroup(const v1::GroupReport& g, Phase phase, ModeResult* m) {
  m->groups_used[g.name()] = g.generation();
  if (m->rank_stats.size() < static_cast<size_t>(g.ranks_size())) {
    m->rank_stats.resize(g.ranks_size());
  }
  for (int i = 0; i < g.ranks_size(); ++i) {
    RankStats& stats = m->rank_stats[i];
    stats.rank = g.ranks(i).rank();
    stats.tiles = g.ranks(i).tiles();
    if (phase == Phase::kTimed) stats.decode_s.push_back(g.ranks(i).decode_seconds());
  }
  if (phase == Phase::kTimed) m->imbalance.push_back(g.imbalance());
  if (!g.fallback().empty()) {
    ++m->fallbacks;
    m->last_fallback = g.fallback();
  }
}

void CellRunner::Summarize() {
  const std::string vae = VaeComponent(o_.model_kind);
  for (ModeResult& m : cell_->modes) {
    if (m.measured()) m.vae_median_s = m.TimingMedian(vae);
  }
  for (ModeResult& m : cell_->modes) {
    if (!m.measured()) continue;
    // Against eager at the same group size, and against the same mode at
    // the baseline group size.
    const ModeResult* eager = nullptr;
    const ModeResult* baseline = nullptr;
    for (const ModeResult& other : cell_->modes) {
      if (!other.measured()) continue;
      if (other.spec->baseline && other.group_size == m.group_size) {
        eager = &other;
      }
      if (!o_.group_sizes.empty() && other.spec == m.spec &&
          other.group_size == o_.group_sizes.front()) {
        baseline = &other;
      }
    }
    if (eager != nullptr) {
      if (eager->vae_median_s && m.vae_median_s && *m.vae_median_s > 0) {
        m.vae_speedup = *eager->vae_median_s / *m.vae_median_s;
      }
      m.wall_speedup = ops::Median(eager->wall_s) / ops::Median(m.wall_s);
    }
    if (baseline != nullptr) {
      if (baseline->vae_median_s && m.vae_median_s && *m.vae_median_s > 0) {
        m.group_vae_speedup = *baseline->vae_median_s / *m.vae_median_s;
      }
      m.group_wall_speedup = ops::Median(baseline->wall_s) / ops::Median(m.wall_s);
    }
  }
}

}  // namespace vaed::bench
