#include "daemon/engine/decode_history.h"

namespace vaed::engine {

bool DecodeHistory::RecordDecodes(const std::vector<RankBucket>& decodes) {
  MutexLock lock(&mu_);
  bool warm = true;
  for (const RankBucket& d : decodes) {
    // insert() tells whether the pair is new: then this decode was its first.
    if (decoded_.insert({d.rank, d.bucket}).second) warm = false;
  }
  return warm;
}

bool DecodeHistory::FirstDecision(const std::string& key) {
  constexpr size_t kMaxKeys = 4096;
  MutexLock lock(&mu_);
  if (logged_decisions_.size() >= kMaxKeys) logged_decisions_.clear();
  return logged_decisions_.insert(key).second;
}

}  // namespace vaed::engine
