// A client's CUDA allocation as the engine reads and writes it: one CUDA
// IPC region (server/cuda_region.h registers, opens and closes them, and
// writes down the trust model).
//
// The interface exists so that registration, ownership and unmapping are
// tested without a device (tests use fake regions); the daemon's regions
// wrap CudaIpcMapping (vaed/cuda_ipc.h). The last reference closes the
// mapping: a job holds one for as long as it may touch the memory.
//
// Thread-safety: the accessors are const and safe from any thread; the
// memory behind data() belongs to the client.
#ifndef VAED_DAEMON_ENGINE_CUDA_REGION_H_
#define VAED_DAEMON_ENGINE_CUDA_REGION_H_

#include <cstdint>
#include <string>

namespace vaed::engine {

class CudaRegion {
 public:
  virtual ~CudaRegion() = default;
  // Device pointer, valid in this process until the last reference goes.
  virtual void* data() const = 0;
  // Bytes the client registered (<= the allocation's bytes from data()).
  virtual uint64_t size() const = 0;
  // Bytes of the client's allocation from data() to its end (what
  // cuMemGetAddressRange reports; >= size()); 0 once closed.
  virtual uint64_t allocation_bytes() const = 0;
  // CUDA runtime ordinal (this process's numbering) of its device.
  virtual int device() const = 0;
  // The 64 handle bytes it was opened from: the allocation's identity
  // across clients and registrations.
  virtual const std::string& handle() const = 0;
  // Closes the mapping now, before the last reference goes (idempotent;
  // data() is null afterwards). CUDA leaves it undefined what happens when
  // the exporting process frees an allocation that another process still
  // has open, so the registry closes a region before it acknowledges its
  // UnregisterRegion (client_registry.h). Precondition: no device work on
  // it is pending (a job's result is handed over only after its fence,
  // rank_stream.h). Thread-safety: the registry's thread, when no job uses
  // the region any more.
  virtual void Close() = 0;
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_CUDA_REGION_H_
