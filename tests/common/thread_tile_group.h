// A TileGroup of S ranks in one process for tests of tile-parallel model
// code without a communicator: the gather goes through shared memory, with
// the same contract as the daemon's Gloo-backed groups (every rank calls
// GatherToOutputRank once per unit, in order; rank 0 receives all
// buffers).
#ifndef VAED_TESTS_COMMON_THREAD_TILE_GROUP_H_
#define VAED_TESTS_COMMON_THREAD_TILE_GROUP_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "daemon/models/tile_group.h"

namespace vaed::testing {

class ThreadTileGroups {
 public:
  explicit ThreadTileGroups(int size) : shared_(std::make_shared<Shared>(size)) {
    for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(shared_, r));
  }
  models::TileGroup* rank(int r) { return ranks_[static_cast<size_t>(r)].get(); }
  // Gathers completed so far (all ranks arrived).
  int64_t gathers() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->round;
  }

 private:
  struct Shared {
    explicit Shared(int n) : size(n), slots(static_cast<size_t>(n)) {}
    const int size;
    mutable std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    int64_t round = 0;
    std::vector<torch::Tensor> slots, done;
  };
  class Rank : public models::TileGroup {
   public:
    Rank(std::shared_ptr<Shared> s, int r) : s_(std::move(s)), r_(r) {}
    int rank() const override { return r_; }
    int size() const override { return s_->size; }
    std::vector<torch::Tensor> GatherToOutputRank(const torch::Tensor& packed) override {
      std::unique_lock<std::mutex> lock(s_->mu);
      s_->slots[static_cast<size_t>(r_)] = packed.clone();
      const int64_t my_round = s_->round;
      if (++s_->arrived == s_->size) {
        s_->done = std::move(s_->slots);
        s_->slots.assign(static_cast<size_t>(s_->size), torch::Tensor());
        s_->arrived = 0;
        ++s_->round;
        s_->cv.notify_all();
      } else {
        s_->cv.wait(lock, [&] { return s_->round != my_round; });
      }
      // Only rank 0 reads `done`; the next round cannot complete without it.
      return r_ == 0 ? s_->done : std::vector<torch::Tensor>();
    }

   private:
    std::shared_ptr<Shared> s_;
    const int r_;
  };
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace vaed::testing

#endif  // VAED_TESTS_COMMON_THREAD_TILE_GROUP_H_
