// A bounded cache of compiled plans, one per shape bucket (DESIGN.md §2.6).
//
// A plan is everything a decoder call of one shape can build once and
// reuse: shape-dependent tables and preallocated buffers (for the H3 video
// decoder: Vit3dDecoder::TilePlan). Keys are bucket strings chosen by the
// model (H3: "float32 b1 t7 h16 w16": compute dtype, tiles per call, tile
// shape in latent frames x cells; the window length is the tile's t).
//
// Policy, so that unexpected shapes never cause a silent rebuild storm:
//   - at most `capacity` plans; inserting one more evicts the least
//     recently used (counted in evictions);
//   - a bucket seen for the first time that was not configured runs eager
//     and is counted (eager_calls); the model builds its plan only from the
//     `promote_after`-th sighting on (configured buckets are built before
//     the daemon reports READY);
//   - plans count against the daemon's tensor memory budget; a decode
//     that runs out of memory releases them all (Clear()) and is retried
//     eager once, so cached plans can never starve later requests;
//   - a bucket whose build or first run failed is marked eager-only with
//     the reason; that is sticky (never retried) and listed in status. The
//     eager-only list is bounded too (oldest entries dropped past
//     kMaxEagerOnly, counted).
//
// Thread-safety: every method may be called from any thread (one mutex,
// mu_, guarding all the cache's state: VAED_GUARDED_BY, checked by clang);
// the rank that owns the model instance builds and uses its plans, the
// control loop reads Snapshot().
#ifndef VAED_DAEMON_MODELS_PLAN_CACHE_H_
#define VAED_DAEMON_MODELS_PLAN_CACHE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vaed/mutex.h"

namespace vaed::models {

struct PlanCacheStats {
  uint64_t hits = 0;          // decoder calls that ran a cached plan
  uint64_t builds = 0;        // plans built (configured + promoted + requested)
  uint64_t build_failures = 0;
  uint64_t evictions = 0;     // plans dropped by the LRU bound
  uint64_t eager_calls = 0;   // decoder calls that ran eager while plans were wanted
};

// What status shows of a cache.
struct PlanCacheSnapshot {
  size_t capacity = 0;
  std::vector<std::string> buckets;  // cached, most recently used first
  std::vector<std::pair<std::string, std::string>> eager_only;  // (bucket, reason)
  PlanCacheStats stats;
  uint64_t plan_bytes = 0;  // bytes held by the cached plans
};

template <typename Plan>
class PlanCache {
 public:
  static constexpr size_t kMaxEagerOnly = 64;
  static constexpr size_t kMaxSightings = 1024;

  // capacity >= 1; promote_after >= 1 (1 = build on first sighting).
  PlanCache(size_t capacity, int promote_after)
      : capacity_(std::max<size_t>(1, capacity)), promote_after_(std::max(1, promote_after)) {}

  // The cached plan of `bucket` (marks it most recently used), or null.
  std::shared_ptr<Plan> Find(const std::string& bucket) {
    MutexLock lock(&mu_);
    auto it = index_.find(bucket);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  // Counts one sighting of an uncached bucket and says whether its plan
  // should be built now (sightings >= promote_after, or `force`).
  bool ShouldBuild(const std::string& bucket, bool force) {
    MutexLock lock(&mu_);
    if (eager_only_index_.count(bucket) > 0) return false;
    if (sightings_.size() >= kMaxSightings && sightings_.count(bucket) == 0) sightings_.clear();
    const int seen = ++sightings_[bucket];
    return force || seen >= promote_after_;
  }

  // Caches `plan` for `bucket`, evicting the least recently used plan past
  // the capacity. `bytes` is what the plan holds (for status).
  void Insert(const std::string& bucket, std::shared_ptr<Plan> plan, uint64_t bytes) {
    MutexLock lock(&mu_);
    stats_.builds += 1;
    auto it = index_.find(bucket);
    if (it != index_.end()) {
      plan_bytes_ -= bytes_[bucket];
      lru_.erase(it->second);
      index_.erase(it);
    }
    lru_.emplace_front(bucket, std::move(plan));
    index_[bucket] = lru_.begin();
    bytes_[bucket] = bytes;
    plan_bytes_ += bytes;
    while (lru_.size() > capacity_) {
      const std::string& victim = lru_.back().first;
      plan_bytes_ -= bytes_[victim];
      bytes_.erase(victim);
      index_.erase(victim);
      lru_.pop_back();
      stats_.evictions += 1;
    }
  }

  // Marks `bucket` eager-only (sticky) and drops its plan.
  void MarkEagerOnly(const std::string& bucket, const std::string& reason) {
    MutexLock lock(&mu_);
    stats_.build_failures += 1;
    auto it = index_.find(bucket);
    if (it != index_.end()) {
      plan_bytes_ -= bytes_[bucket];
      bytes_.erase(bucket);
      lru_.erase(it->second);
      index_.erase(it);
    }
    if (eager_only_index_.count(bucket) > 0) return;
    eager_only_.emplace_back(bucket, reason);
    eager_only_index_[bucket] = reason;
    while (eager_only_.size() > kMaxEagerOnly) {
      eager_only_index_.erase(eager_only_.front().first);
      eager_only_.pop_front();
    }
  }

  // The reason `bucket` is eager-only, or "" when it is not.
  std::string EagerOnlyReason(const std::string& bucket) const {
    MutexLock lock(&mu_);
    auto it = eager_only_index_.find(bucket);
    return it == eager_only_index_.end() ? std::string() : it->second;
  }

  // Drops every cached plan (counted as evictions); returns the bytes they
  // held. Eager-only marks and sightings stay.
  uint64_t Clear() {
    MutexLock lock(&mu_);
    const uint64_t freed = plan_bytes_;
    stats_.evictions += lru_.size();
    lru_.clear();
    index_.clear();
    bytes_.clear();
    plan_bytes_ = 0;
    return freed;
  }

  void CountHit() {
    MutexLock lock(&mu_);
    stats_.hits += 1;
  }
  void CountEagerCall() {
    MutexLock lock(&mu_);
    stats_.eager_calls += 1;
  }

  size_t size() const {
    MutexLock lock(&mu_);
    return lru_.size();
  }
  size_t capacity() const { return capacity_; }

  PlanCacheSnapshot Snapshot() const {
    MutexLock lock(&mu_);
    PlanCacheSnapshot s;
    s.capacity = capacity_;
    for (const auto& [bucket, plan] : lru_) s.buckets.push_back(bucket);
    s.eager_only.assign(eager_only_.begin(), eager_only_.end());
    s.stats = stats_;
    s.plan_bytes = plan_bytes_;
    return s;
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<Plan>>;
  const size_t capacity_;
  const int promote_after_;
  mutable Mutex mu_;
  std::list<Entry> lru_ VAED_GUARDED_BY(mu_);  // most recently used first
  std::map<std::string, typename std::list<Entry>::iterator> index_ VAED_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> bytes_ VAED_GUARDED_BY(mu_);
  uint64_t plan_bytes_ VAED_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> sightings_ VAED_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, std::string>> eager_only_ VAED_GUARDED_BY(mu_);
  std::map<std::string, std::string> eager_only_index_ VAED_GUARDED_BY(mu_);
  PlanCacheStats stats_ VAED_GUARDED_BY(mu_);
};

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_PLAN_CACHE_H_
