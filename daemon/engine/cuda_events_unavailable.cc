// CPU builds: no CUDA events (cuda_events.h); every call is refused.
#include "daemon/engine/cuda_events.h"

namespace vaed::engine {
namespace {

Status NoCuda() {
  return FailedPrecondition("CUDA events need a GPU build of vaed (VAED_WITH_CUDA=ON)");
}

}  // namespace

struct ClientEventCache::Opened {};
struct OutputEventRing::Event {};

ClientEventCache::ClientEventCache() = default;
ClientEventCache::~ClientEventCache() = default;

Status ClientEventCache::StreamWait(uint64_t, const std::string& handle, void*) {
  VAED_RETURN_IF_ERROR(CheckIpcEventHandle(handle, "inputs_ready_event"));
  return NoCuda();
}

size_t ClientEventCache::SizeForTesting() const { return events_.size(); }

OutputEventRing::OutputEventRing(std::vector<std::unique_ptr<Event>> events)
    : events_(std::move(events)) {}
OutputEventRing::~OutputEventRing() = default;

Result<std::unique_ptr<OutputEventRing>> OutputEventRing::Create(int) { return NoCuda(); }
Result<std::string> OutputEventRing::Record(void*) { return NoCuda(); }

}  // namespace vaed::engine
