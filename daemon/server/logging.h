// The daemon's log output (log.level, log.format) and its one structured
// record per decode request.
//
// Text format (the default), one line per message on spdlog's default
// logger:
//   2026-12-01T06:06:08.564 info vaed 0.1.0 starting (config: ...)
// (local time, milliseconds; level name coloured on a terminal).
//
// JSON format (log.format = "json", for log shippers): one JSON object per
// line,
//   {"ts":"2026-12-01T05:06:08.564Z","level":"info","msg":"vaed 0.1.0 starting ..."}
// ts in UTC with milliseconds; level one of trace, debug, info, warning,
// error, critical; msg the message text. Invalid UTF-8 in a message is
// replaced (U+FFFD), so every line parses.
//
// Thread-safety: SetupLogging() once at start-up (before other threads
// log); LogDecodeRecord() from any thread.
#ifndef VAED_DAEMON_SERVER_LOGGING_H_
#define VAED_DAEMON_SERVER_LOGGING_H_

#include <spdlog/formatter.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "daemon/server/log_options.h"

namespace vaed::server {

// Sets the level and line format of spdlog's default logger (and of every
// logger registered with spdlog). Text keeps the sink and writes the
// pattern above.
void SetupLogging(LogFormat format, LogLevel level);

// Logs the record of one decode request at info level. `fields` is a JSON
// object; the daemon sends request_id, client_id, client, pid, model,
// outcome, error, latent_shape, output_shape, audio_latent_shape,
// audio_output_shape, mode (profile), stack, stack_decision, compile,
// group_size, warm, fallbacks, and timings (an object: component ->
// seconds). Null fields and empty strings are left out.
//
// Text: one line "decode: request_id=7 client_id=3 model=h3 ... timings:
// decode=1.234s video_vae.decode_latent=1.1s", fields in the order above
// (others after them, by name), values with spaces, quotes, '=' or
// control characters quoted as JSON strings, arrays as [a,b,c].
// JSON: the fields merged into the line's object, with "msg":"decode" and
// "event":"decode" (fields named ts, level, msg or event are dropped).
void LogDecodeRecord(const nlohmann::json& fields);

// Logs the record of a refused request that is not a Decode (those are
// decode records with an "error"), at warning level, as LogDecodeRecord
// does: text "refusal: request_id=3 request=register_region uid=1000
// pid=77 outcome=validation_error error=..." (fields in LogDecodeRecord's
// order, then by name); JSON "msg":"refusal","event":"refusal" with the
// fields merged. The request handler rate-limits these
// (refusal_rate_limit.h) and adds "suppressed" = refusals not logged since
// the last one that was.
void LogRefusalRecord(const nlohmann::json& fields);

// The JSON line formatter (exposed for tests and for loggers other than the
// default one). Stateless; each call formats one line.
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_LOGGING_H_
