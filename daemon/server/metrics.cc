#include "daemon/server/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <limits>

namespace vaed::server {

namespace {

constexpr std::string_view kDecodeFamily = "vaed_decode_component_seconds";
constexpr std::string_view kRequestsFamily = "vaed_requests_total";

// Outcomes of vaed_requests_total; anything else is counted as "error".
constexpr std::array<std::string_view, 12> kOutcomes = {
    "ok",       "validation_error",   "quarantined",      "busy",
    "deadline", "resource_exhausted", "cancelled",        "client_fault",
    "error",    "oom_fallback",       "compile_fallback", "collective_fallback"};

// The gauges and counters the daemon sets, in exposition order. `label` is
// the one label key a series may carry ("" = none).
struct ScalarInfo {
  std::string_view name;
  bool counter;
  std::string_view label;
  std::string_view help;
};
constexpr std::array<ScalarInfo, 16> kScalars = {{
    {"vaed_up", false, "", "1 while the daemon serves its control socket."},
    {"vaed_healthy", false, "",
     "1 when every rank and model is usable, 0 when the daemon is degraded (e.g. after a "
     "sticky device error)."},
    {"vaed_uptime_seconds", false, "", "Seconds since the daemon started."},
    {"vaed_queue_depth", false, "", "Decode requests waiting for an executor."},
    {"vaed_in_flight", false, "", "Decode requests running now (queued ones: vaed_queue_depth)."},
    {"vaed_clients", false, "", "Connected clients (after Hello)."},
    {"vaed_quarantined_clients", false, "", "Client processes currently quarantined."},
    {"vaed_resident_weight_bytes", false, "model",
     "Bytes of model weights resident in the daemon."},
    {"vaed_plan_cache_entries", false, "model", "Compiled plans held in the plan caches."},
    {"vaed_peak_rss_bytes", false, "", "Peak resident set size of the daemon process (bytes)."},
    {"vaed_group_generation", false, "group",
     "Generation of a VAE group's communicator; it grows each time the group is rebuilt."},
    {"vaed_rank_busy_seconds_total", true, "rank", "Seconds a local rank spent decoding."},
    {"vaed_rank_tiles_total", true, "rank", "Tiles a local rank decoded."},
    {"vaed_client_faults_total", true, "",
     "Faults charged to clients (protocol violations, bad regions, memory faults, quota "
     "overruns)."},
    {"vaed_protocol_errors_total", true, "", "Malformed or unparsable control messages."},
    {"vaed_rejected_connections_total", true, "",
     "Connections refused (access control or connection limits)."},
}};

const ScalarInfo* FindScalar(std::string_view name) {
  for (const ScalarInfo& s : kScalars) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// Sample values and le bounds: the shortest text that reads back as the same
// double (Go's strconv.ParseFloat, which Prometheus uses, accepts it), and
// the spellings the format gives infinities and NaN.
void AppendNumber(std::string* out, double v) {
  if (std::isnan(v)) {
    *out += "NaN";
  } else if (std::isinf(v)) {
    *out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
    assert(ec == std::errc());
    out->append(buf, end);
  }
}

void AppendNumber(std::string* out, uint64_t v) { *out += std::to_string(v); }

// Label values escape backslash, double quote and line feed (format 0.0.4).
void AppendEscaped(std::string* out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        *out += "\\\\";
        break;
      case '"':
        *out += "\\\"";
        break;
      case '\n':
        *out += "\\n";
        break;
      default:
        *out += c;
    }
  }
}

// HELP text escapes backslash and line feed only.
void AppendHeader(std::string* out, std::string_view name, std::string_view type,
                  std::string_view help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  for (char c : help) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else {
      *out += c;
    }
  }
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

template <typename V>
void AppendSample(std::string* out, std::string_view name, const Labels& labels, V value) {
  *out += name;
  if (!labels.empty()) {
    *out += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) *out += ',';
      first = false;
      *out += k;
      *out += "=\"";
      AppendEscaped(out, v);
      *out += '"';
    }
    *out += '}';
  }
  *out += ' ';
  AppendNumber(out, value);
  *out += '\n';
}

// Prometheus' histogram_quantile() over per-bucket counts (the last one
// +Inf): the bucket holding rank q * count, linear inside it, its lower
// bound 0 for the first bucket; in +Inf, the highest finite bound.
double Quantile(double q, const std::array<uint64_t, Metrics::kBucketBounds.size() + 1>& buckets,
                uint64_t count) {
  if (count == 0) return 0;
  const double rank = q * static_cast<double>(count);
  uint64_t below = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const uint64_t cumulative = below + buckets[i];
    if (static_cast<double>(cumulative) >= rank && buckets[i] > 0) {
      if (i == Metrics::kBucketBounds.size()) return Metrics::kBucketBounds.back();
      const double lower = i == 0 ? 0.0 : Metrics::kBucketBounds[i - 1];
      const double upper = Metrics::kBucketBounds[i];
      return lower + (upper - lower) * (rank - static_cast<double>(below)) /
                         static_cast<double>(buckets[i]);
    }
    below = cumulative;
  }
  return Metrics::kBucketBounds.back();
}

}  // namespace

Metrics::Metrics(size_t max_label_sets) : max_label_sets_(std::max<size_t>(1, max_label_sets)) {}

void Metrics::ObserveDecode(const DecodeLabels& labels,
                            const std::vector<std::pair<std::string, double>>& timings) {
  DecodeKey key{labels.model, labels.profile, labels.resolution, labels.stack,
                std::to_string(labels.group_size)};
  MutexLock lock(&mu_);
  if (!decode_label_sets_.count(key) && decode_label_sets_.size() >= max_label_sets_) {
    const std::string other(kOther);
    key = DecodeKey{other, other, other, other, other};
  }
  decode_label_sets_.insert(key);
  for (const auto& [name, seconds] : timings) {
    if (!std::isfinite(seconds) || seconds < 0) continue;
    std::string component = name;
    if (!components_.count(component)) {
      if (components_.size() >= kMaxComponents) {
        component = std::string(kOther);
      }
      // "other" itself may take the 33rd place.
      components_.insert(component);
    }
    Histogram& h = histograms_[{component, key}];
    const size_t bucket = std::lower_bound(kBucketBounds.begin(), kBucketBounds.end(), seconds) -
                          kBucketBounds.begin();  // le is inclusive: seconds <= bound
    ++h.buckets[bucket];
    h.sum += seconds;
    ++h.count;
  }
  std::pair<std::string, std::string> request{"ok", labels.model};
  if (!requests_.count(request) && requests_.size() >= max_label_sets_) {
    request.second = std::string(kOther);
  }
  ++requests_[request];
}

void Metrics::CountOutcome(std::string_view model, std::string_view outcome) {
  const bool known = std::find(kOutcomes.begin(), kOutcomes.end(), outcome) != kOutcomes.end();
  assert(known && "CountOutcome: unknown outcome");
  std::pair<std::string, std::string> key{known ? std::string(outcome) : std::string("error"),
                                          std::string(model)};
  MutexLock lock(&mu_);
  if (!requests_.count(key) && requests_.size() >= max_label_sets_) {
    key.second = std::string(kOther);
  }
  ++requests_[key];
}

void Metrics::SetGauge(std::string_view name, double value, std::string_view label_key,
                       std::string_view label_value) {
  SetScalar(name, /*counter=*/false, value, label_key, label_value);
}

void Metrics::SetCounter(std::string_view name, double value, std::string_view label_key,
                         std::string_view label_value) {
  SetScalar(name, /*counter=*/true, value, label_key, label_value);
}

void Metrics::SetScalar(std::string_view name, bool counter, double value,
                        std::string_view label_key, std::string_view label_value) {
  const ScalarInfo* info = FindScalar(name);
  const bool valid = info != nullptr && info->counter == counter &&
                     (label_key.empty() || label_key == info->label);
  assert(valid && "SetGauge/SetCounter: unknown metric, wrong type or wrong label");
  if (!valid) return;
  ScalarKey key{std::string(label_key), label_key.empty() ? "" : std::string(label_value)};
  MutexLock lock(&mu_);
  std::map<ScalarKey, double>& family = scalars_[std::string(name)];
  if (!family.count(key) && family.size() >= max_label_sets_) {
    key.second = std::string(kOther);
  }
  family[key] = value;
}

std::string Metrics::Render() const {
  std::string out;
  out.reserve(4096);
  AppendHeader(&out, "vaed_build_info", "gauge",
               "Build of the running vaed; the value is always 1.");
  AppendSample(&out, "vaed_build_info", {{"version", VAED_VERSION}}, 1.0);

  MutexLock lock(&mu_);
  if (!requests_.empty()) {
    AppendHeader(&out, kRequestsFamily, "counter",
                 "Decode requests by outcome and model; fallback events (oom_fallback, "
                 "compile_fallback, collective_fallback) are counted in addition to their "
                 "request's outcome.");
    for (const auto& [key, n] : requests_) {
      AppendSample(&out, kRequestsFamily, {{"outcome", key.first}, {"model", key.second}}, n);
    }
  }

  if (!histograms_.empty()) {
    AppendHeader(&out, kDecodeFamily, "histogram",
                 "Seconds spent in each component of successful decodes (decode is the whole "
                 "request; video_vae.* and audio_vae.* are its parts).");
    const std::string bucket_name = std::string(kDecodeFamily) + "_bucket";
    const std::string sum_name = std::string(kDecodeFamily) + "_sum";
    const std::string count_name = std::string(kDecodeFamily) + "_count";
    for (const auto& [key, h] : histograms_) {
      const auto& [component, labels] = key;
      const auto& [model, profile, resolution, stack, group_size] = labels;
      Labels base = {{"component", component},   {"model", model}, {"profile", profile},
                     {"resolution", resolution}, {"stack", stack}, {"group_size", group_size}};
      Labels with_le = base;
      with_le.emplace_back("le", "");
      uint64_t cumulative = 0;
      std::string le;
      for (size_t i = 0; i < h.buckets.size(); ++i) {
        cumulative += h.buckets[i];
        le.clear();
        AppendNumber(&le, i < kBucketBounds.size() ? kBucketBounds[i]
                                                   : std::numeric_limits<double>::infinity());
        with_le.back().second = le;
        AppendSample(&out, bucket_name, with_le, cumulative);
      }
      AppendSample(&out, sum_name, base, h.sum);
      AppendSample(&out, count_name, base, h.count);
    }
  }

  for (const ScalarInfo& info : kScalars) {
    auto it = scalars_.find(std::string(info.name));
    if (it == scalars_.end() || it->second.empty()) continue;
    AppendHeader(&out, info.name, info.counter ? "counter" : "gauge", info.help);
    for (const auto& [key, value] : it->second) {
      Labels labels;
      if (!key.first.empty()) labels.emplace_back(key.first, key.second);
      AppendSample(&out, info.name, labels, value);
    }
  }
  return out;
}

std::vector<ComponentSummary> Metrics::Components() const {
  struct Merged {
    std::array<uint64_t, kBucketBounds.size() + 1> buckets{};
    double sum = 0;
    uint64_t count = 0;
  };
  std::map<std::string, Merged> merged;
  {
    MutexLock lock(&mu_);
    for (const auto& [key, h] : histograms_) {
      if (h.count == 0) continue;
      Merged& m = merged[key.first];
      for (size_t i = 0; i < h.buckets.size(); ++i) m.buckets[i] += h.buckets[i];
      m.sum += h.sum;
      m.count += h.count;
    }
  }
  std::vector<ComponentSummary> out;
  out.reserve(merged.size());
  for (const auto& [name, m] : merged) {
    ComponentSummary s;
    s.component = name;
    s.count = m.count;
    s.sum_seconds = m.sum;
    s.p50_seconds = Quantile(0.50, m.buckets, m.count);
    s.p95_seconds = Quantile(0.95, m.buckets, m.count);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::pair<std::string, uint64_t>> Metrics::Outcomes() const {
  std::map<std::string, uint64_t> sums;
  {
    MutexLock lock(&mu_);
    for (const auto& [key, n] : requests_) sums[key.first] += n;
  }
  return {sums.begin(), sums.end()};
}

}  // namespace vaed::server
