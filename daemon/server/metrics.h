// The daemon's metrics registry: decode timings as histograms, request
// outcomes as counters, and gauges/counters the daemon refreshes, rendered in
// the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
// Families (metric names in Prometheus style; units in the name):
//   vaed_decode_component_seconds   histogram {component, model, profile,
//                                   resolution, stack, group_size}
//   vaed_requests_total             counter   {outcome, model}
//   vaed_build_info                 gauge 1   {version}
//   the gauges and counters listed at SetGauge() / SetCounter().
//
// Cardinality is bounded whatever clients send: label sets past
// `max_label_sets` per family fold into "other" (see Metrics()), at most 32
// distinct components are kept, and outcomes are a closed set.
//
// Thread-safety: every method may be called from any thread; one mutex
// guards the registry. Observations are O(labels) map look-ups, cheap next
// to a decode.
#ifndef VAED_DAEMON_SERVER_METRICS_H_
#define VAED_DAEMON_SERVER_METRICS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "vaed/mutex.h"

namespace vaed::server {

// Labels of one decode. Every value must come from a bounded set (configured
// model names, profile names, shape buckets, stack modes); the registry
// folds excess label sets into "other" anyway.
struct DecodeLabels {
  std::string model;       // configured model name
  std::string profile;     // safe | optimized | diagnostic | student
  std::string resolution;  // "<height_px>x<width_px>" of the output frames; "audio" for audio-only
  std::string stack;       // "sequential" | "stacked" | "untiled"
  uint32_t group_size = 1;
};

// One decode component over every label set (for `vaectl top` and status).
struct ComponentSummary {
  std::string component;
  uint64_t count = 0;
  double sum_seconds = 0;
  // Estimated from the histogram buckets as Prometheus histogram_quantile()
  // does (linear interpolation inside the bucket holding the rank; the
  // highest finite bound when the rank falls in +Inf).
  double p50_seconds = 0;
  double p95_seconds = 0;
};

class Metrics {
 public:
  // Upper bounds (seconds) of vaed_decode_component_seconds' finite buckets,
  // 1 ms .. 600 s in 1-2.5-5 steps; +Inf follows.
  // Sub-millisecond buckets too: copy-in/out and queue waits of small
  // requests take tens of microseconds.
  static constexpr std::array<double, 21> kBucketBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
      0.5,    1,       2.5,    5,     10,     25,    50,   100,   250,  600};
  // Distinct component names kept; further ones are counted as "other".
  static constexpr size_t kMaxComponents = 32;
  // The label value excess label values fold into.
  static constexpr std::string_view kOther = "other";

  // max_label_sets: distinct label sets per metric family. For
  // vaed_decode_component_seconds a label set is (model, profile,
  // resolution, stack, group_size), whatever the component; for
  // vaed_requests_total it is (outcome, model); for a labelled gauge or
  // counter, its one label. Past the limit, a new set has its values
  // (except component and outcome, which are bounded by themselves)
  // replaced with "other", so a family holds at most max_label_sets + 1
  // sets. Precondition: max_label_sets >= 1.
  explicit Metrics(size_t max_label_sets = 64);

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A successful decode: one observation per (component, seconds) in
  // vaed_decode_component_seconds, and vaed_requests_total{outcome="ok"}
  // += 1. Timings that are negative or not finite are skipped (a clock
  // bug must not poison the sums). Components are free-form names
  // ("decode", "video_vae.decode_latent", ...), at most kMaxComponents.
  void ObserveDecode(const DecodeLabels& labels,
                     const std::vector<std::pair<std::string, double>>& timings);

  // vaed_requests_total{outcome, model} += 1. outcome is one of: ok,
  // validation_error, quarantined, busy, deadline, resource_exhausted,
  // cancelled, client_fault, error; or a fallback event counted in
  // addition to its request's outcome: oom_fallback, compile_fallback,
  // collective_fallback. An unknown outcome is a programming error and is
  // counted as "error".
  void CountOutcome(std::string_view model, std::string_view outcome);

  // Sets a gauge. `name` is one of (label key in parentheses where one is
  // accepted; a gauge may also be set without its label):
  //   vaed_up, vaed_healthy (0/1), vaed_uptime_seconds,
  //   vaed_queue_depth, vaed_in_flight, vaed_clients,
  //   vaed_quarantined_clients, vaed_resident_weight_bytes (model),
  //   vaed_plan_cache_entries (model), vaed_peak_rss_bytes,
  //   vaed_group_generation (group).
  // An unknown name, a counter's name or another label key is a programming
  // error: the call is ignored (and asserts in debug builds).
  void SetGauge(std::string_view name, double value, std::string_view label_key = {},
                std::string_view label_value = {});

  // Sets the current value of a monotonic total the daemon counts elsewhere,
  // exposed with TYPE counter. `name` is one of: vaed_rank_busy_seconds_total
  // (rank), vaed_rank_tiles_total (rank), vaed_client_faults_total,
  // vaed_protocol_errors_total, vaed_rejected_connections_total. Errors as
  // SetGauge(). The caller keeps it monotonic (a counter that drops reads as
  // a process restart to Prometheus).
  void SetCounter(std::string_view name, double value, std::string_view label_key = {},
                  std::string_view label_value = {});

  // The whole exposition (# HELP / # TYPE per family, then its samples);
  // families without samples are left out. Serve it with Content-Type
  // "text/plain; version=0.0.4; charset=utf-8".
  std::string Render() const;

  // Per component over all label sets; components without observations are
  // left out; sorted by component name.
  std::vector<ComponentSummary> Components() const;

  // vaed_requests_total summed over models, sorted by outcome.
  std::vector<std::pair<std::string, uint64_t>> Outcomes() const;

 private:
  struct Histogram {
    std::array<uint64_t, kBucketBounds.size() + 1> buckets{};  // per bucket, last = +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  // (model, profile, resolution, stack, group_size)
  using DecodeKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;
  // (label key, label value); both empty when unlabelled.
  using ScalarKey = std::pair<std::string, std::string>;

  void SetScalar(std::string_view name, bool counter, double value, std::string_view label_key,
                 std::string_view label_value) VAED_EXCLUDES(mu_);

  const size_t max_label_sets_;
  mutable Mutex mu_;
  std::set<DecodeKey> decode_label_sets_ VAED_GUARDED_BY(mu_);
  std::set<std::string> components_ VAED_GUARDED_BY(mu_);
  // (component, key)
  std::map<std::pair<std::string, DecodeKey>, Histogram> histograms_ VAED_GUARDED_BY(mu_);
  // (outcome, model)
  std::map<std::pair<std::string, std::string>, uint64_t> requests_ VAED_GUARDED_BY(mu_);
  // by family name
  std::map<std::string, std::map<ScalarKey, double>> scalars_ VAED_GUARDED_BY(mu_);
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_METRICS_H_
