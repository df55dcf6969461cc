// GPU builds: the CUDA runtime side of cuda_events.h. Unrun (no device).
#include "daemon/engine/cuda_events.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "vaed/cuda_owners.h"
#include "vaed/cuda_status.h"

namespace vaed::engine {

static_assert(sizeof(cudaIpcEventHandle_t) == kCudaIpcEventHandleBytes);

struct ClientEventCache::Opened {
  CudaEvent event;
};

struct OutputEventRing::Event {
  CudaEvent event;
  std::string handle;
};

ClientEventCache::ClientEventCache() = default;
ClientEventCache::~ClientEventCache() = default;

Status ClientEventCache::StreamWait(uint64_t client_id, const std::string& handle, void* stream) {
  VAED_RETURN_IF_ERROR(CheckIpcEventHandle(handle, "inputs_ready_event"));
  auto key = std::make_pair(client_id, handle);
  auto it = events_.find(key);
  if (it == events_.end()) {
    if (events_.size() >= kMaxOpenedEvents) events_.clear();  // bounded (cuda_events.h)
    cudaIpcEventHandle_t h;
    std::memcpy(&h, handle.data(), sizeof(h));
    auto opened = std::make_unique<Opened>();
    Result<CudaEvent> event = CudaEvent::OpenIpc(h, "inputs_ready_event");
    if (!event.ok()) return event.status().WithField("inputs_ready_event");
    opened->event = std::move(event).value();
    it = events_.emplace(std::move(key), std::move(opened)).first;
  }
  if (cudaError_t err =
          cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), it->second->event.get(), 0);
      err != cudaSuccess) {
    return CudaStatus(err, "waiting for inputs_ready_event (cudaStreamWaitEvent)");
  }
  return Status::Ok();
}

size_t ClientEventCache::SizeForTesting() const { return events_.size(); }

OutputEventRing::OutputEventRing(std::vector<std::unique_ptr<Event>> events)
    : events_(std::move(events)) {}
OutputEventRing::~OutputEventRing() = default;

Result<std::unique_ptr<OutputEventRing>> OutputEventRing::Create(int device) {
  ScopedCudaDevice on_device;
  VAED_RETURN_IF_ERROR(on_device.Set(device));
  std::vector<std::unique_ptr<Event>> events;
  for (int i = 0; i < kOutputEvents; ++i) {
    auto e = std::make_unique<Event>();
    VAED_ASSIGN_OR_RETURN(e->event,
                          CudaEvent::Create(cudaEventInterprocess | cudaEventDisableTiming,
                                            "creating the rank's output events"));
    cudaIpcEventHandle_t h;
    if (cudaError_t err = cudaIpcGetEventHandle(&h, e->event.get()); err != cudaSuccess) {
      return CudaStatus(err, "exporting the rank's output events (cudaIpcGetEventHandle)");
    }
    e->handle.assign(reinterpret_cast<const char*>(&h), sizeof(h));
    events.push_back(std::move(e));
  }
  return std::unique_ptr<OutputEventRing>(new OutputEventRing(std::move(events)));
}

Result<std::string> OutputEventRing::Record(void* stream) {
  Event& e = *events_[next_];
  next_ = (next_ + 1) % events_.size();
  if (cudaError_t err = cudaEventRecord(e.event.get(), static_cast<cudaStream_t>(stream));
      err != cudaSuccess) {
    return CudaStatus(err, "recording outputs_ready_event (cudaEventRecord)");
  }
  return e.handle;
}

}  // namespace vaed::engine
