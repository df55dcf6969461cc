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

}  // namespace
}  // namespace vaed::vaectl
