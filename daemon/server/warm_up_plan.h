// Which decodes the start-up warm-up runs (engine/warm_up.h) for the
// models' `warm_shapes`: the decode a request without options gets under
// the daemon's default profile, plus the compiled plans that requests of
// another allowed profile would use. Settings are resolved by the same
// code that resolves a request's options (decode_options.h), so the
// warm-up decodes the way the first request will.
//
// Passes of each warm shape, in order:
//   1. "tile peaks for stack_tiling auto" (eager, one tile per call): only
//      when the first decode below schedules tiles with auto, which decides
//      from peaks measured on earlier calls of the tile shape; without it
//      the warm-up would run sequentially and the first request stack.
//   2. "profile <default>": the default profile's settings; compile AUTO
//      becomes ON (the shape's plans are built now, not at a later
//      sighting).
//   3. "compiled plans (profile <p>)": when 2 runs eager (profile safe) and
//      the model has compiled plans, the first of optimized and diagnostic
//      that profiles.allowed lists, with compile ON; none when requests
//      may not use plans.
//
// Thread-safety: pure function.
#ifndef VAED_DAEMON_SERVER_WARM_UP_PLAN_H_
#define VAED_DAEMON_SERVER_WARM_UP_PLAN_H_

#include <vector>

#include "daemon/engine/request_memory.h"
#include "daemon/engine/warm_up.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/profile_options.h"
#include "vaed/status.h"

namespace vaed::server {

// The warm-ups of `registry`'s warm shapes (rank 0's registry; every rank
// holds the same models in the same order). Empty when none is configured.
// Each shape is planned and its estimated peak checked against `memory`
// (what one request may use, engine/request_memory.h) as a request's is,
// before anything is allocated: a warm shape no request of that size could
// decode fails the start instead of allocating until the host swaps.
// Errors: the model's Plan() refusal or CheckRequestMemory's
// kResourceExhausted, and a profile the model cannot be decoded under (the
// resolver's kInvalidArgument); each with the entry's field
// ("models.entry[0].warm_shapes[1]") and a context naming it.
Result<std::vector<engine::WarmUp>> PlanWarmUps(const models::ModelRegistry& registry,
                                                const ProfileOptions& profiles,
                                                const engine::RequestMemory& memory = {});

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_WARM_UP_PLAN_H_
