// The LibTorch version this build compiles against, for the few places
// where the API differs between Debian's LibTorch 1.13 and the PyTorch 2.x
// wheels of GPU machines (fused SDPA, typed out-of-memory and accelerator
// errors).
#ifndef VAED_DAEMON_MODELS_TORCH_VERSION_H_
#define VAED_DAEMON_MODELS_TORCH_VERSION_H_

#include <torch/version.h>

// True when LibTorch is at least major.minor.
#define VAED_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#endif  // VAED_DAEMON_MODELS_TORCH_VERSION_H_
