#include "ops/vaectl/progress_format.h"

#include <algorithm>
#include <cstdio>

#include "ops/common/text_format.h"

namespace vaed::vaectl {
namespace {

// "video window 2/4 (8/16 tiles)", "video frames 4/16", "audio".
std::string ProgressWhat(const client::Progress& p) {
  std::string what = p.stage;
  if (p.unit != "audio") {
    what += " " + p.unit + " " + std::to_string(p.done) + "/" + std::to_string(p.total);
  }
  if (p.tiles_total > 0) {
    what += " (" + std::to_string(p.tiles_done) + "/" + std::to_string(p.tiles_total) + " tiles)";
  }
  return what;
}

std::string ProgressTimes(const client::Progress& p) {
  std::string out = ops::HumanDuration(p.elapsed_seconds) + " elapsed";
  if (p.fraction < 1.0) out += ", ETA " + ops::HumanDuration(p.eta_seconds);
  return out;
}

int Percent(const client::Progress& p) {
  return static_cast<int>(std::clamp(p.fraction, 0.0, 1.0) * 100.0 + 1e-9);
}

}  // namespace

const ops::EnumNames<ProgressChoice>& ProgressChoiceNames() {
  static const ops::EnumNames<ProgressChoice> kNames = {{"auto", ProgressChoice::kAuto},
                                                   {"bar", ProgressChoice::kBar},
                                                   {"lines", ProgressChoice::kLines},
                                                   {"none", ProgressChoice::kNone}};
  return kNames;
}

ProgressMode ResolveProgressMode(ProgressChoice choice, bool stderr_is_tty, bool json) {
  switch (choice) {
    case ProgressChoice::kAuto:
      return stderr_is_tty && !json ? ProgressMode::kBar : ProgressMode::kNone;
    case ProgressChoice::kBar:
      return ProgressMode::kBar;
    case ProgressChoice::kLines:
      return ProgressMode::kLines;
    case ProgressChoice::kNone:
      return ProgressMode::kNone;
  }
  return ProgressMode::kNone;
}

std::string FormatProgressLine(const client::Progress& p) {
  char pct[8];
  std::snprintf(pct, sizeof(pct), "%3d%%", Percent(p));
  return std::string("progress ") + pct + "  " + ProgressWhat(p) + "  " + ProgressTimes(p);
}

std::string FormatProgressBar(const client::Progress& p, int width) {
  width = std::max(width, 1);
  const int filled = static_cast<int>(std::clamp(p.fraction, 0.0, 1.0) * width + 1e-9);
  char pct[8];
  std::snprintf(pct, sizeof(pct), "%3d%%", Percent(p));
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '-') + "] " + pct + " " +
         ProgressWhat(p) + "  " + ProgressTimes(p);
}

}  // namespace vaed::vaectl
