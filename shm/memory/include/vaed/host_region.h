// Host shared-memory regions: POSIX shm segments that a client creates and
// owns, and that the daemon maps to read latents from and write outputs to
// (DESIGN.md §2 items 2-3).
//
// Lifetime rules. The client creates the segment (vaed::client::SharedRegion)
// and owns its name: only the client unlinks it. The daemon opens it once per
// registration (HostRegion::Open), maps exactly the number of bytes the
// client registered, and unmaps when the registration ends. A client can
// still shrink or unlink its segment while the daemon holds a mapping; every
// access to the mapping must therefore go through GuardedCopy()
// (vaed/guarded_copy.h), which turns the resulting SIGBUS into a Status.
//
// Boost.Interprocess is the shm API on both sides. Its exceptions are
// translated into a Status by CallInterprocess() below, the one adapter for
// that error domain.
#ifndef VAED_HOST_REGION_H_
#define VAED_HOST_REGION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "vaed/status.h"

namespace vaed {

// Longest region name accepted, in characters. Linux keeps shm segments as
// files in /dev/shm (NAME_MAX 255); the margin leaves room for prefixes.
inline constexpr size_t kMaxRegionNameLength = 200;

// Checks a shm segment name as a client sends it (without the leading '/'):
// 1..kMaxRegionNameLength characters from [A-Za-z0-9._-], and neither "." nor
// "..". On failure returns kInvalidArgument naming the field `region.name`
// and the rule that was broken. Pure; safe from any thread.
Status ValidateRegionName(std::string_view name);

// Runs `body`, which calls Boost.Interprocess, and converts what it throws
// into a Status; the one adapter for that error domain (used by HostRegion
// and by the client's SharedRegion; not part of the client API).
//
// `context` says what was being done, e.g. "open shm segment 'x'". A
// boost::interprocess::interprocess_exception that carries an errno becomes
// ErrnoStatus(errno, context) (so ENOENT -> kNotFound, EACCES ->
// kFailedPrecondition, ...), except EEXIST -> kAlreadyExists; one without an
// errno becomes kNotFound / kAlreadyExists / kResourceExhausted / kIoError by
// Boost's error code, with Boost's message and code in the text.
// std::bad_alloc -> kResourceExhausted; any other std::exception -> kInternal.
// Returns OK when `body` returns normally. Thread-safe if `body` is.
Status CallInterprocess(std::string_view context, const std::function<void()>& body);

// The daemon's mapping of a client-owned POSIX shm segment.
//
// Owns one file descriptor and one read-write MAP_SHARED mapping; the
// destructor unmaps and closes them and never unlinks the name (the client
// owns it). Move-only; a moved-from HostRegion has data() == nullptr and
// size() == 0 and may only be destroyed or assigned to.
//
// Thread-safety: the accessors and CheckRange() are const and safe to call
// concurrently. The memory behind data() is shared with the client and may
// disappear under us: read and write it only through GuardedCopy().
class HostRegion {
 public:
  // Opens the segment `name` (without the leading '/') read-write and maps
  // its first `claimed_bytes` bytes, the size the client registered.
  //
  // The real size is taken with fstat; the client's claim is never trusted.
  // Errors:
  //   kInvalidArgument  `name` fails ValidateRegionName(), or claimed_bytes
  //                     is 0.
  //   kNotFound         no segment of that name exists (message names it).
  //   kOutOfRange       claimed_bytes is larger than the segment: "region
  //                     'x': client claims N bytes but the segment holds M
  //                     bytes (fstat)".
  //   kFailedPrecondition  the daemon may not open it read-write (EACCES), or
  //                     it is not a regular file.
  //   kIoError          a symbolic link (shm_open uses O_NOFOLLOW: ELOOP).
  //   kResourceExhausted / kIoError  shm_open, fstat or mmap failed.
  static Result<std::unique_ptr<HostRegion>> Open(std::string_view name, uint64_t claimed_bytes);

  ~HostRegion();
  HostRegion(HostRegion&& other) noexcept;
  HostRegion& operator=(HostRegion&& other) noexcept;
  HostRegion(const HostRegion&) = delete;
  HostRegion& operator=(const HostRegion&) = delete;

  // Start of the mapping; valid until this object is destroyed. Access only
  // through GuardedCopy().
  uint8_t* data() const { return data_; }
  // Bytes mapped: the claimed size given to Open().
  uint64_t size() const { return size_; }
  // The segment name, as given to Open() (no leading '/').
  const std::string& name() const { return name_; }
  // The uid that owns the segment (fstat at Open()); the daemon maps only
  // segments owned by the registering client's uid.
  uint32_t owner_uid() const { return owner_uid_; }
  // True when both map the same segment (device and inode at Open()), e.g.
  // two registrations of one name.
  bool SameSegment(const HostRegion& other) const {
    return dev_ == other.dev_ && ino_ == other.ino_;
  }

  // Checks that bytes [offset, offset + size) lie inside the mapping,
  // overflow-safe (CheckByteRange against size()). Returns kOutOfRange
  // naming `what` otherwise.
  Status CheckRange(uint64_t offset, uint64_t size, std::string_view what) const;

  // Re-reads the segment's current size in bytes with fstat, to notice a
  // client that shrank its segment after registering. The size can change
  // again right after this returns, so a copy must still be guarded.
  // Errors: kIoError if fstat fails (or on a moved-from object).
  Result<uint64_t> CurrentSegmentBytes() const;

 private:
  struct Mapping;  // the Boost.Interprocess objects; defined in the .cc
  HostRegion(std::string name, std::unique_ptr<Mapping> mapping);

  std::string name_;
  std::unique_ptr<Mapping> mapping_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint32_t owner_uid_ = 0;
  uint64_t dev_ = 0, ino_ = 0;
};

}  // namespace vaed

#endif  // VAED_HOST_REGION_H_
