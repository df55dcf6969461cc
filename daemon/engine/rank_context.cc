#include "daemon/engine/rank_context.h"

#include <algorithm>

namespace vaed::engine {

RankWork WorkOf(const models::DecodeReport& report, double started_unix, double finished_unix) {
  // The tile decode itself when the model reports it: waiting in
  // collectives is not work.
  double seconds = report.timings.Get("video_vae.tile_decode");
  if (seconds <= 0) seconds = report.timings.Get("taef2.tiles");
  if (seconds <= 0) seconds = std::max(0.0, finished_unix - started_unix);
  return {.seconds = seconds, .tiles = std::max<int64_t>(0, report.tiling.tiles_decoded_here)};
}

}  // namespace vaed::engine
