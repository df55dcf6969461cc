// What the executor remembers of earlier decodes: which shape buckets each
// rank decoded (a decode whose ranks had all decoded its buckets before is
// "warm"; the start-up warm-up counts, engine/warm_up.h), and which
// tile-scheduling decisions were logged (each once per shape bucket, not
// per request).
//
// Thread-safety: every method may be called from any thread.
#ifndef VAED_DAEMON_ENGINE_DECODE_HISTORY_H_
#define VAED_DAEMON_ENGINE_DECODE_HISTORY_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vaed/mutex.h"

namespace vaed::engine {

// One rank's decode of one shape bucket.
struct RankBucket {
  int rank = 0;        // global rank
  std::string bucket;  // HistoryBucket(), e.g. "h3/h3:45x80"
};

// The history's name of a model's shape bucket (DecodePlan::shape_bucket,
// AudioPlan::shape_bucket): "<model>/<shape bucket>".
inline std::string HistoryBucket(const std::string& model, const std::string& shape_bucket) {
  return model + "/" + shape_bucket;
}

class DecodeHistory {
 public:
  // Records that each rank of `decodes` decoded its bucket, and returns
  // true when every one of them had been recorded before (the decode that
  // ran them was warm: its costs of first use were paid on each of those
  // ranks). An empty list is warm. Buckets are per canvas (the models'
  // DecodePlan::shape_bucket), bounded by what Plan() accepts.
  bool RecordDecodes(const std::vector<RankBucket>& decodes);
  // True the first time `key` is seen (at most 4096 keys are kept; then
  // the set starts over, so memory stays bounded).
  bool FirstDecision(const std::string& key);

 private:
  Mutex mu_;
  std::set<std::pair<int, std::string>> decoded_ VAED_GUARDED_BY(mu_);
  std::set<std::string> logged_decisions_ VAED_GUARDED_BY(mu_);
};

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_DECODE_HISTORY_H_
