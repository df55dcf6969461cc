// Log line formats (daemon/server/logging.h): text keeps the daemon's
// pattern, JSON lines parse with ts/level/msg and escape whatever a message
// holds, and the per-request decode record reads as key=value (text) or as
// keys of the line's object (JSON).
#include "daemon/server/logging.h"

#include "daemon/server/config.h"
#include "daemon/server/refusal_rate_limit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/captured_log.h"

namespace vaed::server {
namespace {

using testing::CapturedLog;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

nlohmann::json Record() {
  return {{"request_id", 7},
          {"client_id", 3},
          {"client", "dit worker 0"},
          {"pid", 4242},
          {"model", "h3"},
          {"outcome", "ok"},
          {"latent_shape", {1, 48, 7, 45, 80}},
          {"output_shape", {1, 3, 25, 720, 1280}},
          {"audio_latent_shape", nullptr},
          {"mode", "optimized"},
          {"stack", "sequential"},
          {"stack_decision", "auto: tiles differ in shape"},
          {"compile", "plan"},
          {"group_size", 2},
          {"warm", true},
          {"error", ""},
          {"timings",
           {{"decode", 1.2344},
            {"video_vae.decode_latent", 1.1},
            {"video_vae.tile_merge", 0.0004567}}}};
}

TEST(LoggingTest, TextLinesKeepTheDaemonPattern) {
  CapturedLog log;
  SetupLogging(LogFormat::kText, LogLevel::kInfo);
  spdlog::info("vaed {} starting", "0.1.0");
  spdlog::debug("not shown at info");
  const auto lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} info vaed 0\.1\.0 starting)")))
      << lines[0];
}

TEST(LoggingTest, JsonLinesParseWithTimestampLevelAndMessage) {
  CapturedLog log;
  SetupLogging(LogFormat::kJson, LogLevel::kDebug);
  spdlog::info("plain");
  spdlog::warn("quote \" backslash \\ newline\n tab\t end");
  spdlog::debug("invalid utf-8: \xff\xfe");
  spdlog::error("unicode: é ✓");
  const auto lines = log.Lines();
  ASSERT_EQ(lines.size(), 4u);
  std::vector<nlohmann::json> parsed;
  for (const std::string& line : lines) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << line;
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_TRUE(std::regex_match(j.at("ts").get<std::string>(),
                                 std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << line;
    EXPECT_THAT(line, StartsWith("{\"ts\":"));
    parsed.push_back(std::move(j));
  }
  EXPECT_EQ(parsed[0]["level"], "info");
  EXPECT_EQ(parsed[0]["msg"], "plain");
  EXPECT_EQ(parsed[1]["level"], "warning");
  EXPECT_EQ(parsed[1]["msg"], "quote \" backslash \\ newline\n tab\t end");
  EXPECT_EQ(parsed[2]["level"], "debug");
  EXPECT_THAT(parsed[2]["msg"].get<std::string>(), StartsWith("invalid utf-8: "));
  EXPECT_EQ(parsed[3]["level"], "error");
  EXPECT_EQ(parsed[3]["msg"], "unicode: é ✓");
  EXPECT_FALSE(parsed[0].contains("event"));
}

TEST(LoggingTest, JsonDecodeRecordMergesItsFields) {
  CapturedLog log;
  SetupLogging(LogFormat::kJson, LogLevel::kInfo);
  nlohmann::json record = Record();
  record["msg"] = "must not replace the message";
  LogDecodeRecord(record);
  spdlog::info("after");
  const auto lines = log.Lines();
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["msg"], "decode");
  EXPECT_EQ(j["event"], "decode");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["request_id"], 7);
  EXPECT_EQ(j["client"], "dit worker 0");
  EXPECT_EQ(j["latent_shape"], nlohmann::json({1, 48, 7, 45, 80}));
  EXPECT_EQ(j["warm"], true);
  EXPECT_DOUBLE_EQ(j["timings"]["video_vae.decode_latent"].get<double>(), 1.1);
  // The record belongs to its own line only.
  const nlohmann::json next = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(next["msg"], "after");
  EXPECT_FALSE(next.contains("request_id"));
}

TEST(LoggingTest, TextDecodeRecordIsOneKeyValueLine) {
  CapturedLog log;
  SetupLogging(LogFormat::kText, LogLevel::kInfo);
  LogDecodeRecord(Record());
  const auto lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  const std::string& line = lines[0];
  EXPECT_THAT(line, HasSubstr(" info decode: request_id=7 client_id=3 client=\"dit worker 0\" "
                              "pid=4242 model=h3 outcome=ok mode=optimized "
                              "latent_shape=[1,48,7,45,80] output_shape=[1,3,25,720,1280] "
                              "stack=sequential stack_decision=\"auto: tiles differ in shape\" "
                              "compile=plan group_size=2 warm=true timings: decode=1.234s "
                              "video_vae.decode_latent=1.1s video_vae.tile_merge=0.0004567s"))
      << line;
  // Null fields and empty strings are left out.
  EXPECT_THAT(line, Not(HasSubstr("audio_latent_shape")));
  EXPECT_THAT(line, Not(HasSubstr("error=")));
}

TEST(LoggingTest, TextDecodeRecordQuotesAwkwardValues) {
  CapturedLog log;
  SetupLogging(LogFormat::kText, LogLevel::kInfo);
  LogDecodeRecord({{"request_id", 9},
                   {"outcome", "validation_error"},
                   {"error", "invalid_argument: latent.shape[1] is 16; \"x\"=y"},
                   {"zeta", "a=b"}});
  const auto lines = log.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("decode: request_id=9 outcome=validation_error "
                                  "error=\"invalid_argument: latent.shape[1] is 16; \\\"x\\\"=y\" "
                                  "zeta=\"a=b\""))
      << lines[0];
  EXPECT_THAT(lines[0], Not(HasSubstr("timings:")));
}

TEST(LoggingTest, DecodeRecordFollowsTheLevel) {
  CapturedLog log;
  SetupLogging(LogFormat::kJson, LogLevel::kWarn);
  LogDecodeRecord(Record());
  EXPECT_TRUE(log.Lines().empty());
}

// Regression: refusals other than decodes were free text or
// not logged at all. Their record has its own event and warning level.
TEST(LoggingTest, RefusalRecordIsAWarningWithItsOwnEvent) {
  CapturedLog log;
  SetupLogging(LogFormat::kJson, LogLevel::kInfo);
  LogRefusalRecord({{"request", "unparsable"},
                    {"outcome", "validation_error"},
                    {"uid", 1000},
                    {"pid", 77},
                    {"error", "protocol_error: message of 5 bytes is not a valid vaed.v1.Request"}});
  SetupLogging(LogFormat::kText, LogLevel::kInfo);
  LogRefusalRecord({{"request_id", 4}, {"request", "register_region"}, {"outcome", "busy"}});
  const auto lines = log.Lines();
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["msg"], "refusal");
  EXPECT_EQ(j["event"], "refusal");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["request"], "unparsable");
  EXPECT_EQ(j["pid"], 77);
  EXPECT_THAT(lines[1], HasSubstr("refusal: request_id=4 outcome=busy request=register_region"))
      << lines[1];
  // A decode record after it is a decode record again.
  SetupLogging(LogFormat::kJson, LogLevel::kInfo);
  LogDecodeRecord(Record());
  EXPECT_EQ(nlohmann::json::parse(log.Lines().back())["event"], "decode");
}

TEST(RefusalRateLimitTest, BurstPerWindowThenCountsWhatItSuppressed) {
  RefusalRateLimit limit(3, std::chrono::seconds(10));
  const auto t0 = RefusalRateLimit::Clock::now();
  uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limit.Admit(t0 + std::chrono::seconds(i), &suppressed)) << i;
    EXPECT_EQ(suppressed, 0u);
  }
  EXPECT_FALSE(limit.Admit(t0 + std::chrono::seconds(4), &suppressed));
  EXPECT_FALSE(limit.Admit(t0 + std::chrono::seconds(9), &suppressed));
  EXPECT_EQ(limit.suppressed_total(), 2u);
  // The next window: logged again, saying how many were not.
  ASSERT_TRUE(limit.Admit(t0 + std::chrono::seconds(10), &suppressed));
  EXPECT_EQ(suppressed, 2u);
  ASSERT_TRUE(limit.Admit(t0 + std::chrono::seconds(11), &suppressed));
  EXPECT_EQ(suppressed, 0u);
}

// log.format and log.level are parsed where they enter (the config reader,
// the flags); a value outside their sets never reaches SetupLogging.
TEST(LoggingTest, BadFormatOrLevelNamesTheKey) {
  const auto format = ParseConfigToml("[log]\nformat = \"xml\"\n", "t.toml", DaemonOptions{});
  EXPECT_EQ(format.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(format.status().message(), HasSubstr("log.format is 'xml'"));
  const auto level = ParseConfigToml("[log]\nlevel = \"loud\"\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(level.status().message(), HasSubstr("log.level is 'loud'"));
}

// Every level name sets the spdlog level of the same name.
TEST(LoggingTest, EachLevelNameSetsThatSpdlogLevel) {
  CapturedLog log;
  for (const auto& [level, name] : kLogLevelNames) {
    SetupLogging(LogFormat::kText, level);
    EXPECT_EQ(spdlog::level::to_string_view(spdlog::get_level()),
              name == "warn" ? std::string_view("warning") : name);
  }
  SetupLogging(LogFormat::kText, LogLevel::kInfo);
}

}  // namespace
}  // namespace vaed::server
