#include "ops/vaectl/status_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vaed::vaectl {
namespace {

using ::testing::HasSubstr;

client::StatusReply SampleStatus() {
  client::StatusReply s;
  s.daemon_version = "0.1.0";
  s.uptime_seconds = 3 * 3600 + 12 * 60 + 5;
  s.healthy = true;
  s.default_model = "taef2";
  s.clients = 2;
  s.regions = 4;
  s.requests_served = 120;
  s.requests_failed = 1;
  s.protocol_errors = 3;
  s.queue_depth = 0;
  s.intra_op_threads = 2;
  s.socket = "/run/vaed/vaed.sock";
  s.pid = 4242;
  client::ModelInfo* m = &s.models.emplace_back();
  m->name = "taef2";
  m->kind = "taef2";
  m->weights_path = "/var/lib/vaed/taef2_decoder.safetensors";
  m->weights_sha256 = "89f5078dc26a2dd6b6ce5d18ef0cee482bb81c56ff56c417185f1699defd2138";
  m->resident_bytes = 5353996;
  m = &s.models.emplace_back();
  m->name = "demo";
  m->kind = "demo";
  m->demo_weights = true;
  m->resident_bytes = 5353996;
  return s;
}

TEST(StatusToJsonTest, CarriesEveryFieldInRawUnits) {
  const auto j = StatusToJson(SampleStatus());
  EXPECT_EQ(j["healthy"], true);
  EXPECT_EQ(j["daemon_version"], "0.1.0");
  EXPECT_DOUBLE_EQ(j["uptime_seconds"].get<double>(), 11525.0);
  EXPECT_EQ(j["pid"], 4242);
  EXPECT_EQ(j["socket"], "/run/vaed/vaed.sock");
  EXPECT_EQ(j["default_model"], "taef2");
  EXPECT_EQ(j["clients"], 2);
  EXPECT_EQ(j["regions"], 4);
  EXPECT_EQ(j["requests_served"], 120);
  EXPECT_EQ(j["requests_failed"], 1);
  EXPECT_EQ(j["protocol_errors"], 3);
  EXPECT_EQ(j["queue_depth"], 0);
  EXPECT_EQ(j["intra_op_threads"], 2);
  ASSERT_EQ(j["models"].size(), 2u);
  EXPECT_EQ(j["models"][0]["name"], "taef2");
  EXPECT_EQ(j["models"][0]["weights_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["models"][0]["resident_bytes"], 5353996);
  EXPECT_EQ(j["models"][0]["demo_weights"], false);
  EXPECT_EQ(j["models"][1]["demo_weights"], true);
}

TEST(FormatStatusTest, UsesHumanUnitsAndFlagsDemoModels) {
  const std::string text = FormatStatus(SampleStatus());
  EXPECT_THAT(text, HasSubstr("vaed 0.1.0 is healthy, up 3h 12m (pid 4242)"));
  EXPECT_THAT(text, HasSubstr("/run/vaed/vaed.sock"));
  EXPECT_THAT(text, HasSubstr("2 connected, 4 regions registered"));
  EXPECT_THAT(text, HasSubstr("120 served, 1 failed, 3 protocol errors"));
  EXPECT_THAT(text, HasSubstr("2 intra-op threads"));
  EXPECT_THAT(text, HasSubstr("5.1 MiB"));
  EXPECT_THAT(text, HasSubstr("89f5078dc26a..."));
  EXPECT_THAT(text, HasSubstr("taef2 *"));
  EXPECT_THAT(text, HasSubstr("DEMO"));
  EXPECT_THAT(text, HasSubstr("/var/lib/vaed/taef2_decoder.safetensors"));
}

TEST(FormatStatusTest, UnhealthyDaemonIsShoutedOut) {
  client::StatusReply s = SampleStatus();
  s.healthy = false;
  EXPECT_THAT(FormatStatus(s), HasSubstr("is UNHEALTHY"));
}

// Three groups of a 2-rank daemon, one of them rebuilt after a failure.
client::StatusReply StatusWithGroups(bool with_failure) {
  client::StatusReply s = SampleStatus();
  s.ranks = 2;
  // The group added last; valid until the next add.
  auto add = [&s](const std::string& name, uint32_t size,
                  std::vector<uint32_t> ranks) -> client::GroupStatus& {
    client::GroupStatus& g = s.groups.emplace_back();
    g.name = name;
    g.size = size;
    for (uint32_t r : ranks) g.ranks.push_back(r);
    g.state = "idle";
    return g;
  };
  add("s1.b0", 1, {0}).runs = 4;
  add("s1.b1", 1, {1});
  client::GroupStatus& pair = add("s2.b0", 2, {0, 1});
  pair.runs = 7;
  if (with_failure) {
    pair.generation = 1;
    pair.failures = 1;
    pair.last_failure = "collective gather timed out after 30000 ms";
  }
  return s;
}

TEST(StatusToJsonTest, CarriesRanksAndGroups) {
  const auto j = StatusToJson(StatusWithGroups(/*with_failure=*/true));
  EXPECT_EQ(j["ranks"], 2);
  ASSERT_EQ(j["groups"].size(), 3u);
  const auto& pair = j["groups"][2];
  EXPECT_EQ(pair["name"], "s2.b0");
  EXPECT_EQ(pair["size"], 2);
  EXPECT_EQ(pair["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(pair["generation"], 1);
  EXPECT_EQ(pair["state"], "idle");
  EXPECT_EQ(pair["runs"], 7);
  EXPECT_EQ(pair["failures"], 1);
  EXPECT_EQ(pair["last_failure"], "collective gather timed out after 30000 ms");
}

TEST(FormatStatusTest, ListsGroupsWithoutLastFailureColumnWhenNoneFailed) {
  const std::string text = FormatStatus(StatusWithGroups(/*with_failure=*/false));
  EXPECT_THAT(text, HasSubstr("VAE groups (2 ranks)"));
  EXPECT_THAT(text, HasSubstr("group  size  ranks  generation  state  runs  failures\n"));
  EXPECT_THAT(text, HasSubstr("s2.b0     2  0-1             0  idle      7         0\n"));
  EXPECT_THAT(text, HasSubstr("s1.b1     1  1               0  idle      0         0\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("last failure")));
}

TEST(FormatStatusTest, ShowsLastFailureWhenAGroupHasOne) {
  const std::string text = FormatStatus(StatusWithGroups(/*with_failure=*/true));
  EXPECT_THAT(text, HasSubstr("last failure"));
  EXPECT_THAT(text, HasSubstr("s2.b0     2  0-1             1  idle      7         1  collective "
                              "gather timed out after 30000 ms\n"));
  EXPECT_THAT(text, HasSubstr("s1.b1     1  1               0  idle      0         0  -\n"));
}

TEST(FormatStatusTest, DaemonWithoutGroupsPrintsNoGroupTable) {
  EXPECT_THAT(FormatStatus(SampleStatus()), ::testing::Not(HasSubstr("VAE groups")));
}

// SampleStatus plus the observability fields: latency per component, outcomes,
// memory, per-rank work and the metrics endpoint.
client::StatusReply StatusWithMetrics() {
  client::StatusReply s = StatusWithGroups(/*with_failure=*/false);
  client::ComponentStats* c = &s.components.emplace_back();
  c->component = "decode";
  c->count = 4;
  c->sum_seconds = 0.2;
  c->p50_seconds = 0.0125;
  c->p95_seconds = 0.09;
  c = &s.components.emplace_back();
  c->component = "video_vae.tile_merge";
  c->count = 2;
  c->sum_seconds = 0.0004;
  c->p50_seconds = 0.0002;
  c->p95_seconds = 0.0003;
  for (const auto& [name, count] :
       std::vector<std::pair<std::string, uint64_t>>{{"ok", 120}, {"busy", 1}, {"deadline", 0}}) {
    client::OutcomeCount& o = s.outcomes.emplace_back();
    o.outcome = name;
    o.count = count;
  }
  s.in_flight = 1;
  s.resident_weight_bytes = 10707992;
  s.plan_cache_entries = 3;
  s.peak_rss_bytes = 1288490189;
  for (uint32_t rank : {0u, 1u}) {
    client::RankStatus& r = s.rank_status.emplace_back();
    r.rank = rank;
    r.busy_seconds = rank == 0 ? 3.5 : 3.25;
    r.tiles = rank == 0 ? 14 : 13;
    r.last_imbalance = 1.04;
    r.device = "cuda";
    r.device_name = "NVIDIA H200";
    r.device_uuid = rank == 0 ? "GPU-0a000000-0000-0000-0000-000000000000"
                              : "GPU-5b000000-0000-0000-0000-000000000000";
    r.device_memory_used_bytes = uint64_t{12} << 30;
    r.device_memory_total_bytes = uint64_t{140} << 30;
  }
  s.groups[2].last_imbalance = 1.04;
  s.metrics_url = "http://127.0.0.1:9464/metrics";
  return s;
}

TEST(StatusToJsonTest, CarriesLatencyOutcomesMemoryRanksAndMetricsUrl) {
  const auto j = StatusToJson(StatusWithMetrics());
  const auto& decode = j["components"]["decode"];
  EXPECT_EQ(decode["count"], 4);
  EXPECT_DOUBLE_EQ(decode["sum_seconds"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(decode["p50_seconds"].get<double>(), 0.0125);
  EXPECT_DOUBLE_EQ(decode["p95_seconds"].get<double>(), 0.09);
  EXPECT_DOUBLE_EQ(decode["mean_seconds"].get<double>(), 0.05);
  EXPECT_TRUE(j["components"].contains("video_vae.tile_merge"));
  EXPECT_EQ(j["outcomes"], nlohmann::json({{"ok", 120}, {"busy", 1}, {"deadline", 0}}));
  EXPECT_EQ(j["in_flight"], 1);
  EXPECT_EQ(j["resident_weight_bytes"], 10707992);
  EXPECT_EQ(j["plan_cache_entries"], 3);
  EXPECT_EQ(j["peak_rss_bytes"], 1288490189);
  ASSERT_EQ(j["rank_status"].size(), 2u);
  EXPECT_EQ(j["rank_status"][1]["rank"], 1);
  EXPECT_DOUBLE_EQ(j["rank_status"][1]["busy_seconds"].get<double>(), 3.25);
  EXPECT_EQ(j["rank_status"][1]["tiles"], 13);
  EXPECT_DOUBLE_EQ(j["rank_status"][1]["last_imbalance"].get<double>(), 1.04);
  EXPECT_EQ(j["rank_status"][1]["device"], "cuda");
  EXPECT_EQ(j["rank_status"][1]["device_uuid"], "GPU-5b000000-0000-0000-0000-000000000000");
  EXPECT_EQ(j["rank_status"][1]["device_memory_total_bytes"], uint64_t{140} << 30);
  EXPECT_DOUBLE_EQ(j["groups"][2]["last_imbalance"].get<double>(), 1.04);
  EXPECT_EQ(j["metrics_url"], "http://127.0.0.1:9464/metrics");
}

TEST(StatusToJsonTest, DaemonWithoutMetricsHasEmptyComponentsAndOutcomes) {
  const auto j = StatusToJson(SampleStatus());
  EXPECT_EQ(j["components"], nlohmann::json::object());
  EXPECT_EQ(j["outcomes"], nlohmann::json::object());
  EXPECT_EQ(j["rank_status"], nlohmann::json::array());
  EXPECT_EQ(j["metrics_url"], "");
}

TEST(FormatStatusTest, ShowsLatencyTableWithHumanDurations) {
  const std::string text = FormatStatus(StatusWithMetrics());
  EXPECT_THAT(text, HasSubstr("\nlatency (since start)\n"
                              "component             count      p50      p95     mean\n"));
  EXPECT_THAT(text, HasSubstr("decode                    4  12.5 ms  90.0 ms  50.0 ms\n"));
  EXPECT_THAT(text, HasSubstr("video_vae.tile_merge      2   200 us   300 us   200 us\n"));
}

TEST(FormatStatusTest, ShowsOutcomesInFlightMemoryAndMetricsEndpoint) {
  const std::string text = FormatStatus(StatusWithMetrics());
  // Outcomes that never happened are left out.
  EXPECT_THAT(text, HasSubstr("outcomes       ok 120, busy 1\n"));
  EXPECT_THAT(text, HasSubstr("queue depth 0, 1 in flight, 2 intra-op threads"));
  EXPECT_THAT(text, HasSubstr("resident weights 10.2 MiB (all models, all ranks), 3 plan-cache "
                              "entries, peak RSS 1.2 GiB"));
  EXPECT_THAT(text, HasSubstr("metrics        http://127.0.0.1:9464/metrics\n"));
  // Each rank's device, by UUID, with its memory.
  EXPECT_THAT(text, HasSubstr("NVIDIA H200 GPU-5b000000-0000-0000-0000-000000000000 (12.0 GiB "
                              "of 140.0 GiB in use)"));
}

TEST(FormatStatusTest, SaysWhenTheMetricsEndpointIsOff) {
  client::StatusReply s = StatusWithMetrics();
  s.metrics_url.clear();
  EXPECT_THAT(FormatStatus(s), HasSubstr("metrics        endpoint: off\n"));
  EXPECT_THAT(FormatStatus(SampleStatus()),
              HasSubstr("metrics        endpoint: off (no latency data)\n"));
  EXPECT_THAT(FormatStatus(SampleStatus()), ::testing::Not(HasSubstr("latency (since start)")));
}

TEST(FormatStatusTest, ShowsPerRankWorkAndGroupImbalance) {
  const std::string text = FormatStatus(StatusWithMetrics());
  EXPECT_THAT(text, HasSubstr("ranks (since start)\n"
                              "rank    busy  tiles  last imbalance  device\n"));
  EXPECT_THAT(text, HasSubstr("   0  3.50 s     14           1.04x  NVIDIA H200 "
                              "GPU-0a000000-0000-0000-0000-000000000000 (12.0 GiB of 140.0 GiB "
                              "in use)\n"));
  EXPECT_THAT(text, HasSubstr("group  size  ranks  generation  state  runs  failures  last "
                              "imbalance\n"));
  EXPECT_THAT(text, HasSubstr("s2.b0     2  0-1             0  idle      7         0           "
                              "1.04x\n"));
  EXPECT_THAT(text, HasSubstr("s1.b1     1  1               0  idle      0         0               "
                              "-\n"));
}

}  // namespace
}  // namespace vaed::vaectl
