#include "vaed/host_region.h"

#include <sys/stat.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <utility>

#include "vaed/tensor_ref.h"

namespace vaed {

namespace bip = boost::interprocess;

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Shows one offending byte readably even when it is a control character.
std::string DescribeByte(char c) {
  if (c >= 0x21 && c <= 0x7e) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", static_cast<unsigned char>(c));
  return buf;
}

Status BoostErrorCodeStatus(const bip::interprocess_exception& e, std::string_view context) {
  StatusCode code = StatusCode::kIoError;
  switch (e.get_error_code()) {
    case bip::not_found_error:
    case bip::not_such_file_or_directory:
      code = StatusCode::kNotFound;
      break;
    case bip::already_exists_error:
      code = StatusCode::kAlreadyExists;
      break;
    case bip::out_of_space_error:
    case bip::out_of_memory_error:
    case bip::out_of_resource_error:
      code = StatusCode::kResourceExhausted;
      break;
    case bip::security_error:
      code = StatusCode::kFailedPrecondition;
      break;
    default:
      break;
  }
  std::string m(context);
  m += ": ";
  m += e.what();
  m += " (boost.interprocess error ";
  m += std::to_string(static_cast<int>(e.get_error_code()));
  m += ")";
  return Status(code, std::move(m));
}

}  // namespace

Status ValidateRegionName(std::string_view name) {
  const std::string rule = "1.." + std::to_string(kMaxRegionNameLength) +
                           " characters from [A-Za-z0-9._-], not '.' or '..'";
  if (name.empty()) return InvalidArgument("region.name is empty; it must be " + rule);
  if (name.size() > kMaxRegionNameLength) {
    // Do not echo a name this long; its length says enough.
    return InvalidArgument("region.name has " + std::to_string(name.size()) +
                           " characters; at most " + std::to_string(kMaxRegionNameLength) +
                           " are allowed");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (IsNameChar(name[i])) continue;
    std::string m = "region.name contains " + DescribeByte(name[i]) + " at position " +
                    std::to_string(i) + "; it must be " + rule;
    if (name[i] == '/') m += " (no '/': the name is a single shm segment, not a path)";
    return InvalidArgument(std::move(m));
  }
  if (name == "." || name == "..") {
    return InvalidArgument("region.name is '" + std::string(name) + "'; it must be " + rule);
  }
  return Status::Ok();
}

Status CallInterprocess(std::string_view context, const std::function<void()>& body) {
  try {
    body();
    return Status::Ok();
  } catch (const bip::interprocess_exception& e) {
    const int err = e.get_native_error();
    if (err == 0) return BoostErrorCodeStatus(e, context);
    Status s = ErrnoStatus(err, context);
    // ErrnoStatus has no code for EEXIST; for shm creation it means "name taken".
    if (err == EEXIST) return Status(StatusCode::kAlreadyExists, s.message());
    return s;
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(std::string(context) + ": out of memory");
  } catch (const std::exception& e) {
    return Internal(std::string(context) + ": unexpected exception: " + e.what());
  }
}

struct HostRegion::Mapping {
  // Kept open (not just the mapping) so CurrentSegmentBytes() can fstat the
  // very segment we mapped, even if the client unlinks or replaces the name.
  bip::shared_memory_object segment;
  bip::mapped_region region;
};

HostRegion::HostRegion(std::string name, std::unique_ptr<Mapping> mapping)
    : name_(std::move(name)),
      mapping_(std::move(mapping)),
      data_(static_cast<uint8_t*>(mapping_->region.get_address())),
      size_(mapping_->region.get_size()) {}

HostRegion::~HostRegion() = default;

HostRegion::HostRegion(HostRegion&& other) noexcept
    : name_(std::move(other.name_)),
      mapping_(std::move(other.mapping_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_uid_(other.owner_uid_),
      dev_(other.dev_),
      ino_(other.ino_) {}

HostRegion& HostRegion::operator=(HostRegion&& other) noexcept {
  if (this != &other) {
    name_ = std::move(other.name_);
    mapping_ = std::move(other.mapping_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_uid_ = other.owner_uid_;
    dev_ = other.dev_;
    ino_ = other.ino_;
  }
  return *this;
}

Result<std::unique_ptr<HostRegion>> HostRegion::Open(std::string_view name,
                                                     uint64_t claimed_bytes) {
  VAED_RETURN_IF_ERROR(ValidateRegionName(name));
  const std::string label = "region '" + std::string(name) + "'";
  if (claimed_bytes == 0) {
    return InvalidArgument(label + ": register_region.host.size_bytes is 0; a region must hold at least one byte");
  }
  if (claimed_bytes > std::numeric_limits<std::size_t>::max()) {
    return OutOfRange(label + ": register_region.host.size_bytes " + std::to_string(claimed_bytes) +
                      " does not fit in this process's address space");
  }

  auto mapping = std::make_unique<Mapping>();
  const std::string name_str(name);
  VAED_RETURN_IF_ERROR(CallInterprocess(label + ": open shm segment read-write", [&] {
    mapping->segment = bip::shared_memory_object(bip::open_only, name_str.c_str(), bip::read_write);
  }));

  // fstat directly rather than get_size(): same call, but errno survives.
  struct stat st {};
  if (::fstat(mapping->segment.get_mapping_handle().handle, &st) != 0) {
    return ErrnoStatus(errno, label + ": fstat shm segment");
  }
  // shm_open (glibc) opens with O_NOFOLLOW, so a symbolic link planted in
  // /dev/shm fails above (ELOOP); anything but a regular file is refused.
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "an unknown file type";
    return FailedPrecondition(label + ": is " + std::string(kind) +
                              ", not a regular shm segment");
  }
  const uint64_t real_bytes = static_cast<uint64_t>(st.st_size);
  if (claimed_bytes > real_bytes) {
    return OutOfRange(label + ": client claims " + std::to_string(claimed_bytes) +
                      " bytes but the segment holds " + std::to_string(real_bytes) +
                      " bytes (fstat)");
  }

  VAED_RETURN_IF_ERROR(
      CallInterprocess(label + ": map " + std::to_string(claimed_bytes) + " bytes read-write", [&] {
        mapping->region = bip::mapped_region(mapping->segment, bip::read_write, 0,
                                             static_cast<std::size_t>(claimed_bytes));
      }));
  auto region = std::unique_ptr<HostRegion>(new HostRegion(name_str, std::move(mapping)));
  region->owner_uid_ = static_cast<uint32_t>(st.st_uid);
  region->dev_ = static_cast<uint64_t>(st.st_dev);
  region->ino_ = static_cast<uint64_t>(st.st_ino);
  return region;
}

Status HostRegion::CheckRange(uint64_t offset, uint64_t size, std::string_view what) const {
  return CheckByteRange(offset, size, size_, what);
}

Result<uint64_t> HostRegion::CurrentSegmentBytes() const {
  if (!mapping_) return IoError("region '" + name_ + "': fstat on a moved-from HostRegion");
  struct stat st {};
  if (::fstat(mapping_->segment.get_mapping_handle().handle, &st) != 0) {
    return ErrnoStatus(errno, "region '" + name_ + "': fstat shm segment");
  }
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace vaed
