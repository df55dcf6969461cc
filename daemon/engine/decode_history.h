// What the executor remembers of earlier decodes: which shape buckets were
// decoded (a request whose buckets all were is "warm"), and which
// tile-scheduling decisions were logged (each once per shape bucket, not
// per request).
//
// Thread-safety: every method may be called from any rank thread.
#ifndef VAED_DAEMON_ENGINE_DECODE_HISTORY_H_
#define VAED_DAEMON_ENGINE_DECODE_HISTORY_H_

#include <set>
#include <string>
#include <vector>

#include "vaed/mutex.h"

namespace vaed::engine {

class DecodeHistory {
 public:
  // True when every bucket ("<model>/<shape bucket>") was decoded before.
  bool AllWarm(const std::vector<std::string>& buckets) const;
  void MarkWarm(const std::vector<std::string>& buckets);
  // True the first time `key` is seen (at most 4096 keys are kept; then
  // the set starts over, so memory stays bounded).
  bool FirstDecision(const std::string& key);

 private:
  mutable Mutex mu_;
  std::set<std::string> warm_buckets_ VAED_GUARDED_BY(mu_);
  std::set<std::string> logged_decisions_ VAED_GUARDED_BY(mu_);
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_DECODE_HISTORY_H_
