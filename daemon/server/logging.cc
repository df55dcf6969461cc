#include "daemon/server/logging.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>

namespace vaed::server {

namespace {

// The text pattern main.cc has always used; text output must not change.
constexpr char kTextPattern[] = "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v";

std::atomic<bool> g_json{false};

// The decode record being logged by this thread, for the JSON formatter to
// merge (spdlog's default logger is synchronous: the formatter runs on the
// thread that logs).
thread_local const nlohmann::json* t_record = nullptr;
thread_local const char* t_event = "decode";  // its "event" (and "msg")

// "2026-12-01T05:06:08.564Z"
std::string UtcTimestamp(std::chrono::system_clock::time_point t) {
  const auto since_epoch = t.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const std::time_t tt = static_cast<std::time_t>(seconds.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(millis));
  return buf;
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    line["ts"] = UtcTimestamp(msg.time);
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    line["msg"] = std::string(msg.payload.data(), msg.payload.size());
    if (t_record != nullptr && t_record->is_object()) {
      line["event"] = t_event;
      for (const auto& [key, value] : t_record->items()) {
        if (key == "ts" || key == "level" || key == "msg" || key == "event") continue;
        line[key] = value;
      }
    }
    // Replace invalid UTF-8 rather than throw: a formatter must not fail.
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

// A text value: bare when it is one token, else a JSON string.
std::string Quoted(const std::string& s) {
  const bool bare = !s.empty() && std::none_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
  });
  if (bare) return s;
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string RawText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ',';
      out += RawText(v[i]);
    }
    return out + "]";
  }
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Seconds(const nlohmann::json& v) {
  if (!v.is_number()) return Quoted(RawText(v));
  const double s = v.get<double>();
  char buf[32];
  std::snprintf(buf, sizeof(buf), s >= 100 ? "%.1fs" : "%.4gs", s);
  return buf;
}

bool Skipped(const nlohmann::json& v) {
  return v.is_null() || (v.is_string() && v.get_ref<const std::string&>().empty());
}

// The fields of LogDecodeRecord() in the order a reader scans them.
constexpr std::array<std::string_view, 18> kFieldOrder = {"request_id",
                                                          "client_id",
                                                          "client",
                                                          "pid",
                                                          "model",
                                                          "outcome",
                                                          "error",
                                                          "mode",
                                                          "latent_shape",
                                                          "output_shape",
                                                          "audio_latent_shape",
                                                          "audio_output_shape",
                                                          "stack",
                                                          "stack_decision",
                                                          "compile",
                                                          "group_size",
                                                          "warm",
                                                          "fallbacks"};

std::string RecordText(const char* event, const nlohmann::json& fields) {
  std::string line = std::string(event) + ":";
  auto add = [&](const std::string& key, const nlohmann::json& value) {
    if (Skipped(value)) return;
    line += ' ';
    line += key;
    line += '=';
    line += Quoted(RawText(value));
  };
  if (!fields.is_object()) {
    add("record", fields);
    return line;
  }
  for (std::string_view key : kFieldOrder) {
    auto it = fields.find(std::string(key));
    if (it != fields.end()) add(std::string(key), *it);
  }
  for (const auto& [key, value] : fields.items()) {  // std::map order: by name
    if (key == "timings" ||
        std::find(kFieldOrder.begin(), kFieldOrder.end(), key) != kFieldOrder.end()) {
      continue;
    }
    add(key, value);
  }
  auto timings = fields.find("timings");
  if (timings != fields.end() && timings->is_object() && !timings->empty()) {
    line += " timings:";
    // The whole request first, then its parts by name.
    auto decode = timings->find("decode");
    if (decode != timings->end()) line += " decode=" + Seconds(*decode);
    for (const auto& [component, seconds] : timings->items()) {
      if (component == "decode") continue;
      line += ' ' + Quoted(component) + '=' + Seconds(seconds);
    }
  }
  return line;
}

}  // namespace

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() {
  return std::make_unique<JsonFormatter>();
}

namespace {

spdlog::level::level_enum SpdlogLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kCritical: return spdlog::level::critical;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void SetupLogging(LogFormat format, LogLevel level) {
  spdlog::set_level(SpdlogLevel(level));
  if (format == LogFormat::kJson) {
    spdlog::set_formatter(MakeJsonLogFormatter());
    g_json.store(true);
  } else {
    spdlog::set_pattern(kTextPattern);
    g_json.store(false);
  }
}

namespace {

void LogRecord(const char* event, spdlog::level::level_enum level, const nlohmann::json& fields) {
  if (!spdlog::should_log(level)) return;
  if (g_json.load()) {
    t_record = &fields;
    t_event = event;
    spdlog::log(level, "{}", event);
    t_record = nullptr;
    t_event = "decode";
  } else {
    spdlog::log(level, "{}", RecordText(event, fields));
  }
}

}  // namespace

void LogDecodeRecord(const nlohmann::json& fields) {
  LogRecord("decode", spdlog::level::info, fields);
}

void LogRefusalRecord(const nlohmann::json& fields) {
  LogRecord("refusal", spdlog::level::warn, fields);
}

}  // namespace vaed::server
