#include "ops/vaectl/status_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vaed::vaectl {
namespace {

using ::testing::HasSubstr;

v1::StatusReply SampleStatus() {
  v1::StatusReply s;
  s.set_daemon_version("0.1.0");
  s.set_uptime_seconds(3 * 3600 + 12 * 60 + 5);
  s.set_healthy(true);
  s.set_default_model("taef2");
  s.set_clients(2);
  s.set_regions(4);
  s.set_requests_served(120);
  s.set_requests_failed(1);
  s.set_protocol_errors(3);
  s.set_queue_depth(0);
  s.set_intra_op_threads(2);
  s.set_socket("/run/vaed/vaed.sock");
  s.set_pid(4242);
  auto* m = s.add_models();
  m->set_name("taef2");
  m->set_kind("taef2");
  m->set_weights_path("/var/lib/vaed/taef2_decoder.safetensors");
  m->set_weights_sha256("89f5078dc26a2dd6b6ce5d18ef0cee482bb81c56ff56c417185f1699defd2138");
  m->set_resident_bytes(5353996);
  m = s.add_models();
  m->set_name("demo");
  m->set_kind("demo");
  m->set_demo_weights(true);
  m->set_resident_bytes(5353996);
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
  v1::StatusReply s = SampleStatus();
  s.set_healthy(false);
  EXPECT_THAT(FormatStatus(s), HasSubstr("is UNHEALTHY"));
}

// Three groups of a 2-rank daemon, one of them rebuilt after a failure.
v1::StatusReply StatusWithGroups(bool with_failure) {
  v1::StatusReply s = SampleStatus();
  s.set_ranks(2);
  auto add = [&s](const std::string& name, uint32_t size, std::vector<uint32_t> ranks) {
    v1::GroupStatus* g = s.add_groups();
    g->set_name(name);
    g->set_size(size);
    for (uint32_t r : ranks) g->add_ranks(r);
    g->set_state("idle");
    return g;
  };
  add("s1.b0", 1, {0})->set_runs(4);
  add("s1.b1", 1, {1});
  v1::GroupStatus* pair = add("s2.b0", 2, {0, 1});
  pair->set_runs(7);
  if (with_failure) {
    pair->set_generation(1);
    pair->set_failures(1);
    pair->set_last_failure("collective gather timed out after 30000 ms");
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
v1::StatusReply StatusWithMetrics() {
  v1::StatusReply s = StatusWithGroups(/*with_failure=*/false);
  v1::ComponentStats* c = s.add_components();
  c->set_component("decode");
  c->set_count(4);
  c->set_sum_seconds(0.2);
  c->set_p50_seconds(0.0125);
  c->set_p95_seconds(0.09);
  c = s.add_components();
  c->set_component("video_vae.tile_merge");
  c->set_count(2);
  c->set_sum_seconds(0.0004);
  c->set_p50_seconds(0.0002);
  c->set_p95_seconds(0.0003);
  for (const auto& [name, count] :
       std::vector<std::pair<std::string, uint64_t>>{{"ok", 120}, {"busy", 1}, {"deadline", 0}}) {
    v1::OutcomeCount* o = s.add_outcomes();
    o->set_outcome(name);
    o->set_count(count);
  }
  s.set_in_flight(1);
  s.set_resident_weight_bytes(10707992);
  s.set_plan_cache_entries(3);
  s.set_peak_rss_bytes(1288490189);
  for (uint32_t rank : {0u, 1u}) {
    v1::RankStatus* r = s.add_rank_status();
    r->set_rank(rank);
    r->set_busy_seconds(rank == 0 ? 3.5 : 3.25);
    r->set_tiles(rank == 0 ? 14 : 13);
    r->set_last_imbalance(1.04);
    r->set_device("cuda");
    r->set_device_name("NVIDIA H200");
    r->set_device_uuid(rank == 0 ? "GPU-0a000000-0000-0000-0000-000000000000"
                                 : "GPU-5b000000-0000-0000-0000-000000000000");
    r->set_device_memory_used_bytes(uint64_t{12} << 30);
    r->set_device_memory_total_bytes(uint64_t{140} << 30);
  }
  s.mutable_groups(2)->set_last_imbalance(1.04);
  s.set_metrics_url("http://127.0.0.1:9464/metrics");
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
  v1::StatusReply s = StatusWithMetrics();
  s.clear_metrics_url();
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
