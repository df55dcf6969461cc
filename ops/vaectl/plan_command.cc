#include "ops/vaectl/plan_command.h"

#include <iostream>
#include <sstream>
#include <vector>

#include "ops/common/random_latent.h"
#include "ops/common/text_format.h"
#include "ops/vaectl/connect.h"
#include "vaed/client.h"
#include "vaed/tensor_ref.h"

namespace vaed::vaectl {
namespace {

Result<client::DecodeRequest> PlanRequest(const PlanCommandOptions& options) {
  if (options.shape.empty() && options.audio_shape.empty()) {
    return InvalidArgument(
        "no latent shape given: --shape N,C,... (video) and/or --audio-shape C,32,T (audio)");
  }
  client::DecodeRequest request;
  request.model = options.model;
  request.format = client::OutputFormat::kUInt8NHWC;
  request.fps = options.fps;
  request.independent_lengths = options.independent_lengths;
  request.latent_space = options.latent_space;
  if (!options.shape.empty()) {
    Result<std::vector<int64_t>> shape = ops::ParseShape(options.shape);
    if (!shape.ok()) return shape.status().WithContext("--shape");
    request.latent = {0, 0, DType::kFloat32, *shape};
  }
  if (!options.audio_shape.empty()) {
    Result<std::vector<int64_t>> shape = ops::ParseShape(options.audio_shape);
    if (!shape.ok()) return shape.status().WithContext("--audio-shape");
    request.audio_latent = {0, 0, DType::kFloat32, *shape};
  }
  return request;
}

}  // namespace

std::string FormatPlan(const client::DecodeReply& plan) {
  std::ostringstream out;
  out << "model        " << plan.model << " (" << plan.compute_dtype << ")\n";
  if (!plan.latent_shape.empty()) {
    out << "latent       " << DTypeName(plan.latent_dtype) << " "
        << ShapeToString(plan.latent_shape) << "\n"
        << "output       " << plan.frames << (plan.frames == 1 ? " frame, " : " frames, ")
        << plan.width_px << "x" << plan.height_px << " px (WxH), uint8 NHWC RGB "
        << ShapeToString(plan.output_shape) << ", " << ops::HumanBytes(plan.output_bytes) << "\n";
  }
  if (plan.tiling) {
    const client::TilingInfo& t = *plan.tiling;
    const uint64_t tiles = uint64_t{t.tile_rows} * t.tile_cols * t.windows;
    out << "tiles        " << t.tile_rows << "x" << t.tile_cols << " tiles per window x "
        << t.windows << (t.windows == 1 ? " temporal window" : " temporal windows") << " = "
        << tiles << (tiles == 1 ? " tile\n" : " tiles\n");
  } else if (!plan.latent_shape.empty()) {
    out << "tiles        none (the model decodes untiled)\n";
  }
  if (plan.audio) {
    const client::AudioInfo& a = *plan.audio;
    out << "audio        " << ShapeToString(a.latent_shape) << " -> " << a.channels
        << (a.channels == 1 ? " channel, " : " channels, ") << a.samples << " samples at "
        << a.sample_rate_hz << " Hz = " << ops::FormatFixed(a.seconds, 3) << " s, float32 planar "
        << ShapeToString(a.output_shape) << "\n";
  }
  return out.str();
}

nlohmann::json PlanToJson(const client::DecodeReply& plan) {
  nlohmann::json j = {{"model", plan.model}, {"compute_dtype", plan.compute_dtype}};
  if (!plan.latent_shape.empty()) {
    j["latent_shape"] = plan.latent_shape;
    j["output_shape"] = plan.output_shape;
    j["output_bytes"] = plan.output_bytes;
    j["frames"] = plan.frames;
    j["width_px"] = plan.width_px;
    j["height_px"] = plan.height_px;
  }
  j["tiling"] = nullptr;
  if (plan.tiling) {
    const client::TilingInfo& t = *plan.tiling;
    j["tiling"] = {{"tile_rows", t.tile_rows},
                   {"tile_cols", t.tile_cols},
                   {"windows", t.windows},
                   {"tiles", uint64_t{t.tile_rows} * t.tile_cols * t.windows}};
  }
  j["audio"] = nullptr;
  if (plan.audio) {
    const client::AudioInfo& a = *plan.audio;
    j["audio"] = {{"latent_shape", a.latent_shape},
                  {"output_shape", a.output_shape},
                  {"channels", a.channels},
                  {"samples", a.samples},
                  {"sample_rate_hz", a.sample_rate_hz},
                  {"seconds", a.seconds}};
  }
  return j;
}

int RunPlan(const GlobalOptions& global, const PlanCommandOptions& options) {
  Result<client::DecodeRequest> request = PlanRequest(options);
  if (!request.ok()) return ReportFailure("plan", request.status());
  int exit_code = kExitOk;
  auto client = ConnectOrExplain(global, &exit_code);
  if (client == nullptr) return exit_code;
  auto plan = client->PlanDecode(*request);
  if (!plan.ok()) return ReportFailure("plan", plan.status());
  if (global.json) {
    std::cout << PlanToJson(*plan).dump(2) << "\n";
  } else {
    std::cout << FormatPlan(*plan);
  }
  return kExitOk;
}

}  // namespace vaed::vaectl
