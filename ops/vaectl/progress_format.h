// How `vaectl decode --progress` shows the daemon's Progress messages on
// stderr: one line per message, or a bar redrawn in place.
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_VAECTL_PROGRESS_FORMAT_H_
#define VAED_OPS_VAECTL_PROGRESS_FORMAT_H_

#include <string>

#include "ops/common/enum_names.h"
#include "vaed/replies.h"

namespace vaed::vaectl {

// `vaectl decode --progress`: how Progress messages are shown (on stderr).
enum class ProgressMode { kNone, kBar, kLines };
// What --progress asks for: kAuto (a bar when stderr is a terminal and the
// report is not --json, else none) or one ProgressMode.
enum class ProgressChoice { kAuto, kBar, kLines, kNone };
// The names of --progress: auto, bar, lines, none.
const ops::EnumNames<ProgressChoice>& ProgressChoiceNames();
// The mode `choice` means where stderr is (not) a terminal and the report is
// (not) --json.
ProgressMode ResolveProgressMode(ProgressChoice choice, bool stderr_is_tty, bool json);
// One progress line, e.g. "progress  50%  video window 2/4 (8/16 tiles)
// elapsed 1.2 s, ETA 1.2 s".
std::string FormatProgressLine(const client::Progress& p);
// A terminal progress bar `width` cells wide, without the leading '\r':
// "[##########----------]  50% video window 2/4  1.2 s elapsed, ETA 1.2 s".
std::string FormatProgressBar(const client::Progress& p, int width);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_PROGRESS_FORMAT_H_
