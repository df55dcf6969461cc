// CPU builds: no NCCL backend (nccl_communicator.h). Configuration refuses
// group.backend = "nccl" first (server/config.cc); this answer is for any
// other caller.
#include "daemon/parallel/nccl_communicator.h"

namespace vaed::parallel {

bool NcclAvailable() { return false; }

Result<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& /*store*/, const CommunicatorOptions& /*options*/,
    int /*device*/) {
  return FailedPrecondition(
             "group.backend \"nccl\" needs a GPU build of vaed (VAED_WITH_CUDA=ON); use \"gloo\"")
      .WithField("group.backend");
}

}  // namespace vaed::parallel
