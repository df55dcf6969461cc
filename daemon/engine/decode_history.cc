#include "daemon/engine/decode_history.h"

namespace vaed::engine {

bool DecodeHistory::AllWarm(const std::vector<std::string>& buckets) const {
  MutexLock lock(&mu_);
  for (const std::string& b : buckets) {
    if (warm_buckets_.count(b) == 0) return false;
  }
  return true;
}

void DecodeHistory::MarkWarm(const std::vector<std::string>& buckets) {
  MutexLock lock(&mu_);
  warm_buckets_.insert(buckets.begin(), buckets.end());
}

bool DecodeHistory::FirstDecision(const std::string& key) {
  constexpr size_t kMaxKeys = 4096;
  MutexLock lock(&mu_);
  if (logged_decisions_.size() >= kMaxKeys) logged_decisions_.clear();
  return logged_decisions_.insert(key).second;
}

}  // namespace vaed::engine
