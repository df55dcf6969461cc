#include "ops/vaectl/top_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "ops/common/text_format.h"
#include "ops/vaectl/status_report.h"

namespace vaed::vaectl {
namespace {

uint64_t Requests(const client::StatusReply& s) { return s.requests_served + s.requests_failed; }

// Whether `previous` is an earlier snapshot of the same daemon process, so
// that differences of its lifetime counters are rates.
bool UsableBaseline(const client::StatusReply& now, const client::StatusReply* previous,
                    double seconds_between) {
  return previous != nullptr && seconds_between > 0 && std::isfinite(seconds_between) &&
         previous->pid == now.pid && previous->uptime_seconds <= now.uptime_seconds &&
         Requests(*previous) <= Requests(now);
}

std::string Percent(double fraction) {
  if (!std::isfinite(fraction) || fraction < 0) return "-";
  // busy_seconds is credited when a rank's work finishes, so one interval
  // can receive more than its length; clamp rather than show 300 %.
  return ops::FormatFixed(std::min(fraction, 1.0) * 100.0, 1) + "%";
}

}  // namespace

std::string ClipLines(const std::string& text, int width) {
  if (width <= 0) return text;
  const auto limit = static_cast<size_t>(width);
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool has_newline = end != std::string::npos;
    if (!has_newline) end = text.size();
    size_t cut = std::min(end, start + limit);
    // Back up over UTF-8 continuation bytes so no character is split.
    if (cut < end) {
      while (cut > start && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    }
    out.append(text, start, cut - start);
    if (has_newline) out += '\n';
    start = end + 1;
  }
  return out;
}

std::string RenderTop(const client::StatusReply& now, const client::StatusReply* previous,
                      double seconds_between, int width) {
  const bool live = UsableBaseline(now, previous, seconds_between);
  // The span rates are taken over, and what to call it.
  const double span = live ? seconds_between : now.uptime_seconds;
  const std::string basis =
      live ? "last " + ops::HumanDuration(seconds_between) : std::string("since start");

  std::ostringstream out;
  out << "vaed " << now.daemon_version << "  pid " << now.pid << "  up "
      << ops::HumanDuration(now.uptime_seconds) << "  "
      << (now.healthy ? std::string("healthy")
                      : "UNHEALTHY" + (now.health.empty() ? "" : ": " + now.health))
      << "  " << now.socket << "\n";

  const uint64_t requests = Requests(now);
  const uint64_t new_requests = live ? requests - Requests(*previous) : requests;
  const std::string rate =
      span > 0 ? ops::FormatFixed(static_cast<double>(new_requests) / span, 2) : "-";
  ops::TextTable summary(std::vector<std::string>{});
  summary.AddRow({"requests/s", rate + " (" + basis + ")  total " + std::to_string(requests) +
                                    ": " + std::to_string(now.requests_served) + " served, " +
                                    std::to_string(now.requests_failed) + " failed"});
  summary.AddRow({"outcomes", FormatOutcomes(now)});
  summary.AddRow({"queue", std::to_string(now.queue_depth) + "  in flight " +
                               std::to_string(now.in_flight) + "  clients " +
                               std::to_string(now.clients) + "  quarantined " +
                               std::to_string(now.quarantined.size())});
  summary.AddRow({"memory", "resident weights " + ops::HumanBytes(now.resident_weight_bytes) +
                                ", " + std::to_string(now.plan_cache_entries) +
                                " plan-cache entries, peak RSS " +
                                ops::HumanBytes(now.peak_rss_bytes)});
  summary.AddRow(
      {"metrics", now.metrics_url.empty() ? std::string("endpoint: off") : now.metrics_url});
  out << summary.Render();

  if (!now.components.empty()) {
    std::map<std::string, const client::ComponentStats*> before;
    if (live) {
      for (const auto& c : previous->components) before[c.component] = &c;
    }
    ops::TextTable t({"component", "count", "new", "p50", "p95", "mean", "recent"},
                     {false, true, true, true, true, true, true});
    for (const auto& c : now.components) {
      std::string fresh = "-", recent = "-";
      if (live) {
        const auto it = before.find(c.component);
        const uint64_t count_before = it == before.end() ? 0 : it->second->count;
        const double sum_before = it == before.end() ? 0.0 : it->second->sum_seconds;
        if (c.count >= count_before) {
          const uint64_t added = c.count - count_before;
          fresh = std::to_string(added);
          if (added > 0) {
            recent = ops::HumanDuration((c.sum_seconds - sum_before) / static_cast<double>(added));
          }
        }
      }
      const double mean = c.count > 0 ? c.sum_seconds / static_cast<double>(c.count) : -1.0;
      t.AddRow({c.component, std::to_string(c.count), fresh, ops::HumanDuration(c.p50_seconds),
                ops::HumanDuration(c.p95_seconds), ops::HumanDuration(mean), recent});
    }
    out << "\n" << t.Render();
  }

  if (!now.rank_status.empty()) {
    std::map<uint32_t, double> busy_before;
    if (live) {
      for (const auto& r : previous->rank_status) busy_before[r.rank] = r.busy_seconds;
    }
    ops::TextTable t({"rank", "util", "busy", "tiles", "last imbalance"},
                     {true, true, true, true, true});
    for (const auto& r : now.rank_status) {
      const auto it = busy_before.find(r.rank);
      const double gained = r.busy_seconds - (it == busy_before.end() ? 0.0 : it->second);
      t.AddRow({std::to_string(r.rank), span > 0 ? Percent(gained / span) : "-",
                ops::HumanDuration(r.busy_seconds), std::to_string(r.tiles),
                FormatImbalance(r.last_imbalance)});
    }
    out << "\n" << t.Render();
  }

  if (!now.groups.empty()) {
    ops::TextTable t({"group", "state", "generation", "runs", "last imbalance"},
                     {false, false, true, true, true});
    for (const auto& g : now.groups) {
      t.AddRow({g.name, g.state, std::to_string(g.generation), std::to_string(g.runs),
                FormatImbalance(g.last_imbalance)});
    }
    out << "\n" << t.Render();
  }
  return ClipLines(out.str(), width);
}

std::string RenderTopUnavailable(const std::string& socket, const std::string& message, int width) {
  return ClipLines("vaed at " + socket + "\ndaemon unavailable: " + message + "\n", width);
}

}  // namespace vaed::vaectl
