#include "daemon/models/h3/final_frames.h"

#include <algorithm>

namespace vaed::models::h3 {

int64_t FinalPixelFramesAfterWindow(const TemporalPlan& plan, int64_t window) {
  if (window + 1 >= plan.num_windows()) return plan.output_pixel_frames;
  // The next window cross-fades its first frames over these, from here on.
  const int64_t next_crossfade = plan.windows[static_cast<size_t>(window + 1)].main_out_begin;
  return std::min(next_crossfade, plan.output_pixel_frames);
}

}  // namespace vaed::models::h3
