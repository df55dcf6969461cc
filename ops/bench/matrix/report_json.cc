#include "ops/bench/matrix/report_json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ops/common/sample_stats.h"

namespace vaed::bench {
namespace {

using ops::Median;

nlohmann::json OptJson(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The "group" object of a measured (mode, group size): size, groups_used
// {name: last generation}, ranks [{rank, tiles, decode_s_median,
// decode_s_runs}] per position in the group (output rank first),
// imbalance_median / imbalance_runs (max / mean), tile_communication_median_s,
// baseline_size, vae_ / wall_speedup_vs_baseline_size, output_reference,
// output_identical_to_reference, fallbacks, last_fallback. Seconds.
nlohmann::json GroupJson(const MatrixOptions& o, const ModeResult& m) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankStats& r : m.rank_stats) {
    ranks.push_back({{"rank", r.rank},
                     {"tiles", r.tiles},
                     {"decode_s_median", OptJson(RankDecodeMedian(r))},
                     {"decode_s_runs", r.decode_s}});
  }
  return {
      {"size", m.group_size},
      {"groups_used", m.groups_used},
      {"ranks", ranks},
      {"imbalance_median",
       m.imbalance.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(m.imbalance))},
      {"imbalance_runs", m.imbalance},
      {"tile_communication_median_s", OptJson(m.TimingMedian("video_vae.tile_communication"))},
      {"baseline_size", o.group_sizes.front()},
      {"vae_speedup_vs_baseline_size", OptJson(m.group_vae_speedup)},
      {"wall_speedup_vs_baseline_size", OptJson(m.group_wall_speedup)},
      {"output_reference", ReferenceName(o)},
      {"output_identical_to_reference",
       m.runs_compared > 0 ? nlohmann::json(m.max_bytes_differing == 0) : nlohmann::json(nullptr)},
      {"fallbacks", m.fallbacks},
      {"last_fallback",
       m.last_fallback.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.last_fallback)},
  };
}

nlohmann::json TilingJson(const std::optional<v1::TilingInfo>& tiling) {
  if (!tiling) return nullptr;
  return {{"tile_rows", tiling->tile_rows()},
          {"tile_cols", tiling->tile_cols()},
          {"windows", tiling->windows()},
          {"decoder_calls", tiling->decoder_calls()},
          {"max_tiles_per_call", tiling->max_tiles_per_call()},
          {"stacked", tiling->stacked()},
          {"stack_decision", tiling->stack_decision()},
          {"plan_decision", tiling->plan_decision()},
          {"planned_calls", tiling->planned_calls()},
          {"eager_calls", tiling->eager_calls()}};
}

// What a measured mode adds to its run object.
void AddMeasurements(const MatrixOptions& o, const ModeResult& m, nlohmann::json* j) {
  nlohmann::json components = nlohmann::json::object();
  for (const auto& [name, seconds] : m.timing_s) components[name] = Median(seconds);
  (*j)["first_request_s"] = OptJson(m.first_request_s);
  (*j)["first_request_warm"] = m.first_request_warm;
  (*j)["warm_wall_s"] = {{"median", Median(m.wall_s)},
                         {"min", *std::min_element(m.wall_s.begin(), m.wall_s.end())},
                         {"runs", m.wall_s}};
  (*j)["timings_median_s"] = components;
  (*j)["vae_component"] = VaeComponent(o.model_kind);
  (*j)["vae_median_s"] = OptJson(m.vae_median_s);
  (*j)["vae_speedup_vs_eager"] = OptJson(m.vae_speedup);
  (*j)["wall_speedup_vs_eager"] = OptJson(m.wall_speedup);
  (*j)["peak_tensor_bytes"] = m.peak_tensor_bytes;
  (*j)["peak_rss_bytes"] = m.peak_rss_bytes;
  (*j)["profile"] = m.profile;
  (*j)["compute_dtype"] = m.compute_dtype;
  (*j)["compile_decision"] = m.compile_decision;
  (*j)["tiling"] = TilingJson(m.tiling);
  (*j)["output_runs_compared"] = m.runs_compared;
  (*j)["output_bytes_differing_from_eager"] =
      m.runs_compared > 0 ? nlohmann::json(m.max_bytes_differing) : nlohmann::json(nullptr);
  (*j)["output_identical_to_eager"] =
      m.runs_compared > 0 ? nlohmann::json(m.max_bytes_differing == 0) : nlohmann::json(nullptr);
  if (!o.group_sizes.empty()) (*j)["group"] = GroupJson(o, m);
}

nlohmann::json ModeJson(const MatrixOptions& o, const CellResult& cell, const ModeResult& m) {
  nlohmann::json j = {
      {"dtype", ComputeDtypeName(cell.dtype)},
      {"latent_shape", cell.latent.shape},
      {"latent_source", cell.latent.source},
      {"output_shape", cell.output_shape},
      {"output_bytes", cell.output_bytes},
      {"mode", m.spec->name},
      {"request",
       {{"profile", m.spec->profile},
        {"stack_tiling", StackTilingName(m.spec->stack_tiling)},
        {"compile", CompileName(m.spec->compile)}}},
      {"status", StateName(m.state)},
      {"reason", m.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.reason)},
  };
  if (!o.group_sizes.empty()) j["request"]["group_size"] = m.group_size;
  if (m.measured()) AddMeasurements(o, m, &j);
  return j;
}

nlohmann::json SettingsJson(const MatrixOptions& o) {
  nlohmann::json settings = {
      {"warmup", o.warmup}, {"iterations", o.iterations}, {"seed", o.seed},
      {"modes", o.modes},   {"vae_shares", o.vae_shares}, {"output_format", "uint8_nhwc"}};
  if (o.group_ranks > 0 || !o.group_sizes.empty()) {
    settings["group_ranks"] = std::max<uint32_t>(o.group_ranks, 1);
    settings["group_sizes"] = o.group_sizes;
  }
  return settings;
}

}  // namespace

nlohmann::json MatrixRunToJson(const MatrixOptions& o, const MatrixRun& run) {
  nlohmann::json runs = nlohmann::json::array();
  nlohmann::json amdahl = nlohmann::json::array();
  for (const CellResult& cell : run.cells) {
    if (!cell.error.empty()) {
      runs.push_back({{"dtype", ComputeDtypeName(cell.dtype)},
                      {"latent_shape", cell.latent.shape},
                      {"latent_source", cell.latent.source},
                      {"status", "failed"},
                      {"reason", cell.error}});
      continue;
    }
    for (const ModeResult& m : cell.modes) {
      runs.push_back(ModeJson(o, cell, m));
      if (!m.vae_speedup) continue;
      for (double s : o.vae_shares) {
        amdahl.push_back({{"dtype", ComputeDtypeName(cell.dtype)},
                          {"latent_shape", cell.latent.shape},
                          {"mode", m.name()},
                          {"vae_share", s},
                          {"vae_speedup", *m.vae_speedup},
                          {"end_to_end_speedup", EndToEndSpeedup(s, *m.vae_speedup)}});
      }
    }
  }
  nlohmann::json cold_start = nlohmann::json::object();
  for (const auto& [dtype, seconds] : run.cold_start_s) {
    cold_start[ComputeDtypeName(dtype)] = OptJson(seconds);
  }
  return {
      {"machine",
       {{"threads", o.threads}, {"hostname", run.hostname}, {"hardware_concurrency", run.cpus}}},
      {"daemon", {{"binary", o.vaed_binary}, {"version", run.daemon_version}}},
      {"model",
       {{"kind", ModelKindName(o.model_kind)},
        {"weights", o.weights},
        {"config", o.config},
        {"plan_cache_capacity", o.plan_cache_capacity}}},
      {"settings", SettingsJson(o)},
      {"cold_start_s", cold_start},
      {"runs", runs},
      {"amdahl", amdahl},
  };
}

Status WriteJsonFile(const std::string& path, const nlohmann::json& doc) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path);
  out << doc.dump(2) << "\n";
  if (!out) return IoError("writing " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace vaed::bench
