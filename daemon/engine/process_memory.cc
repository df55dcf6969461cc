#include "daemon/engine/process_memory.h"

#include <fstream>
#include <string>

namespace vaed::engine {

namespace {

// The value of a "Key:   1234 kB" line of /proc/self/status, in bytes.
uint64_t StatusKiB(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) {
      try {
        return std::stoull(line.substr(key.size())) * 1024;
      } catch (...) {
        return 0;
      }
    }
  }
  return 0;
}

}  // namespace

bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

uint64_t PeakRssBytes() { return StatusKiB("VmHWM:"); }

}  // namespace vaed::engine
