#include "ops/vaectl/top_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/ops/test_util.h"

namespace vaed::vaectl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Row(const std::string& frame, const std::string& first) {
  return ops_test::TableRow(frame, first);
}

// A daemon 100 s after start-up: 100 requests, two ranks, one group.
client::StatusReply Before() {
  client::StatusReply s;
  s.daemon_version = "0.3.0";
  s.pid = 4242;
  s.uptime_seconds = 100.0;
  s.healthy = true;
  s.socket = "/run/vaed/vaed.sock";
  s.requests_served = 99;
  s.requests_failed = 1;
  s.clients = 2;
  s.metrics_url = "http://127.0.0.1:9464/metrics";
  auto outcome = [&s](const std::string& name, uint64_t count) {
    client::OutcomeCount* o = &s.outcomes.emplace_back();
    o->outcome = name;
    o->count = count;
  };
  outcome("ok", 99);
  outcome("busy", 1);
  outcome("deadline", 0);
  client::ComponentStats* c = &s.components.emplace_back();
  c->component = "decode";
  c->count = 99;
  c->sum_seconds = 9.9;
  c->p50_seconds = 0.0125;
  c->p95_seconds = 0.030;
  c = &s.components.emplace_back();
  c->component = "video_vae.tile_decode";
  c->count = 10;
  c->sum_seconds = 4.0;
  c->p50_seconds = 0.25;
  c->p95_seconds = 1.5;
  for (uint32_t rank : {0u, 1u}) {
    client::RankStatus* r = &s.rank_status.emplace_back();
    r->rank = rank;
    r->busy_seconds = 10.0;
    r->tiles = 40;
  }
  client::GroupStatus* g = &s.groups.emplace_back();
  g->name = "s2.b0";
  g->size = 2;
  g->state = "idle";
  g->generation = 1;
  g->runs = 10;
  return s;
}

// Two seconds later: 4 more served, 1 more failed (busy); rank 0 worked
// 0.5 s of the 2 s, rank 1 nothing.
client::StatusReply After() {
  client::StatusReply s = Before();
  s.uptime_seconds = 102.0;
  s.requests_served = 103;
  s.requests_failed = 2;
  s.queue_depth = 3;
  s.in_flight = 1;
  s.resident_weight_bytes = 10695475;  // 10.2 MiB
  s.plan_cache_entries = 3;
  s.peak_rss_bytes = 1288490189;  // 1.2 GiB
  s.outcomes[0].count = 103;
  s.outcomes[1].count = 2;
  client::ComponentStats* decode = &s.components[0];
  decode->count = 103;
  decode->sum_seconds = 10.7;  // the 4 new ones took 0.8 s: 200 ms each
  decode->p50_seconds = 0.0130;
  decode->p95_seconds = 0.240;
  s.rank_status[0].busy_seconds = 10.5;
  s.rank_status[0].tiles = 44;
  s.rank_status[0].last_imbalance = 1.07;
  s.rank_status[1].last_imbalance = 1.07;
  s.groups[0].runs = 11;
  s.groups[0].state = "busy";
  s.groups[0].last_imbalance = 1.07;
  return s;
}

TEST(RenderTopTest, HeaderNamesVersionPidUptimeHealthAndSocket) {
  const client::StatusReply now = After();
  const std::string frame = RenderTop(now, nullptr, 0, 0);
  EXPECT_EQ(frame.substr(0, frame.find('\n')),
            "vaed 0.3.0  pid 4242  up 1m 42s  healthy  /run/vaed/vaed.sock");
}

TEST(RenderTopTest, UnhealthyDaemonShowsWhy) {
  client::StatusReply now = After();
  now.healthy = false;
  now.health = "rank 1 lost its CUDA context";
  EXPECT_THAT(RenderTop(now, nullptr, 0, 0), HasSubstr("UNHEALTHY: rank 1 lost its CUDA context"));
}

TEST(RenderTopTest, RequestsPerSecondComeFromTheDeltaBetweenRefreshes) {
  const client::StatusReply before = Before(), now = After();
  // 5 more requests (4 served + 1 failed) over 2 s.
  EXPECT_THAT(Row(RenderTop(now, &before, 2.0, 0), "requests/s"),
              ElementsAre("requests/s", "2.50 (last 2.00 s)", "total 105: 103 served, 2 failed"));
}

TEST(RenderTopTest, FirstFrameShowsAveragesSinceStart) {
  const std::string frame = RenderTop(After(), nullptr, 0, 0);
  // 105 requests over 102 s of uptime.
  EXPECT_THAT(Row(frame, "requests/s"),
              ElementsAre("requests/s", "1.03 (since start)", "total 105: 103 served, 2 failed"));
  EXPECT_THAT(Row(frame, "decode"),
              ElementsAre("decode", "103", "-", "13.0 ms", "240.0 ms", "103.9 ms", "-"));
  // Rank 0: 10.5 busy seconds over 102 s.
  EXPECT_THAT(Row(frame, "0"), ElementsAre("0", "10.3%", "10.50 s", "44", "1.07x"));
}

TEST(RenderTopTest, AnotherDaemonProcessIsNotABaseline) {
  client::StatusReply before = Before();
  before.pid = 1;  // the daemon restarted between refreshes
  EXPECT_THAT(RenderTop(After(), &before, 2.0, 0), HasSubstr("(since start)"));
  before = Before();
  before.uptime_seconds = 500.0;  // uptime went back: a restart with the same pid
  EXPECT_THAT(RenderTop(After(), &before, 2.0, 0), HasSubstr("(since start)"));
}

TEST(RenderTopTest, ComponentTableHasLifetimePercentilesAndTheLastRefreshsMean) {
  const client::StatusReply before = Before(), now = After();
  const std::string frame = RenderTop(now, &before, 2.0, 0);
  EXPECT_THAT(Row(frame, "component"),
              ElementsAre("component", "count", "new", "p50", "p95", "mean", "recent"));
  // 4 new decodes that took 0.8 s together; mean 10.7 s / 103.
  EXPECT_THAT(Row(frame, "decode"),
              ElementsAre("decode", "103", "4", "13.0 ms", "240.0 ms", "103.9 ms", "200.0 ms"));
  // Nothing new: no recent mean.
  EXPECT_THAT(
      Row(frame, "video_vae.tile_decode"),
      ElementsAre("video_vae.tile_decode", "10", "0", "250.0 ms", "1.50 s", "400.0 ms", "-"));
}

TEST(RenderTopTest, RankUtilisationIsBusySecondsGainedOverWallSeconds) {
  const client::StatusReply before = Before(), now = After();
  const std::string frame = RenderTop(now, &before, 2.0, 0);
  EXPECT_THAT(Row(frame, "rank"), ElementsAre("rank", "util", "busy", "tiles", "last imbalance"));
  EXPECT_THAT(Row(frame, "0"), ElementsAre("0", "25.0%", "10.50 s", "44", "1.07x"));
  EXPECT_THAT(Row(frame, "1"), ElementsAre("1", "0.0%", "10.00 s", "40", "1.07x"));
}

TEST(RenderTopTest, UtilisationIsCappedAtOneHundredPercent) {
  // A rank is credited its busy time when its work ends: 5 s in a 2 s span.
  const client::StatusReply before = Before();
  client::StatusReply now = After();
  now.rank_status[0].busy_seconds = 15.0;
  EXPECT_THAT(Row(RenderTop(now, &before, 2.0, 0), "0"),
              ElementsAre("0", "100.0%", "15.00 s", "44", "1.07x"));
}

TEST(RenderTopTest, ShowsOutcomesQueueMemoryAndMetricsEndpoint) {
  const client::StatusReply before = Before(), now = After();
  const std::string frame = RenderTop(now, &before, 2.0, 0);
  // deadline has no count yet and is left out.
  EXPECT_THAT(Row(frame, "outcomes"), ElementsAre("outcomes", "ok 103, busy 2"));
  EXPECT_THAT(frame, HasSubstr("queue       3  in flight 1  clients 2  quarantined 0\n"));
  EXPECT_THAT(Row(frame, "memory"),
              ElementsAre("memory",
                          "resident weights 10.2 MiB, 3 plan-cache entries, peak RSS "
                          "1.2 GiB"));
  EXPECT_THAT(Row(frame, "metrics"), ElementsAre("metrics", "http://127.0.0.1:9464/metrics"));
  client::StatusReply off = now;
  off.metrics_url.clear();
  EXPECT_THAT(Row(RenderTop(off, &before, 2.0, 0), "metrics"),
              ElementsAre("metrics", "endpoint: off"));
}

TEST(RenderTopTest, ListsGroupsWithStateGenerationRunsAndImbalance) {
  const client::StatusReply before = Before(), now = After();
  const std::string frame = RenderTop(now, &before, 2.0, 0);
  EXPECT_THAT(Row(frame, "group"),
              ElementsAre("group", "state", "generation", "runs", "last imbalance"));
  EXPECT_THAT(Row(frame, "s2.b0"), ElementsAre("s2.b0", "busy", "1", "11", "1.07x"));
}

TEST(RenderTopTest, LeavesOutTablesTheReplyHasNoDataFor) {
  client::StatusReply bare;
  bare.daemon_version = "0.1.0";
  bare.healthy = true;
  const std::string frame = RenderTop(bare, nullptr, 0, 0);
  EXPECT_THAT(frame, HasSubstr("requests/s"));
  EXPECT_THAT(frame, Not(HasSubstr("component")));
  EXPECT_THAT(frame, Not(HasSubstr("rank")));
  EXPECT_THAT(frame, Not(HasSubstr("group")));
  EXPECT_THAT(Row(frame, "outcomes"), ElementsAre("outcomes", "-"));
  // No uptime yet: no rate either.
  EXPECT_THAT(Row(frame, "requests/s"),
              ElementsAre("requests/s", "- (since start)", "total 0: 0 served, 0 failed"));
}

TEST(RenderTopTest, ClipsEveryLineToTheTerminalWidth) {
  const client::StatusReply before = Before(), now = After();
  const std::string frame = RenderTop(now, &before, 2.0, 30);
  std::istringstream lines(frame);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 30u) << line;
    ++count;
  }
  // Clipping shortens lines, it does not drop them.
  EXPECT_EQ(count, static_cast<int>(std::count(frame.begin(), frame.end(), '\n')));
  EXPECT_GT(RenderTop(now, &before, 2.0, 0).size(), frame.size());
}

TEST(RenderTopTest, UnavailableFrameSaysWhy) {
  EXPECT_EQ(RenderTopUnavailable("/run/vaed/vaed.sock", "connection refused", 0),
            "vaed at /run/vaed/vaed.sock\ndaemon unavailable: connection refused\n");
}

TEST(ClipLinesTest, NeverSplitsAUtf8Character) {
  // "é" is two bytes; a cut after 2 bytes would split it.
  EXPECT_EQ(ClipLines("aé\nxyz\n", 2), "a\nxy\n");
  EXPECT_EQ(ClipLines("abc", 0), "abc");
  EXPECT_EQ(ClipLines("abc", 5), "abc");
}

}  // namespace
}  // namespace vaed::vaectl
