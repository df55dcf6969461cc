// vaed::client::SharedRegion: a POSIX shm segment this process creates, owns
// and unlinks, built on Boost.Interprocess.
#include "vaed/shared_region.h"

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "exception_status.h"
#include "vaed/host_region.h"

namespace vaed::client {

namespace bip = boost::interprocess;

namespace {

// The owner only. A daemon running as another user is granted access when
// the segment is registered (Client::RegisterRegion: a POSIX ACL entry for
// the daemon's uid). Boost applies the mode with fchmod, so the umask does
// not narrow it.
constexpr int kSegmentPermissions = 0600;

// How often Create(bytes) draws a new name when the generated one is taken
// (a stale segment left by a crashed process that had the same pid).
constexpr int kNameAttempts = 4;

uint64_t RandomBits() {
  uint64_t bits = 0;
  if (getrandom(&bits, sizeof(bits), GRND_NONBLOCK) == static_cast<ssize_t>(sizeof(bits))) {
    return bits;
  }
  // No entropy yet (very early boot): the name only has to be unlikely to
  // collide with another process's, and pid + counter already separate those.
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return static_cast<uint64_t>(now) * 0x9e3779b97f4a7c15ULL;
}

std::string GenerateName() {
  static std::atomic<uint64_t> counter{0};
  char buf[96];
  std::snprintf(buf, sizeof(buf), "vaed-%ld-%llu-%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1, std::memory_order_relaxed)),
                static_cast<unsigned long long>(RandomBits()));
  return buf;
}

}  // namespace

// Everything a region owns, behind one pointer so that a move is a pointer
// move and an empty (moved-from) region is a null pointer.
struct SharedRegion::Segment {
  std::string name;
  bip::mapped_region mapping;
  // The process that created the segment: only it unlinks the name (a
  // forked child that inherited the object only unmaps its copy).
  pid_t owner_pid = ::getpid();

  Segment(std::string segment_name, bip::mapped_region mapped)
      : name(std::move(segment_name)), mapping(std::move(mapped)) {}
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  ~Segment() {
    // Unlink first so no new opener finds the name; the daemon's existing
    // mapping stays valid until it unmaps. `mapping`'s destructor unmaps
    // ours. remove() reports failure by returning false and never throws;
    // a name that is already gone is not an error worth surfacing from a
    // destructor.
    if (::getpid() == owner_pid) bip::shared_memory_object::remove(name.c_str());
  }
};

SharedRegion::SharedRegion(std::unique_ptr<Segment> segment) : segment_(std::move(segment)) {}
SharedRegion::~SharedRegion() = default;
SharedRegion::SharedRegion(SharedRegion&& other) noexcept = default;
// unique_ptr's move assignment is reset(other.release()): the segment held
// before is released (unlinked, unmapped), and a self-move changes nothing.
SharedRegion& SharedRegion::operator=(SharedRegion&& other) noexcept = default;

uint8_t* SharedRegion::data() const {
  return segment_ ? static_cast<uint8_t*>(segment_->mapping.get_address()) : nullptr;
}
uint64_t SharedRegion::size() const { return segment_ ? segment_->mapping.get_size() : 0; }
const std::string& SharedRegion::name() const {
  static const std::string kEmpty;
  return segment_ ? segment_->name : kEmpty;
}

Result<std::unique_ptr<SharedRegion>> SharedRegion::Create(uint64_t bytes) {
  for (int attempt = 1;; ++attempt) {
    Result<std::unique_ptr<SharedRegion>> region = Create(GenerateName(), bytes);
    if (region.ok() || region.status().code() != StatusCode::kAlreadyExists ||
        attempt == kNameAttempts) {
      return region;
    }
  }
}

Result<std::unique_ptr<SharedRegion>> SharedRegion::Create(const std::string& name,
                                                           uint64_t bytes) try {
  VAED_RETURN_IF_ERROR(ValidateRegionName(name));
  const std::string label = "shared region '" + name + "'";
  if (bytes == 0) {
    return InvalidArgument(label + ": size is 0 bytes; a region must hold at least one byte");
  }
  if (bytes > static_cast<uint64_t>(std::numeric_limits<bip::offset_t>::max()) ||
      bytes > std::numeric_limits<std::size_t>::max()) {
    return InvalidArgument(label + ": size " + std::to_string(bytes) + " bytes is too large");
  }

  bip::shared_memory_object segment;
  VAED_RETURN_IF_ERROR(CallInterprocess(label + ": create shm segment", [&] {
    segment = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write,
                                        bip::permissions(kSegmentPermissions));
  }));
  // From here on the name exists; take it down again if anything fails.
  struct UnlinkOnFailure {
    const std::string& name;
    bool armed = true;
    ~UnlinkOnFailure() {
      if (armed) bip::shared_memory_object::remove(name.c_str());
    }
  } unlink_on_failure{name};

  bip::mapped_region mapping;
  // A freshly truncated segment reads as zeros (the kernel hands out zeroed
  // pages), so there is no memset: it would only fault in every page now.
  VAED_RETURN_IF_ERROR(
      CallInterprocess(label + ": set size to " + std::to_string(bytes) + " bytes",
                       [&] { segment.truncate(static_cast<bip::offset_t>(bytes)); }));
  VAED_RETURN_IF_ERROR(
      CallInterprocess(label + ": map " + std::to_string(bytes) + " bytes read-write", [&] {
        mapping = bip::mapped_region(segment, bip::read_write, 0, static_cast<std::size_t>(bytes));
      }));
  auto owner = std::make_unique<Segment>(name, std::move(mapping));
  unlink_on_failure.armed = false;  // `owner` unlinks it from here on
  // `segment` closes its descriptor on return; the mapping outlives it.
  return std::unique_ptr<SharedRegion>(new SharedRegion(std::move(owner)));
} catch (...) {
  return StatusFromCurrentException("creating a shared region");
}

}  // namespace vaed::client
