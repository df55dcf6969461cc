// What vaed checks before anything slow: a start that is
// going to fail must fail in milliseconds, not after minutes of loading
// weights. ValidateOptions (config.h) has already checked the values and
// their combinations; this checks them against the machine: the socket's
// group and access lists resolve, the socket's directory is safe (created
// when missing) and no daemon serves the socket, and every model file named
// exists, is a regular file and is readable by this process. Nothing is
// opened but the socket directory; weights are not read.
//
// Not checked here: whether the metrics port is free (the endpoint is
// optional and a port can be taken between a check and the bind; a bind
// failure is logged and the daemon serves on, metrics_http.h), and the
// devices (rank_devices.h, at rank set-up).
//
// Thread-safety: none needed (start-up).
#ifndef VAED_DAEMON_SERVER_STARTUP_CHECKS_H_
#define VAED_DAEMON_SERVER_STARTUP_CHECKS_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "daemon/server/config.h"
#include "vaed/status.h"

namespace vaed::server {

// The checks above, in that order; the first failure, naming its key
// (kFailedPrecondition for the socket and the files, the resolvers' errors
// for groups and uids).
Status CheckBeforeLoading(const DaemonOptions& options);

// The socket part, also repeated just before binding (the warm-up may take
// minutes): the directory is prepared (access_control.h
// PrepareSocketDirectory), and whatever is at `path` is nothing, or a
// stale socket no process serves. Errors: kFailedPrecondition naming
// server.socket.
Status CheckSocketPath(const std::string& path, std::optional<gid_t> group);

// Each file a model entry names (its keys weights, config, audio_weights,
// audio_config) exists, is a regular file and is readable.
// kFailedPrecondition naming "models.entry[i].<key>" and the path.
Status CheckModelFiles(const DaemonOptions& options);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_STARTUP_CHECKS_H_
