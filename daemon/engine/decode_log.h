// The engine's log lines about a finished decode (the request's one
// info-level record comes from the server: server/logging.h): the
// tile-scheduling decision, once per shape bucket (info); the geometry
// (debug); each fallback and non-finite or constant output (warn).
//
// Thread-safety: any rank thread (DecodeHistory is thread-safe).
#ifndef VAED_DAEMON_ENGINE_DECODE_LOG_H_
#define VAED_DAEMON_ENGINE_DECODE_LOG_H_

#include "daemon/engine/decode_history.h"
#include "daemon/engine/decode_job.h"
#include "daemon/engine/decode_result.h"

namespace vaed::engine {

// `seconds`: the decode's wall time (queue wait excluded).
void LogFinishedDecode(const DecodeJob& job, const DecodeResult& result, double seconds,
                       DecodeHistory* history);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_DECODE_LOG_H_
