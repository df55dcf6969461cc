// TEMPORARY shim until the config-table branch moves ExecutorOptions and
// GroupOptions into the engine (issue 18 §1).
#ifndef VAED_DAEMON_ENGINE_ENGINE_OPTIONS_H_
#define VAED_DAEMON_ENGINE_ENGINE_OPTIONS_H_

#include "daemon/server/config.h"

namespace vaed::engine {
using server::ExecutorOptions;
using server::GroupOptions;
using server::MakeGroupLayout;
}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_ENGINE_OPTIONS_H_
