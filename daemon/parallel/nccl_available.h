// Whether this build has the NCCL backend (nccl_communicator.h): true in
// GPU builds (VAED_WITH_CUDA=ON), false in CPU builds. A header of its own
// so that configuration checks need neither LibTorch nor CUDA headers.
#ifndef VAED_DAEMON_PARALLEL_NCCL_AVAILABLE_H_
#define VAED_DAEMON_PARALLEL_NCCL_AVAILABLE_H_

namespace vaed::parallel {

bool NcclAvailable();

}  // namespace vaed::parallel

#endif  // VAED_DAEMON_PARALLEL_NCCL_AVAILABLE_H_
