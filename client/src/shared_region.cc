// vaed::client::SharedRegion: a POSIX shm segment this process creates, owns
// and unlinks, built on Boost.Interprocess.
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

#include "vaed/client.h"
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

struct SharedRegion::Mapping {
  bip::mapped_region region;
};

SharedRegion::SharedRegion(std::string name, std::unique_ptr<Mapping> mapping)
    : name_(std::move(name)),
      mapping_(std::move(mapping)),
      data_(static_cast<uint8_t*>(mapping_->region.get_address())),
      size_(mapping_->region.get_size()),
      owner_pid_(static_cast<int>(::getpid())) {}

SharedRegion::~SharedRegion() {
  // Unlink first so no new opener finds the name; the daemon's existing
  // mapping stays valid until it unmaps. mapping_'s destructor unmaps ours.
  // remove() reports failure by returning false and never throws; a name
  // that is already gone is not an error worth surfacing from a destructor.
  // A forked child that inherited the object leaves the name to its owner.
  if (mapping_ && ::getpid() == owner_pid_) bip::shared_memory_object::remove(name_.c_str());
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
                                                           uint64_t bytes) {
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

  auto mapping = std::make_unique<Mapping>();
  // A freshly truncated segment reads as zeros (the kernel hands out zeroed
  // pages), so there is no memset: it would only fault in every page now.
  VAED_RETURN_IF_ERROR(
      CallInterprocess(label + ": set size to " + std::to_string(bytes) + " bytes",
                       [&] { segment.truncate(static_cast<bip::offset_t>(bytes)); }));
  VAED_RETURN_IF_ERROR(
      CallInterprocess(label + ": map " + std::to_string(bytes) + " bytes read-write", [&] {
        mapping->region =
            bip::mapped_region(segment, bip::read_write, 0, static_cast<std::size_t>(bytes));
      }));
  unlink_on_failure.armed = false;
  // `segment` closes its descriptor on return; the mapping outlives it.
  return std::unique_ptr<SharedRegion>(new SharedRegion(name, std::move(mapping)));
}

}  // namespace vaed::client
