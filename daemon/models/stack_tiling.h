// How tiles of a window are scheduled: one decoder call per tile, or all
// same-shape tiles in one call (stacked tiles). Output bytes do not depend
// on it; speed and memory do. Kept free of LibTorch: the config reads it.
//
// Thread-safety: constants.
#ifndef VAED_DAEMON_MODELS_STACK_TILING_H_
#define VAED_DAEMON_MODELS_STACK_TILING_H_

#include "daemon/models/named_enum.h"

namespace vaed::models {

// How a request wants its tiles scheduled (DecodeOptions.stack_tiling), and
// a model's configured default (models.entry stack_tiling: never kDefault).
enum class StackTiling {
  kDefault,  // the model's configured default
  kOff,      // one decoder call per tile
  kOn,       // all same-shape tiles of a window in one call
  kAuto,     // the model decides (H3 on CPU: sequential, see video_vae.cc)
};

// The values a config's stack_tiling takes (kDefault is a request's only).
inline constexpr NameTable<StackTiling, 3> kConfiguredStackTilingNames = {{
    {StackTiling::kOff, "off"},
    {StackTiling::kOn, "on"},
    {StackTiling::kAuto, "auto"},
}};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_STACK_TILING_H_
