// vaed::client::SharedRegion: the client's side of a host region, a POSIX
// shared-memory segment this process creates, owns and unlinks. The daemon
// maps it when the segment is registered (Client::RegisterRegion) and reads
// latents from it and writes outputs into it in place. The daemon's side is
// vaed::HostRegion (vaed/host_region.h), which states the lifetime rules.
#ifndef VAED_SHARED_REGION_H_
#define VAED_SHARED_REGION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "vaed/client_export.h"
#include "vaed/status.h"

namespace vaed::client {

// A POSIX shared-memory segment created and owned by this process (host
// memory, mapped read-write). The destructor unlinks the name, then unmaps,
// so the daemon's mapping of a registered region stays valid until the
// daemon unmaps it, but no one can open the segment again. In a forked
// child the destructor only unmaps (the parent still owns the name).
//
// Move-only, like cppzmq's socket_t: moving transfers the segment (name,
// mapping and the duty to unlink) and leaves the source empty: data() ==
// nullptr, size() == 0, name() == "". An empty region may only be
// destroyed or assigned to; Client::RegisterRegion refuses it. Move
// assignment first releases (unlinks and unmaps) the segment the target
// held; self-move leaves the region unchanged. A registration follows the
// segment, not the object: moving a registered region keeps it registered.
//
// Thread-safety: not synchronized. The accessors are const and may be
// called concurrently; the bytes behind data() are shared with the daemon
// (do not write a region while a Decode that reads it is in flight).
class VAED_CLIENT_API SharedRegion {
 public:
  // Creates a segment of `bytes` bytes (zero-filled) under a unique name
  // "vaed-<pid>-<counter>-<random hex>", drawing a new name up to 4 times
  // when one is taken. Errors: kInvalidArgument for 0 bytes or a size
  // larger than the address space, kAlreadyExists when every name drawn
  // was taken, kResourceExhausted / kIoError from shm_open, ftruncate or
  // mmap.
  static Result<std::unique_ptr<SharedRegion>> Create(uint64_t bytes);
  // As above with an explicit name (1 to 200 characters of letters,
  // digits, '.', '_', '-'; not "." or ".."; no '/': a segment, not a path). Errors as above, and
  // kInvalidArgument for a bad name, kAlreadyExists when a segment of that name exists (it is left
  // alone).
  static Result<std::unique_ptr<SharedRegion>> Create(const std::string& name, uint64_t bytes);

  ~SharedRegion();
  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&& other) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // Start of the mapping (size() bytes, zero-filled at creation); nullptr
  // when empty (moved from). Valid until this object is destroyed or
  // assigned to.
  uint8_t* data() const;
  // Bytes mapped: the size given to Create(); 0 when empty.
  uint64_t size() const;
  // The shm name without the leading '/'; "" when empty.
  const std::string& name() const;

 private:
  struct Segment;  // the name, the mapping and the owner pid; shared_region.cc
  explicit SharedRegion(std::unique_ptr<Segment> segment);
  std::unique_ptr<Segment> segment_;
};

}  // namespace vaed::client

#endif  // VAED_SHARED_REGION_H_
