// Which output frames are final while an H3 video decodes (for
// streamed output): the frames no later temporal window touches, so that a
// client may read or encode them before the whole decode ends.
//
// From the official temporal assembly (spec §2.2; video_tiling.h): window
// k's 17 main frames land at output frames [17k, 17k + 17), the first 5 of
// them cross-faded with window k-1's look-ahead tail; its own 5-frame tail
// is blended into window k+1's first main frames, or appended after the
// last window. So once window k is assembled, frames [0, 17(k+1)) are final
// (the start of window k+1's cross-fade), and after the last window every
// output frame is. Frames cut as padding at the end never appear.
//
// Units: pixel frames of the output (after the pad frames are cut), half
// open. Thread-safety: pure functions.
#ifndef VAED_DAEMON_MODELS_H3_FINAL_FRAMES_H_
#define VAED_DAEMON_MODELS_H3_FINAL_FRAMES_H_

#include <cstdint>

#include "daemon/models/h3/video_tiling.h"

namespace vaed::models::h3 {

// The end (exclusive) of the output frames final once window `window` of
// `plan` is assembled: min(plan.windows[window + 1].main_out_begin,
// plan.output_pixel_frames) before the last window, output_pixel_frames
// after it. Monotonic in `window`. Precondition: 0 <= window <
// plan.num_windows().
int64_t FinalPixelFramesAfterWindow(const TemporalPlan& plan, int64_t window);

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_FINAL_FRAMES_H_
