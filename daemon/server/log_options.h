// The daemon's log options (config table [log]; logging.h applies them).
//
// Thread-safety: plain values and constant tables.
#ifndef VAED_DAEMON_SERVER_LOG_OPTIONS_H_
#define VAED_DAEMON_SERVER_LOG_OPTIONS_H_

#include "daemon/models/named_enum.h"

namespace vaed::server {

// The least severe message logged (log.level), spdlog's levels.
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };
inline constexpr models::NameTable<LogLevel, 7> kLogLevelNames = {{
    {LogLevel::kTrace, "trace"},
    {LogLevel::kDebug, "debug"},
    {LogLevel::kInfo, "info"},
    {LogLevel::kWarn, "warn"},
    {LogLevel::kError, "error"},
    {LogLevel::kCritical, "critical"},
    {LogLevel::kOff, "off"},
}};

// The log line format (log.format; logging.h): "text" (human-readable) or
// "json" (one JSON object per line with ts, level, msg, for log shippers;
// the per-request decode records carry their fields as JSON keys).
enum class LogFormat { kText, kJson };
inline constexpr models::NameTable<LogFormat, 2> kLogFormatNames = {{
    {LogFormat::kText, "text"},
    {LogFormat::kJson, "json"},
}};

struct LogOptions {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_LOG_OPTIONS_H_
