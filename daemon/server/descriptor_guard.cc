#include "daemon/server/descriptor_guard.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>

namespace vaed::server {

namespace {

// Open descriptors of this process (entries of /proc/self/fd).
size_t OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  size_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n > 0 ? n - 1 : 0;  // less the directory's own descriptor
}

}  // namespace

DescriptorGuard::DescriptorGuard() {
  struct rlimit lim {};
  const size_t limit = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                           ? static_cast<size_t>(lim.rlim_cur)
                           : size_t{1} << 20;
  const size_t headroom = std::max<size_t>(512, limit / 4);
  pause_at_ = limit > headroom ? limit - headroom : limit / 2;
  resume_at_ = pause_at_ - std::min(pause_at_ / 2, headroom / 2);
}

void DescriptorGuard::Start() {
  if (!watcher_.joinable()) watcher_ = std::thread([this] { Watch(); });
}

void DescriptorGuard::Stop() {
  stop_.store(true);
  if (watcher_.joinable()) watcher_.join();
}

void DescriptorGuard::Watch() {
  while (!stop_.load()) {
    if (OpenDescriptors() >= pause_at_) high_.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

DescriptorGuard::Step DescriptorGuard::Check(bool accepting, TimePoint now, size_t* open) {
  const bool high = high_.exchange(false);
  if (!high && (accepting || now - last_check_ < std::chrono::milliseconds(50))) {
    return Step::kNone;
  }
  last_check_ = now;
  *open = OpenDescriptors();
  if (accepting && *open >= pause_at_) return Step::kPause;
  if (!accepting && *open <= resume_at_) return Step::kResume;
  return Step::kNone;
}

}  // namespace vaed::server
