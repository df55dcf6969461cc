// `vaectl plan`: what a decode of a latent shape would produce, without
// decoding (without it the tile grid is visible only in a decode's reply).
// Asks the daemon (Client::PlanDecode, a plan-only Decode) and prints the
// output sizes, a tiled model's tile grid and temporal windows, and the
// audio output for an audio latent shape.
#ifndef VAED_OPS_VAECTL_PLAN_COMMAND_H_
#define VAED_OPS_VAECTL_PLAN_COMMAND_H_

#include <nlohmann/json.hpp>
#include <string>

#include "ops/vaectl/commands.h"
#include "vaed/replies.h"

namespace vaed::vaectl {

struct PlanCommandOptions {
  std::string shape;        // video latent shape "1,24,33,96,168" (float32); "" = none
  std::string audio_shape;  // audio latent shape "2,32,150" (float32); "" = none
  std::string model;        // "" = the daemon's default model
  double fps = 0;           // 0 = the model's
  bool independent_lengths = false;
  client::LatentSpace latent_space = client::LatentSpace::kNormalized;
};

// Connects, plans and prints (text or --json). Exit codes as commands.h:
// kExitFailure for a bad shape (before connecting) or a refused plan.
int RunPlan(const GlobalOptions& global, const PlanCommandOptions& options);

// The text report of a plan-only reply:
//   model        h3 (float32)
//   latent       float32 [1, 24, 33, 96, 168]
//   output       111 frames, 2688x1536 px (WxH), uint8 NHWC RGB, 1.3 GiB
//   tiles        4x4 tiles per window x 7 temporal windows = 112 tiles
//   audio        ...
std::string FormatPlan(const client::DecodeReply& plan);
// The same as one JSON object: model, compute_dtype, latent_shape,
// output_shape, output_bytes, frames, width_px, height_px, tiling
// ({tile_rows, tile_cols, windows, tiles} or null), audio (or null).
nlohmann::json PlanToJson(const client::DecodeReply& plan);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_PLAN_COMMAND_H_
