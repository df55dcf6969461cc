#include "ops/vaectl/status_report.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "ops/common/text_format.h"

namespace vaed::vaectl {
namespace {

// "2-3" for a contiguous ascending run (how the daemon forms its groups),
// else "0, 2"; "-" when empty.
std::string RankList(const std::vector<uint32_t>& ranks) {
  if (ranks.empty()) return "-";
  bool contiguous = true;
  for (size_t i = 1; i < ranks.size(); ++i) contiguous = contiguous && ranks[i] == ranks[i - 1] + 1;
  if (contiguous) {
    const std::string first = std::to_string(ranks[0]);
    return ranks.size() == 1 ? first : first + "-" + std::to_string(ranks[ranks.size() - 1]);
  }
  std::string s;
  for (uint32_t r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

nlohmann::json PlanCacheJson(const client::PlanCacheInfo& c) {
  nlohmann::json eager_only = nlohmann::json::array();
  for (const auto& e : c.eager_only) {
    eager_only.push_back({{"bucket", e.bucket}, {"reason", e.reason}});
  }
  return {{"capacity", c.capacity},    {"buckets", c.buckets},
          {"eager_only", eager_only},  {"hits", c.hits},
          {"builds", c.builds},        {"build_failures", c.build_failures},
          {"evictions", c.evictions},  {"eager_calls", c.eager_calls},
          {"plan_bytes", c.plan_bytes}};
}

nlohmann::json ModelJson(const client::ModelInfo& m) {
  return {
      {"plan_cache", m.plan_cache ? PlanCacheJson(*m.plan_cache) : nlohmann::json(nullptr)},
      {"name", m.name},
      {"kind", m.kind},
      {"demo_weights", m.demo_weights},
      {"weights_path", m.weights_path},
      {"weights_sha256", m.weights_sha256},
      {"weights_verification", m.weights_verification},
      {"resident_bytes", m.resident_bytes},
      {"description", m.description},
      {"compute_dtype", m.compute_dtype},
      {"capabilities", m.capabilities},
      {"audio_weights_path", m.audio_weights_path},
      {"audio_weights_sha256", m.audio_weights_sha256},
      {"audio_sample_rate_hz", m.audio_sample_rate_hz},
      {"audio_latent_rate_hz", m.audio_latent_rate_hz},
      {"native_fps", m.native_fps},
  };
}

nlohmann::json GroupJson(const client::GroupStatus& g) {
  return {{"name", g.name},
          {"size", g.size},
          {"ranks", g.ranks},
          {"generation", g.generation},
          {"state", g.state},
          {"runs", g.runs},
          {"failures", g.failures},
          {"last_failure", g.last_failure},
          {"last_imbalance", g.last_imbalance}};
}

nlohmann::json ClientJson(const client::ClientEntry& c) {
  return {{"client_id", c.client_id},
          {"name", c.name},
          {"uid", c.uid},
          {"pid", c.pid},
          {"regions", c.regions},
          {"region_bytes", c.region_bytes},
          {"in_flight", c.in_flight},
          {"faults_in_window", c.faults_in_window},
          {"idle_seconds", c.idle_seconds}};
}

nlohmann::json RankStatusJson(const client::RankStatus& r) {
  return {{"rank", r.rank},
          {"busy_seconds", r.busy_seconds},
          {"tiles", r.tiles},
          {"last_imbalance", r.last_imbalance},
          {"device", r.device},
          {"device_name", r.device_name},
          {"device_uuid", r.device_uuid},
          {"device_memory_used_bytes", r.device_memory_used_bytes},
          {"device_memory_total_bytes", r.device_memory_total_bytes}};
}

// "cpu", or "NVIDIA H200 GPU-... (12.0 GiB of 139.8 GiB in use)".
std::string RankDeviceText(const client::RankStatus& r) {
  if (r.device != "cuda") return r.device.empty() ? "cpu" : r.device;
  return r.device_name + " " + r.device_uuid + " (" + ops::HumanBytes(r.device_memory_used_bytes) +
         " of " + ops::HumanBytes(r.device_memory_total_bytes) + " in use)";
}

// {component: {count, sum_seconds, p50_seconds, p95_seconds, mean_seconds}}.
nlohmann::json ComponentsJson(const client::StatusReply& s) {
  nlohmann::json components = nlohmann::json::object();
  for (const auto& c : s.components) {
    components[c.component] = {
        {"count", c.count},
        {"sum_seconds", c.sum_seconds},
        {"p50_seconds", c.p50_seconds},
        {"p95_seconds", c.p95_seconds},
        {"mean_seconds", c.count > 0 ? c.sum_seconds / static_cast<double>(c.count) : 0.0}};
  }
  return components;
}

// One JSON value per element of `items`, made by `to_json`.
template <typename Items, typename ToJson>
nlohmann::json JsonArray(const Items& items, ToJson to_json) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& item : items) array.push_back(to_json(item));
  return array;
}

}  // namespace

std::string FormatImbalance(double imbalance) {
  if (!std::isfinite(imbalance) || imbalance <= 0) return "-";
  return ops::FormatFixed(imbalance, 2) + "x";
}

std::string FormatOutcomes(const client::StatusReply& s) {
  std::string line;
  for (const auto& o : s.outcomes) {
    if (o.count == 0 && o.outcome != "ok") continue;
    line += (line.empty() ? "" : ", ") + o.outcome + " " + std::to_string(o.count);
  }
  return line.empty() ? "-" : line;
}

std::string FormatLatency(const client::StatusReply& s) {
  if (s.components.empty()) return "";
  ops::TextTable t({"component", "count", "p50", "p95", "mean"}, {false, true, true, true, true});
  for (const auto& c : s.components) {
    const double mean = c.count > 0 ? c.sum_seconds / static_cast<double>(c.count) : -1.0;
    t.AddRow({c.component, std::to_string(c.count), ops::HumanDuration(c.p50_seconds),
              ops::HumanDuration(c.p95_seconds), ops::HumanDuration(mean)});
  }
  return "\nlatency (since start)\n" + t.Render();
}

nlohmann::json QuarantineToJson(const client::QuarantineEntry& q) {
  return {{"uid", q.uid},
          {"pid", q.pid},
          {"client_name", q.client_name},
          {"offences", q.offences},
          {"remaining_seconds", static_cast<double>(q.remaining_ms) / 1000.0},
          {"duration_seconds", static_cast<double>(q.duration_ms) / 1000.0},
          {"last_fault", q.last_fault},
          {"faults_in_window", q.faults_in_window}};
}

std::string FormatQuarantine(const client::StatusReply& s) {
  std::ostringstream out;
  if (s.quarantined.empty()) {
    out << "no client is quarantined (" << s.quarantines << " quarantines since start, "
        << s.client_faults << " client faults)\n";
  } else {
    ops::TextTable t({"pid", "uid", "client", "offence", "remaining", "of", "last fault"},
                     {true, true, false, true, true, true, false});
    for (const auto& q : s.quarantined) {
      t.AddRow({std::to_string(q.pid), std::to_string(q.uid), q.client_name,
                std::to_string(q.offences),
                ops::HumanDuration(static_cast<double>(q.remaining_ms) / 1000.0),
                ops::HumanDuration(static_cast<double>(q.duration_ms) / 1000.0), q.last_fault});
    }
    out << t.Render();
    out << "release with: vaectl quarantine release pid:<pid>  (or a client id, uid:<uid>, a "
           "client name, all)\n";
  }
  if (!s.client_list.empty()) {
    out << "\nclients\n";
    ops::TextTable c(
        {"id", "name", "pid", "uid", "regions", "mapped", "in flight", "recent faults", "idle"},
        {true, false, true, true, true, true, true, true, true});
    for (const auto& e : s.client_list) {
      c.AddRow({std::to_string(e.client_id), e.name, std::to_string(e.pid), std::to_string(e.uid),
                std::to_string(e.regions), ops::HumanBytes(e.region_bytes),
                std::to_string(e.in_flight), std::to_string(e.faults_in_window),
                ops::HumanDuration(e.idle_seconds)});
    }
    out << c.Render();
  }
  return out.str();
}

nlohmann::json StatusToJson(const client::StatusReply& s) {
  nlohmann::json outcomes = nlohmann::json::object();
  for (const auto& o : s.outcomes) outcomes[o.outcome] = o.count;
  return {
      {"healthy", s.healthy},
      {"daemon_version", s.daemon_version},
      {"uptime_seconds", s.uptime_seconds},
      {"pid", s.pid},
      {"socket", s.socket},
      {"default_model", s.default_model},
      {"default_profile", s.default_profile},
      {"allowed_profiles", s.allowed_profiles},
      {"models", JsonArray(s.models, ModelJson)},
      {"clients", s.clients},
      {"regions", s.regions},
      {"requests_served", s.requests_served},
      {"requests_failed", s.requests_failed},
      {"protocol_errors", s.protocol_errors},
      {"queue_depth", s.queue_depth},
      {"intra_op_threads", s.intra_op_threads},
      {"health", s.health},
      {"client_faults", s.client_faults},
      {"quarantines", s.quarantines},
      {"quarantine_rejections", s.quarantine_rejections},
      {"busy_rejections", s.busy_rejections},
      {"deadline_exceeded", s.deadline_exceeded},
      {"rejected_connections", s.rejected_connections},
      {"quarantined", JsonArray(s.quarantined, QuarantineToJson)},
      {"client_list", JsonArray(s.client_list, ClientJson)},
      {"ranks", s.ranks},
      {"groups", JsonArray(s.groups, GroupJson)},
      {"components", ComponentsJson(s)},
      {"outcomes", outcomes},
      {"in_flight", s.in_flight},
      {"resident_weight_bytes", s.resident_weight_bytes},
      {"plan_cache_entries", s.plan_cache_entries},
      {"peak_rss_bytes", s.peak_rss_bytes},
      {"rank_status", JsonArray(s.rank_status, RankStatusJson)},
      {"metrics_url", s.metrics_url},
  };
}

std::string FormatGroups(const client::StatusReply& s) {
  if (s.groups.empty()) return "";
  bool any_failure = false;
  bool any_imbalance = false;
  for (const auto& g : s.groups) {
    any_failure = any_failure || !g.last_failure.empty();
    any_imbalance = any_imbalance || FormatImbalance(g.last_imbalance) != "-";
  }
  std::vector<std::string> header = {"group", "size", "ranks",   "generation",
                                     "state", "runs", "failures"};
  std::vector<bool> right_align = {false, true, false, true, false, true, true};
  if (any_imbalance) {
    header.push_back("last imbalance");
    right_align.push_back(true);
  }
  if (any_failure) header.push_back("last failure");
  ops::TextTable t(std::move(header), std::move(right_align));
  for (const auto& g : s.groups) {
    std::vector<std::string> row = {
        g.name,  std::to_string(g.size), RankList(g.ranks),         std::to_string(g.generation),
        g.state, std::to_string(g.runs), std::to_string(g.failures)};
    if (any_imbalance) row.push_back(FormatImbalance(g.last_imbalance));
    if (any_failure) row.push_back(g.last_failure.empty() ? "-" : g.last_failure);
    t.AddRow(std::move(row));
  }
  const uint32_t ranks = s.ranks;
  return "\nVAE groups (" + std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + ")\n" +
         t.Render();
}

std::string FormatStatus(const client::StatusReply& s) {
  std::ostringstream out;
  out << "vaed " << s.daemon_version << " is " << (s.healthy ? "healthy" : "UNHEALTHY") << ", up "
      << ops::HumanDuration(s.uptime_seconds) << " (pid " << s.pid << ")\n";
  if (!s.healthy && !s.health.empty()) out << "  " << s.health << "\n";
  ops::TextTable summary(std::vector<std::string>{});
  summary.AddRow({"socket", s.socket});
  summary.AddRow({"clients", std::to_string(s.clients) + " connected, " +
                                 std::to_string(s.regions) + " regions registered"});
  summary.AddRow({"requests", std::to_string(s.requests_served) + " served, " +
                                  std::to_string(s.requests_failed) + " failed, " +
                                  std::to_string(s.protocol_errors) + " protocol errors"});
  summary.AddRow({"outcomes", FormatOutcomes(s)});
  summary.AddRow({"executor", "queue depth " + std::to_string(s.queue_depth) + ", " +
                                  std::to_string(s.in_flight) + " in flight, " +
                                  std::to_string(s.intra_op_threads) + " intra-op threads"});
  summary.AddRow(
      {"memory", "resident weights " + ops::HumanBytes(s.resident_weight_bytes) +
                     " (all models, all ranks), " + std::to_string(s.plan_cache_entries) +
                     " plan-cache entries, peak RSS " + ops::HumanBytes(s.peak_rss_bytes)});
  // An empty URL: metrics disabled (then there are no components either),
  // or the endpoint could not be served (the daemon's log says why).
  summary.AddRow(
      {"metrics",
       s.metrics_url.empty()
           ? std::string(s.components.empty() ? "endpoint: off (no latency data)" : "endpoint: off")
           : s.metrics_url});
  summary.AddRow(
      {"reliability",
       std::to_string(s.client_faults) + " client faults, " + std::to_string(s.quarantined.size()) +
           " quarantined now (" + std::to_string(s.quarantines) + " since start, " +
           std::to_string(s.quarantine_rejections) + " requests refused), " +
           std::to_string(s.busy_rejections) + " busy, " + std::to_string(s.deadline_exceeded) +
           " past deadline, " + std::to_string(s.rejected_connections) + " connections refused"});
  summary.AddRow({"default model", s.default_model});
  std::string allowed;
  for (const auto& p : s.allowed_profiles) allowed += (allowed.empty() ? "" : ", ") + p;
  summary.AddRow({"profiles", "default " + s.default_profile + "; allowed " + allowed});
  out << summary.Render();

  out << "\nmodels\n";
  ops::TextTable models(
      {"name", "kind", "weights", "dtype", "resident", "sha256", "checked", "path"},
      {false, false, false, false, true, false, false, false});
  bool any_demo = false;
  for (const auto& m : s.models) {
    any_demo = any_demo || m.demo_weights;
    const std::string sha = m.weights_sha256.size() > 12
                                ? m.weights_sha256.substr(0, 12) + "..."
                                : (m.weights_sha256.empty() ? "-" : m.weights_sha256);
    models.AddRow(
        {m.name + (m.name == s.default_model ? " *" : ""), m.kind, m.demo_weights ? "DEMO" : "real",
         m.compute_dtype.empty() ? "-" : m.compute_dtype, ops::HumanBytes(m.resident_bytes), sha,
         m.weights_verification.empty() ? "-" : m.weights_verification,
         m.weights_path.empty() ? "-" : m.weights_path});
  }
  out << models.Render();
  // What each model supports, and its audio decoder where it has one.
  for (const auto& m : s.models) {
    std::string caps;
    for (const auto& c : m.capabilities) caps += (caps.empty() ? "" : ", ") + c;
    out << "  " << m.name << ": " << (caps.empty() ? "-" : caps);
    if (m.audio_sample_rate_hz > 0) {
      const std::string& sha = m.audio_weights_sha256;
      out << "; audio " << m.audio_sample_rate_hz << " Hz, " << m.audio_latent_rate_hz
          << " latent frames/s, weights "
          << (sha.empty() ? std::string("DEMO")
                          : sha.substr(0, 12) + "... " + m.audio_weights_path);
    }
    out << "\n";
    if (m.plan_cache) {
      const client::PlanCacheInfo& c = *m.plan_cache;
      out << "    compiled plans: " << c.buckets.size() << " of " << c.capacity << " ("
          << ops::HumanBytes(c.plan_bytes) << "), " << c.hits << " hits, " << c.builds
          << " builds, " << c.evictions << " evictions, " << c.eager_calls << " eager calls";
      for (const auto& b : c.buckets) out << "\n      plan " << b;
      for (const auto& e : c.eager_only) {
        out << "\n      EAGER-ONLY " << e.bucket << ": " << e.reason;
      }
      out << "\n";
    }
  }
  out << "(* = default model";
  if (any_demo) out << "; DEMO = deterministic random weights, not a trained decoder";
  out << "; checked: weight files against their expected SHA-256, before loading)\n";
  out << FormatLatency(s);
  if (!s.rank_status.empty()) {
    out << "\nranks (since start)\n";
    ops::TextTable ranks({"rank", "busy", "tiles", "last imbalance", "device"},
                         {true, true, true, true, false});
    for (const auto& r : s.rank_status) {
      ranks.AddRow({std::to_string(r.rank), ops::HumanDuration(r.busy_seconds),
                    std::to_string(r.tiles), FormatImbalance(r.last_imbalance), RankDeviceText(r)});
    }
    out << ranks.Render();
  }
  out << FormatGroups(s);
  return out.str();
}

}  // namespace vaed::vaectl
