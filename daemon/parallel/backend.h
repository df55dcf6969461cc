// The communicator backend of the daemon's VAE groups (group.backend).
//
// Thread-safety: constants.
#ifndef VAED_DAEMON_PARALLEL_BACKEND_H_
#define VAED_DAEMON_PARALLEL_BACKEND_H_

#include "daemon/models/named_enum.h"

namespace vaed::parallel {

enum class Backend {
  kGloo,  // every build: LibTorch c10d's Gloo, over TCP (communicator.h)
  kNccl,  // builds with VAED_WITH_CUDA: local rank r on its own device (nccl_communicator.h)
};
inline constexpr models::NameTable<Backend, 2> kBackendNames = {{
    {Backend::kGloo, "gloo"},
    {Backend::kNccl, "nccl"},
}};

}  // namespace vaed::parallel

#endif  // VAED_DAEMON_PARALLEL_BACKEND_H_
