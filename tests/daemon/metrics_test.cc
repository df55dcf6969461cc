// The metrics registry (daemon/server/metrics.h) and its HTTP endpoint
// (metrics_http.h): the exposition is valid Prometheus text format 0.0.4
// (checked by a small parser here, and by promtool when installed), counts
// move by exactly what was observed, cardinality stays bounded, percentiles
// follow histogram_quantile(), and the endpoint serves, refuses a taken
// port and stops promptly.
#include "daemon/server/metrics.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/server/metrics_http.h"

namespace vaed::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------
// A checker of the text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): every
// sample belongs to a family declared by # TYPE before it, families are
// contiguous, label values use only the three escapes, no series repeats,
// and each histogram's buckets are cumulative with +Inf == _count.

using LabelMap = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  LabelMap labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> type
  std::map<std::string, std::string> help;   // family -> help text (unescaped)
  std::vector<Sample> samples;

  // The value of one series, or NaN when absent.
  double Value(const std::string& name, const LabelMap& labels = {}) const {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nan("");
  }
  size_t Count(const std::string& name) const {
    size_t n = 0;
    for (const Sample& s : samples) n += s.name == name;
    return n;
  }
};

bool IsMetricName(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
                    (i > 0 && std::isdigit(static_cast<unsigned char>(c)));
    if (!ok) return false;
  }
  return true;
}

bool ParseValue(const std::string& text, double* out) {
  if (text == "+Inf") {
    *out = INFINITY;
    return true;
  }
  if (text == "-Inf") {
    *out = -INFINITY;
    return true;
  }
  if (text == "NaN") {
    *out = NAN;
    return true;
  }
  if (text.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

// Parses `text`; on a violation, returns false with `error` naming the line.
bool ParseExposition(const std::string& text, Exposition* out, std::string* error) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  std::string current_family;
  std::set<std::string> finished_families;
  std::set<std::string> series_seen;
  auto fail = [&](const std::string& why) {
    *error = "line " + std::to_string(number) + ": " + why + ": " + line;
    return false;
  };
  auto enter_family = [&](const std::string& family) {
    if (family == current_family) return true;
    if (finished_families.count(family)) return false;  // not contiguous
    if (!current_family.empty()) finished_families.insert(current_family);
    current_family = family;
    return true;
  };
  if (!text.empty() && text.back() != '\n') {
    *error = "the exposition must end with a line feed";
    return false;
  }
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name;
      words >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;  // a plain comment
      if (!IsMetricName(name)) return fail("bad metric name in " + kind);
      if (!enter_family(name)) return fail("family " + name + " is not contiguous");
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kind == "TYPE") {
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                     "untyped"};
        if (!kTypes.count(rest)) return fail("unknown type '" + rest + "'");
        if (out->types.count(name)) return fail("second TYPE for " + name);
        for (const Sample& s : out->samples) {
          if (s.name.rfind(name, 0) == 0) return fail("TYPE after samples of " + name);
        }
        out->types[name] = rest;
      } else {
        if (out->help.count(name)) return fail("second HELP for " + name);
        std::string unescaped;
        for (size_t i = 0; i < rest.size(); ++i) {
          if (rest[i] == '\\' && i + 1 < rest.size()) {
            const char n = rest[++i];
            if (n == 'n') {
              unescaped += '\n';
            } else if (n == '\\') {
              unescaped += '\\';
            } else {
              return fail("bad escape in HELP");
            }
          } else {
            unescaped += rest[i];
          }
        }
        out->help[name] = unescaped;
      }
      continue;
    }
    // name[{labels}] value
    Sample sample;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    sample.name = line.substr(0, i);
    if (!IsMetricName(sample.name)) return fail("bad sample name");
    std::string canonical = sample.name + "{";
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return fail("label without '='");
        const std::string key = line.substr(i, eq - i);
        if (!IsMetricName(key) || key.find(':') != std::string::npos) {
          return fail("bad label name '" + key + "'");
        }
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return fail("label value must be quoted");
        ++i;
        std::string value;
        bool closed = false;
        while (i < line.size()) {
          const char c = line[i++];
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\') {
            if (i >= line.size()) return fail("dangling escape");
            const char n = line[i++];
            if (n == '\\') {
              value += '\\';
            } else if (n == '"') {
              value += '"';
            } else if (n == 'n') {
              value += '\n';
            } else {
              return fail(std::string("bad escape \\") + n);
            }
          } else {
            value += c;
          }
        }
        if (!closed) return fail("unterminated label value");
        if (sample.labels.count(key)) return fail("label " + key + " repeated");
        sample.labels[key] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size() || line[i] != '}') return fail("unterminated label set");
      ++i;
    }
    for (const auto& [k, v] : sample.labels) canonical += k + "=" + v + "\x1f";
    if (i >= line.size() || line[i] != ' ') return fail("no value");
    const std::string value_text = line.substr(i + 1);
    if (value_text.find(' ') != std::string::npos) return fail("timestamps are not expected");
    if (!ParseValue(value_text, &sample.value)) return fail("bad value '" + value_text + "'");
    // The family: the name itself, or a histogram's name_bucket/_sum/_count.
    std::string family = sample.name;
    if (!out->types.count(family)) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s(suffix);
        if (sample.name.size() > s.size() &&
            sample.name.compare(sample.name.size() - s.size(), s.size(), s) == 0) {
          const std::string base = sample.name.substr(0, sample.name.size() - s.size());
          if (out->types.count(base) && out->types[base] == "histogram") family = base;
        }
      }
    }
    if (!out->types.count(family)) return fail("sample before # TYPE of its family");
    if (family != current_family) return fail("sample outside its family's block");
    if (out->types[family] == "histogram" && family == sample.name) {
      return fail("histogram sample without _bucket/_sum/_count");
    }
    if (out->types[family] == "counter" && sample.value < 0) return fail("negative counter");
    if (!series_seen.insert(canonical).second) return fail("series repeated");
    out->samples.push_back(std::move(sample));
  }

  // Histograms: per label set (without le), buckets ascending and
  // cumulative, +Inf present and equal to _count, _sum present.
  for (const auto& [family, type] : out->types) {
    if (type != "histogram") continue;
    std::map<LabelMap, std::vector<std::pair<double, double>>> buckets;
    for (const Sample& s : out->samples) {
      if (s.name != family + "_bucket") continue;
      auto le = s.labels.find("le");
      if (le == s.labels.end()) {
        *error = family + "_bucket without le";
        return false;
      }
      double bound = 0;
      if (!ParseValue(le->second, &bound)) {
        *error = family + "_bucket with bad le '" + le->second + "'";
        return false;
      }
      LabelMap base = s.labels;
      base.erase("le");
      buckets[base].emplace_back(bound, s.value);
    }
    for (const auto& [labels, series] : buckets) {
      for (size_t k = 1; k < series.size(); ++k) {
        if (!(series[k].first > series[k - 1].first) || series[k].second < series[k - 1].second) {
          *error = family + ": buckets not ascending and cumulative";
          return false;
        }
      }
      if (series.empty() || !std::isinf(series.back().first)) {
        *error = family + ": no le=\"+Inf\" bucket";
        return false;
      }
      const double count = out->Value(family + "_count", labels);
      if (std::isnan(count) || count != series.back().second) {
        *error = family + ": +Inf bucket differs from _count";
        return false;
      }
      if (std::isnan(out->Value(family + "_sum", labels))) {
        *error = family + ": no _sum";
        return false;
      }
    }
  }
  return true;
}

Exposition MustParse(const std::string& text) {
  Exposition e;
  std::string error;
  EXPECT_TRUE(ParseExposition(text, &e, &error)) << error << "\n--- exposition ---\n" << text;
  return e;
}

// The checker itself must reject what it exists to catch.
TEST(ExpositionCheckerTest, RejectsMalformedExpositions) {
  Exposition e;
  std::string error;
  EXPECT_FALSE(ParseExposition("x 1\n", &e, &error)) << "sample without TYPE";
  e = {};
  EXPECT_FALSE(ParseExposition("# TYPE x gauge\nx{a=\"\\t\"} 1\n", &e, &error)) << "bad escape";
  e = {};
  EXPECT_FALSE(ParseExposition(
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", &e,
      &error))
      << "buckets not cumulative";
  e = {};
  EXPECT_FALSE(ParseExposition(
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n", &e,
      &error))
      << "+Inf != count";
  e = {};
  EXPECT_FALSE(ParseExposition("# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n", &e, &error))
      << "family not contiguous";
  e = {};
  EXPECT_TRUE(ParseExposition(
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
      "h_sum 1.5\nh_count 2\n",
      &e, &error))
      << error;
}

DecodeLabels Labels(std::string model = "h3", std::string resolution = "720x1280") {
  DecodeLabels l;
  l.model = std::move(model);
  l.profile = "optimized";
  l.resolution = std::move(resolution);
  l.stack = "sequential";
  l.group_size = 2;
  return l;
}

LabelMap ComponentLabels(const std::string& component, const DecodeLabels& l) {
  return {{"component", component}, {"model", l.model},
          {"profile", l.profile},   {"resolution", l.resolution},
          {"stack", l.stack},       {"group_size", std::to_string(l.group_size)}};
}

LabelMap WithLe(LabelMap labels, const std::string& le) {
  labels["le"] = le;
  return labels;
}

// A registry with every kind of family in it, including label values that
// need escaping.
void Populate(Metrics* m) {
  m->ObserveDecode(Labels(), {{"decode", 1.5},
                              {"video_vae.decode_latent", 1.2},
                              {"video_vae.tile_decode", 0.9},
                              {"video_vae.tile_merge", 0.05},
                              {"video_vae.tile_communication", 0.002},
                              {"audio_vae.decode_latent", 0.25}});
  m->ObserveDecode(Labels("we\"ird\\na\nme", "audio"), {{"decode", 0.0004}});
  m->CountOutcome("h3", "busy");
  m->CountOutcome("h3", "oom_fallback");
  m->SetGauge("vaed_up", 1);
  m->SetGauge("vaed_healthy", 1);
  m->SetGauge("vaed_uptime_seconds", 12.5);
  m->SetGauge("vaed_queue_depth", 3);
  m->SetGauge("vaed_in_flight", 4);
  m->SetGauge("vaed_clients", 2);
  m->SetGauge("vaed_quarantined_clients", 0);
  m->SetGauge("vaed_resident_weight_bytes", 9.7e9);
  m->SetGauge("vaed_plan_cache_entries", 1);
  m->SetGauge("vaed_peak_rss_bytes", 12345678901.0);
  m->SetGauge("vaed_group_generation", 3, "group", "0-1");
  m->SetCounter("vaed_rank_busy_seconds_total", 10.25, "rank", "0");
  m->SetCounter("vaed_rank_busy_seconds_total", 9.75, "rank", "1");
  m->SetCounter("vaed_rank_tiles_total", 40, "rank", "0");
  m->SetCounter("vaed_client_faults_total", 1);
  m->SetCounter("vaed_protocol_errors_total", 0);
  m->SetCounter("vaed_rejected_connections_total", 2);
}

TEST(MetricsTest, ExpositionIsWellFormedWithEscapedLabels) {
  Metrics m;
  Populate(&m);
  const std::string text = m.Render();
  const Exposition e = MustParse(text);
  EXPECT_EQ(e.types.at("vaed_decode_component_seconds"), "histogram");
  EXPECT_EQ(e.types.at("vaed_requests_total"), "counter");
  EXPECT_EQ(e.types.at("vaed_queue_depth"), "gauge");
  EXPECT_EQ(e.types.at("vaed_rank_busy_seconds_total"), "counter");
  for (const auto& [family, type] : e.types) {
    EXPECT_TRUE(e.help.count(family)) << family << " has no HELP";
  }
  EXPECT_EQ(e.Value("vaed_build_info", {{"version", VAED_VERSION}}), 1);
  // The odd model name round-trips through the escapes.
  const DecodeLabels odd = Labels("we\"ird\\na\nme", "audio");
  EXPECT_EQ(e.Value("vaed_decode_component_seconds_count", ComponentLabels("decode", odd)), 1);
  EXPECT_THAT(text, HasSubstr("model=\"we\\\"ird\\\\na\\nme\""));
  EXPECT_EQ(e.Value("vaed_group_generation", {{"group", "0-1"}}), 3);
  EXPECT_EQ(e.Value("vaed_peak_rss_bytes"), 12345678901.0);
  EXPECT_EQ(e.Value("vaed_rank_busy_seconds_total", {{"rank", "1"}}), 9.75);
  // Every finite bucket bound and +Inf, per series.
  EXPECT_EQ(e.Value("vaed_decode_component_seconds_bucket",
                    WithLe(ComponentLabels("decode", Labels()), "0.001")),
            0);
  EXPECT_EQ(e.Value("vaed_decode_component_seconds_bucket",
                    WithLe(ComponentLabels("decode", Labels()), "2.5")),
            1);
  EXPECT_EQ(e.Value("vaed_decode_component_seconds_bucket",
                    WithLe(ComponentLabels("decode", Labels()), "+Inf")),
            1);
  EXPECT_EQ(e.Count("vaed_decode_component_seconds_bucket"),
            7 * (Metrics::kBucketBounds.size() + 1));
}

TEST(MetricsTest, EmptyRegistryRendersOnlyBuildInfo) {
  Metrics m;
  const Exposition e = MustParse(m.Render());
  EXPECT_EQ(e.types.size(), 1u);
  EXPECT_EQ(e.samples.size(), 1u);
  EXPECT_TRUE(m.Components().empty());
  EXPECT_TRUE(m.Outcomes().empty());
}

TEST(MetricsTest, CountsMoveByExactlyTheObservedAmounts) {
  Metrics m;
  Populate(&m);
  const Exposition before = MustParse(m.Render());
  const DecodeLabels l = Labels();
  m.ObserveDecode(l, {{"decode", 0.3}, {"video_vae.tile_decode", 0.07}});
  m.ObserveDecode(l, {{"decode", 0.4}});
  m.CountOutcome("h3", "busy");
  m.CountOutcome("h3", "deadline");
  m.CountOutcome("taef2", "validation_error");
  m.CountOutcome("h3", "collective_fallback");
  const Exposition after = MustParse(m.Render());

  auto delta = [&](const std::string& name, const LabelMap& labels) {
    const double a = after.Value(name, labels);
    const double b = before.Value(name, labels);
    return a - (std::isnan(b) ? 0 : b);
  };
  const LabelMap decode = ComponentLabels("decode", l);
  EXPECT_EQ(delta("vaed_decode_component_seconds_count", decode), 2);
  EXPECT_NEAR(delta("vaed_decode_component_seconds_sum", decode), 0.7, 1e-12);
  EXPECT_EQ(delta("vaed_decode_component_seconds_bucket", WithLe(decode, "0.25")), 0);
  EXPECT_EQ(delta("vaed_decode_component_seconds_bucket", WithLe(decode, "0.5")), 2);
  EXPECT_EQ(delta("vaed_decode_component_seconds_bucket", WithLe(decode, "+Inf")), 2);
  const LabelMap tile = ComponentLabels("video_vae.tile_decode", l);
  EXPECT_EQ(delta("vaed_decode_component_seconds_count", tile), 1);
  EXPECT_EQ(delta("vaed_decode_component_seconds_bucket", WithLe(tile, "0.1")), 1);
  EXPECT_EQ(delta("vaed_decode_component_seconds_bucket", WithLe(tile, "0.05")), 0);
  EXPECT_EQ(
      delta("vaed_decode_component_seconds_count", ComponentLabels("audio_vae.decode_latent", l)),
      0);

  EXPECT_EQ(delta("vaed_requests_total", {{"outcome", "ok"}, {"model", "h3"}}), 2);
  EXPECT_EQ(delta("vaed_requests_total", {{"outcome", "busy"}, {"model", "h3"}}), 1);
  EXPECT_EQ(delta("vaed_requests_total", {{"outcome", "deadline"}, {"model", "h3"}}), 1);
  EXPECT_EQ(delta("vaed_requests_total", {{"outcome", "validation_error"}, {"model", "taef2"}}), 1);
  EXPECT_EQ(delta("vaed_requests_total", {{"outcome", "collective_fallback"}, {"model", "h3"}}), 1);
  EXPECT_EQ(delta("vaed_requests_total", {{"outcome", "oom_fallback"}, {"model", "h3"}}), 0);

  std::map<std::string, uint64_t> outcomes;
  for (const auto& [o, n] : m.Outcomes()) outcomes[o] = n;
  EXPECT_EQ(outcomes["ok"], 4u);  // 2 from Populate, 2 here
  EXPECT_EQ(outcomes["busy"], 2u);
  EXPECT_EQ(outcomes["validation_error"], 1u);
  const auto listed = m.Outcomes();
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
}

TEST(MetricsTest, InvalidTimingsAreSkipped) {
  Metrics m;
  m.ObserveDecode(Labels(), {{"decode", -1},
                             {"video_vae.tile_decode", std::nan("")},
                             {"video_vae.tile_merge", INFINITY},
                             {"audio_vae.decode_latent", 0}});
  const auto components = m.Components();
  ASSERT_EQ(components.size(), 1u);
  EXPECT_EQ(components[0].component, "audio_vae.decode_latent");
  EXPECT_EQ(components[0].count, 1u);
  MustParse(m.Render());
}

TEST(MetricsTest, UnknownOutcomeCountsAsError) {
  Metrics m;
  EXPECT_DEBUG_DEATH(m.CountOutcome("h3", "exploded"), "unknown outcome");
#ifdef NDEBUG
  const Exposition e = MustParse(m.Render());
  EXPECT_EQ(e.Value("vaed_requests_total", {{"outcome", "error"}, {"model", "h3"}}), 1);
  EXPECT_EQ(e.Count("vaed_requests_total"), 1u);
#endif
}

TEST(MetricsTest, UnknownGaugeOrWrongLabelIsIgnored) {
  Metrics m;
  EXPECT_DEBUG_DEATH(m.SetGauge("vaed_bogus", 1), "unknown metric");
  EXPECT_DEBUG_DEATH(m.SetGauge("vaed_client_faults_total", 1), "unknown metric");
  EXPECT_DEBUG_DEATH(m.SetCounter("vaed_rank_tiles_total", 1, "node", "0"), "unknown metric");
#ifdef NDEBUG
  const Exposition e = MustParse(m.Render());
  EXPECT_EQ(e.samples.size(), 1u);  // build_info only
#endif
}

TEST(MetricsTest, LabelSetsPastTheLimitFoldIntoOther) {
  Metrics m(/*max_label_sets=*/4);
  for (int i = 0; i < 10; ++i) {
    // Ten resolutions, two components each: four label sets, then "other".
    m.ObserveDecode(Labels("h3", std::to_string(100 + i) + "x64"),
                    {{"decode", 0.1}, {"video_vae.decode_latent", 0.05}});
  }
  for (int i = 0; i < 10; ++i) m.CountOutcome("model" + std::to_string(i), "busy");
  for (int i = 0; i < 10; ++i) m.SetGauge("vaed_group_generation", i, "group", std::to_string(i));
  const Exposition e = MustParse(m.Render());
  // 5 label sets (4 + other) x 2 components.
  EXPECT_EQ(e.Count("vaed_decode_component_seconds_count"), 10u);
  DecodeLabels other;
  other.model = other.profile = other.resolution = other.stack = "other";
  LabelMap other_decode = ComponentLabels("decode", other);
  other_decode["group_size"] = "other";
  EXPECT_EQ(e.Value("vaed_decode_component_seconds_count", other_decode), 6);
  EXPECT_EQ(e.Value("vaed_decode_component_seconds_count",
                    ComponentLabels("decode", Labels("h3", "103x64"))),
            1);
  // Requests: ("ok", h3) took one place; three busy models, then other.
  EXPECT_EQ(e.Count("vaed_requests_total"), 5u);
  EXPECT_EQ(e.Value("vaed_requests_total", {{"outcome", "busy"}, {"model", "other"}}), 7);
  EXPECT_EQ(e.Value("vaed_requests_total", {{"outcome", "ok"}, {"model", "h3"}}), 10);
  EXPECT_EQ(e.Count("vaed_group_generation"), 5u);
  EXPECT_EQ(e.Value("vaed_group_generation", {{"group", "other"}}), 9);
  // Totals are kept whatever folds.
  uint64_t requests = 0;
  for (const auto& [o, n] : m.Outcomes()) requests += n;
  EXPECT_EQ(requests, 20u);
}

TEST(MetricsTest, ComponentsPastTheCapFoldIntoOther) {
  Metrics m;
  std::vector<std::pair<std::string, double>> timings;
  for (int i = 0; i < 40; ++i) timings.emplace_back("c" + std::to_string(100 + i), 0.01);
  m.ObserveDecode(Labels(), timings);
  const auto components = m.Components();
  ASSERT_EQ(components.size(), Metrics::kMaxComponents + 1);
  EXPECT_TRUE(
      std::is_sorted(components.begin(), components.end(),
                     [](const auto& a, const auto& b) { return a.component < b.component; }));
  EXPECT_EQ(components.back().component, "other");
  EXPECT_EQ(components.back().count, 8u);
  EXPECT_EQ(components.front().component, "c100");
  MustParse(m.Render());
}

// histogram_quantile(): rank q * count, linear inside its bucket.
TEST(MetricsTest, PercentilesInterpolateInsideBuckets) {
  Metrics m;
  // 100 observations of 1, 2, ..., 100 ms under one label set, and a second
  // label set with the same values: the merge must not change quantiles.
  for (int i = 1; i <= 100; ++i) {
    m.ObserveDecode(Labels(), {{"decode", i / 1000.0}});
    m.ObserveDecode(Labels("taef2"), {{"decode", i / 1000.0}});
  }
  // One component seen only 4 times, all in (0.25, 0.5].
  for (int i = 0; i < 4; ++i) m.ObserveDecode(Labels(), {{"video_vae.tile_merge", 0.3}});
  const auto components = m.Components();
  ASSERT_EQ(components.size(), 2u);
  const ComponentSummary& d = components[0];
  EXPECT_EQ(d.component, "decode");
  EXPECT_EQ(d.count, 200u);
  EXPECT_NEAR(d.sum_seconds, 2 * 5.050, 1e-9);
  // p50: rank 100 of 200; buckets <=0.025: 50, <=0.05: 100 -> the (0.025,
  // 0.05] bucket's upper end.
  EXPECT_NEAR(d.p50_seconds, 0.05, 1e-12);
  // p95: rank 190; <=0.05: 100, (0.05, 0.1]: 100 more -> 0.05 + 0.05 * 90/100.
  EXPECT_NEAR(d.p95_seconds, 0.095, 1e-12);
  // Within a bucket width of the true quantiles (50.5 ms, 95.05 ms).
  EXPECT_NEAR(d.p50_seconds, 0.0505, 0.025);
  EXPECT_NEAR(d.p95_seconds, 0.09505, 0.05);
  const ComponentSummary& t = components[1];
  EXPECT_EQ(t.component, "video_vae.tile_merge");
  EXPECT_NEAR(t.p50_seconds, 0.25 + 0.25 * 0.5, 1e-12);
  EXPECT_NEAR(t.p95_seconds, 0.25 + 0.25 * 0.95, 1e-12);

  // Past the last finite bound: the highest finite bound, as Prometheus.
  Metrics slow;
  slow.ObserveDecode(Labels(), {{"decode", 1000}});
  EXPECT_EQ(slow.Components()[0].p95_seconds, Metrics::kBucketBounds.back());
  // The first bucket interpolates from 0.
  Metrics fast;
  fast.ObserveDecode(Labels(), {{"decode", 0.00001}});
  fast.ObserveDecode(Labels(), {{"decode", 0.00002}});
  // Both in the first bucket [0, 0.1 ms]: the median is half its bound.
  EXPECT_NEAR(fast.Components()[0].p50_seconds, Metrics::kBucketBounds.front() * 0.5, 1e-15);
}

TEST(MetricsTest, ConcurrentObserversLoseNothing) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 500; ++i) {
        m.ObserveDecode(Labels("m" + std::to_string(t)), {{"decode", 0.01}});
        if (i % 50 == 0) (void)m.Render();
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(m.Components().size(), 1u);
  EXPECT_EQ(m.Components()[0].count, 2000u);
}

// Runs `command` with `input` on its stdin; returns its exit status and
// puts its output in `output`.
int RunWithInput(const std::string& command, const std::string& input, std::string* output) {
  char path[] = "/tmp/vaed-metrics-test-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  FILE* p = popen((command + " > " + path + " 2>&1").c_str(), "w");
  if (p == nullptr) return -1;
  std::fwrite(input.data(), 1, input.size(), p);
  const int status = pclose(p);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  *output = ss.str();
  unlink(path);
  return status;
}

TEST(MetricsTest, PromtoolAcceptsTheExposition) {
  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0)
    GTEST_SKIP() << promtool << " not installed (Debian: prometheus)";
  Metrics m;
  Populate(&m);
  m.CountOutcome("h3", "quarantined");
  std::string output;
  const int status = RunWithInput(std::string(promtool) + " check metrics", m.Render(), &output);
  EXPECT_EQ(status, 0) << output << "\n--- exposition ---\n" << m.Render();
}

// ---------------------------------------------------------------------------
// The HTTP endpoint.

std::string Get(uint16_t port, const std::string& path, int* status,
                std::string* content_type = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(2, 0);
  auto res = client.Get(path.c_str());
  if (!res) {
    *status = -1;
    return httplib::to_string(res.error());
  }
  *status = res->status;
  if (content_type != nullptr) *content_type = res->get_header_value("Content-Type");
  return res->body;
}

TEST(MetricsServerTest, ServesMetricsOnAnyFreeLoopbackPort) {
  Metrics m;
  Populate(&m);
  std::atomic<int> refreshed{0};
  auto server = MetricsServer::Start(&m, "127.0.0.1", 0, [&] { ++refreshed; });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint16_t port = (*server)->port();
  ASSERT_NE(port, 0);
  EXPECT_EQ((*server)->url(), "http://127.0.0.1:" + std::to_string(port) + "/metrics");

  int status = 0;
  std::string content_type;
  const std::string body = Get(port, "/metrics", &status, &content_type);
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(refreshed.load(), 1);
  const Exposition e = MustParse(body);
  EXPECT_EQ(e.Value("vaed_queue_depth"), 3);

  // The served text follows the registry.
  m.CountOutcome("h3", "busy");
  const Exposition again = MustParse(Get(port, "/metrics", &status));
  EXPECT_EQ(again.Value("vaed_requests_total", {{"outcome", "busy"}, {"model", "h3"}}), 2);
  EXPECT_EQ(refreshed.load(), 2);

  EXPECT_THAT(Get(port, "/", &status), HasSubstr("/metrics"));
  EXPECT_EQ(status, 200);
  Get(port, "/metricsx", &status);
  EXPECT_EQ(status, 404);
  Get(port, "/favicon.ico", &status);
  EXPECT_EQ(status, 404);

  httplib::Client client("127.0.0.1", port);
  auto post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  auto head = client.Head("/metrics");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
}

// Exception injection: a scrape whose refresh throws is
// answered 500 naming the exception; the server thread survives and the
// next scrape is served.
TEST(MetricsServerTest, AScrapeThatThrowsIsAnswered500AndTheNextIsServed) {
  Metrics m;
  Populate(&m);
  std::atomic<int> calls{0};
  auto server = MetricsServer::Start(&m, "127.0.0.1", 0, [&] {
    if (++calls == 1) throw std::runtime_error("injected refresh failure");
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint16_t port = (*server)->port();
  int status = 0;
  EXPECT_THAT(Get(port, "/metrics", &status), HasSubstr("injected refresh failure"));
  EXPECT_EQ(status, 500);
  const std::string body = Get(port, "/metrics", &status);
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(MustParse(body).Value("vaed_queue_depth"), 3);
  EXPECT_EQ(calls.load(), 2);
}

TEST(MetricsServerTest, TakenPortIsAnErrorNamingMetricsPort) {
  // A plain listening socket holds a port.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t taken = ntohs(addr.sin_port);

  Metrics m;
  auto server = MetricsServer::Start(&m, "127.0.0.1", taken);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(server.status().message(), HasSubstr("metrics.port " + std::to_string(taken)));
  EXPECT_THAT(server.status().message(), HasSubstr("in use"));
  close(fd);

  // Nor can a second endpoint share a running one's port (no SO_REUSEPORT).
  auto first = MetricsServer::Start(&m, "127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = MetricsServer::Start(&m, "127.0.0.1", (*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("metrics.port"));
}

TEST(MetricsServerTest, BadAddressIsAnErrorNamingMetricsAddress) {
  Metrics m;
  auto empty = MetricsServer::Start(&m, "", 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("metrics.address"));
  auto bad = MetricsServer::Start(&m, "300.1.2.3", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("metrics.address '300.1.2.3'"));
}

TEST(MetricsServerTest, StopsPromptlyEvenWithAnIdleConnection) {
  Metrics m;
  auto server = MetricsServer::Start(&m, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint16_t port = (*server)->port();
  // A scraper that connects and says nothing.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  server->reset();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 3.0);
  close(fd);
  // The port is free again.
  auto again = MetricsServer::Start(&m, "127.0.0.1", port);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

}  // namespace
}  // namespace vaed::server
