#include "daemon/engine/rank_stream.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "daemon/engine/cuda_events.h"
#include "daemon/engine/torch_cuda.h"

namespace vaed::engine {
namespace {

// A CUDA rank's device: LibTorch's pool stream, current on the rank's
// thread (torch_cuda.h), the clients' events it waits on and its own ring
// of events (cuda_events.h). In CPU builds the calls it makes answer
// kFailedPrecondition, so OnCudaDevice() fails before one exists.
class CudaDeviceQueue final : public DeviceQueue {
 public:
  CudaDeviceQueue(int ordinal, void* stream, std::unique_ptr<OutputEventRing> events)
      : ordinal_(ordinal), stream_(stream), output_events_(std::move(events)) {}

  void* stream() const override { return stream_; }
  Status WaitForClientEvent(uint64_t client_id, const std::string& handle) override {
    return client_events_.StreamWait(client_id, handle, stream_);
  }
  Result<std::string> RecordEvent() override { return output_events_->Record(stream_); }
  Status Synchronize() override { return SynchronizeStream(ordinal_, stream_); }

 private:
  const int ordinal_;
  void* const stream_;
  ClientEventCache client_events_;
  std::unique_ptr<OutputEventRing> output_events_;
};

}  // namespace

Result<std::unique_ptr<RankStream>> RankStream::OnCudaDevice(int ordinal) {
  VAED_ASSIGN_OR_RETURN(void* stream, UseRankStream(ordinal));
  VAED_ASSIGN_OR_RETURN(std::unique_ptr<OutputEventRing> events, OutputEventRing::Create(ordinal));
  return std::make_unique<RankStream>(
      std::make_unique<CudaDeviceQueue>(ordinal, stream, std::move(events)));
}

Status RankStream::WaitForInputs(uint64_t client_id, const std::string& handle, int rank) {
  if (!on_device()) {
    return FailedPrecondition("inputs_ready_event: rank " + std::to_string(rank) +
                              " is not a CUDA rank (it has no stream to wait on the event)")
        .WithField("inputs_ready_event");
  }
  VAED_RETURN_IF_ERROR(CheckIpcEventHandle(handle, "inputs_ready_event"));
  return device_->WaitForClientEvent(client_id, handle);
}

Result<std::string> RankStream::RecordOutputsReady(int rank) {
  if (!on_device()) {
    return FailedPrecondition("CUDA outputs: rank " + std::to_string(rank) +
                              " is not a CUDA rank (it has no event to order them)");
  }
  return device_->RecordEvent();
}

Status RankStream::Fence() {
  if (!on_device()) return Status::Ok();
  return device_->Synchronize().WithContext("waiting for the request's device work");
}

RequestFence::~RequestFence() {
  if (stream_ == nullptr) return;
  try {
    if (Status s = Release(); !s.ok()) {
      spdlog::error("rank stream: fencing a request that ended by an exception: {}", s.ToString());
    }
  } catch (...) {  // out of host memory for the message: the wait was made
  }
}

Status RequestFence::Release() {
  if (stream_ == nullptr) return Status::Ok();
  RankStream* stream = std::exchange(stream_, nullptr);
  return stream->Fence();
}

}  // namespace vaed::engine
