// Test helper: a POSIX shm segment created with raw shm_open, standing in
// for a client's segment (including a misbehaving client that shrinks it).
#ifndef VAED_TESTS_SHM_SCRATCH_SEGMENT_H_
#define VAED_TESTS_SHM_SCRATCH_SEGMENT_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace vaed::shm_test {

// A unique segment name per call, safe across parallel test processes.
inline std::string UniqueSegmentName(const std::string& tag) {
  static std::atomic<int> counter{0};
  return "vaed-test-" + tag + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

inline uint64_t PageBytes() { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }

// Owns a segment of `bytes` bytes (zero-filled) and unlinks it on
// destruction. Check ok() after construction.
class ScratchSegment {
 public:
  ScratchSegment(const std::string& tag, uint64_t bytes) : name_(UniqueSegmentName(tag)) {
    fd_ = ::shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd_ >= 0 && ::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~ScratchSegment() {
    if (fd_ >= 0) ::close(fd_);
    ::shm_unlink(("/" + name_).c_str());
  }
  ScratchSegment(const ScratchSegment&) = delete;
  ScratchSegment& operator=(const ScratchSegment&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& name() const { return name_; }

  // What a misbehaving client does: open the segment again by name and cut
  // it to `bytes` bytes.
  bool ShrinkTo(uint64_t bytes) const {
    const int fd = ::shm_open(("/" + name_).c_str(), O_RDWR, 0);
    if (fd < 0) return false;
    const bool ok = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    ::close(fd);
    return ok;
  }

  bool Write(uint64_t offset, const void* data, size_t n) const {
    return ::pwrite(fd_, data, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n);
  }
  bool Read(uint64_t offset, void* data, size_t n) const {
    return ::pread(fd_, data, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n);
  }

 private:
  std::string name_;
  int fd_ = -1;
};

}  // namespace vaed::shm_test

#endif  // VAED_TESTS_SHM_SCRATCH_SEGMENT_H_
