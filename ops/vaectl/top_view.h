// `vaectl top` frames: the daemon's StatusReply, and the change since the
// previous one, as a screenful of plain text. No terminal I/O here (that is
// top_command.cc), so frames are unit-tested without a daemon.
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_VAECTL_TOP_VIEW_H_
#define VAED_OPS_VAECTL_TOP_VIEW_H_

#include <string>

#include "vaed/replies.h"

namespace vaed::vaectl {

// One frame, '\n' after every line, lines clipped to `width` columns
// (width <= 0: not clipped). For example (tables have a rule of dashes under
// their header, left out here):
//
//   vaed 0.1.0  pid 4242  up 3h 12m  healthy  /run/vaed/vaed.sock
//   requests/s  1.00 (last 1.00 s)  total 5: 4 served, 1 failed
//   outcomes    ok 4, busy 1                   (zero counts left out)
//   queue       0  in flight 0  clients 1  quarantined 0
//   memory      resident weights 5.1 MiB, 0 plan-cache entries, peak RSS 224.8 MiB
//   metrics     http://127.0.0.1:9464/metrics  (or "endpoint: off")
//
//   component            count  new      p50       p95      mean    recent
//   decode                   4    1  25.0 ms  450.0 ms  104.2 ms  298.8 ms
//
//   rank   util      busy  tiles  last imbalance
//      0  29.8%  408.5 ms     12           1.05x
//
//   group  state  generation  runs  last imbalance
//   s1.b0  idle            0     4           1.05x
//
// Rates come from the difference between `previous` and `now` over
// `seconds_between` (wall seconds between the two snapshots, > 0):
// requests/s from requests_served + requests_failed, a component's "new"
// (observations since `previous`) and "recent" (their mean duration), and a
// rank's utilisation (busy_seconds gained / seconds_between, as a percent,
// at most 100 %). Without a usable `previous` (nullptr, another daemon
// process (pid), a restart (uptime went back) or seconds_between <= 0)
// the rates are averages over the daemon's uptime, labelled "since start",
// and "new"/"recent" are "-". p50/p95/mean are over the daemon's lifetime
// (StatusReply.components). Durations and sizes are human-readable
// (ops::HumanDuration, ops::HumanBytes); imbalance is max / mean rank
// decode time ("-" before any grouped run). Tables the reply has no data
// for (no components, ranks or groups) are left out.
std::string RenderTop(const client::StatusReply& now, const client::StatusReply* previous,
                      double seconds_between, int width);

// The frame shown while the daemon at `socket` cannot be reached:
//
//   vaed at /run/vaed/vaed.sock
//   daemon unavailable: <message>
//
// clipped to `width` as RenderTop.
std::string RenderTopUnavailable(const std::string& socket, const std::string& message, int width);

// Each line of `text` cut to at most `width` bytes, never inside a UTF-8
// sequence; `text` unchanged for width <= 0.
std::string ClipLines(const std::string& text, int width);

}  // namespace vaed::vaectl

#endif  // VAED_OPS_VAECTL_TOP_VIEW_H_
