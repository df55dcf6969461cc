// The start-up warm-up: before the daemon reports READY,
// every rank decodes a synthetic latent of each configured warm shape (the
// models' `warm_shapes`) with its own model instance, on its own thread,
// through the steps a request's decode runs: the latent's finiteness
// check, the model's Decode() (tile calls, blend, temporal windows;
// compiled plans built where a pass asks for them), the output summary
// and the uint8 formatting, into scratch tensors that are then dropped. No
// client memory is involved.
//
// So the costs of a shape's first decode are paid here instead of by the
// first client: LibTorch's and the BLAS's first-call set-up on the rank's
// thread, the heap the allocator grows to (kept for reuse,
// memory_policy.h), the plans and blend ramps of the shape's buckets, the
// peaks stack_tiling auto decides from; on a GPU rank also the cuBLAS /
// cuDNN handles and workspaces, the caching allocator's blocks and each
// kernel's first load (GPU builds; not run on a device yet).
//
// After a shape's passes succeeded the rank's DecodeHistory holds its
// bucket, so the first request of that shape decoded on that rank alone
// reports warm = true. Not warmed: canvases not listed, audio buckets, the
// share of a shape each rank decodes in a group of several ranks (each
// rank warms alone; a group's request is warm once every rank that
// decoded tiles of it had decoded the canvas before), and the temporal
// length (requests of any length reuse the windows warmed here).
//
// A failed pass (out of memory, a LibTorch error) fails the warm-up: the
// daemon does not start (an operator who lists a shape expects it served;
// a shape that cannot be decoded at start-up would fail its requests).
// A compiled plan that fails to build is not a failure: its bucket goes
// eager as in any request, and the log line says so.
//
// Thread-safety: WarmUpRank() runs on the thread of the rank whose models
// it is given (models decode on their rank's thread only, vae_model.h);
// DecodeHistory is thread-safe, so ranks warm up at the same time.
#ifndef VAED_DAEMON_ENGINE_WARM_UP_H_
#define VAED_DAEMON_ENGINE_WARM_UP_H_

#include <cstddef>
#include <string>
#include <vector>

#include "daemon/engine/decode_history.h"
#include "daemon/models/model_registry.h"
#include "daemon/models/vae_model.h"
#include "vaed/status.h"

namespace vaed::engine {

// One decode of a warm shape: the settings a request would get, resolved
// by the server against the profiles (server/warm_up_plan.h), and why.
struct WarmUpPass {
  std::string what;                 // e.g. "profile safe", "compiled plans (profile optimized)"
  models::DecodeSettings settings;  // cancel, group and progress unset
};

// One warm shape and the decodes every rank runs of it, in order.
struct WarmUp {
  models::WarmShape shape;
  size_t model_index = 0;  // the model's index in every rank's registry (config order)
  std::vector<WarmUpPass> passes;
};

// Runs every warm-up of `warm_ups` on one rank. `models` are that rank's
// own instances by model index; `global_rank` names it in the history and
// the log. Logs one line per warm shape with its seconds (and each pass's
// seconds, tile scheduling and plan decision). Stops at the first failed
// pass and returns its error (the model's code and reason: kResourceExhausted
// when the decode does not fit, kInternal, ...) with the field of the
// `warm_shapes` entry and a context naming the model, the entry, the rank
// and the pass.
Status WarmUpRank(int global_rank, const std::vector<models::VaeModel*>& models,
                  const std::vector<WarmUp>& warm_ups, DecodeHistory* history);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_WARM_UP_H_
