// The executor's thread edges: nothing a sink throws leaves a
// rank thread, and the executor serves on; and its start-up
// warm-up: a warmed shape's first job is warm, a warm-up that fails fails
// Create(). Runs the built-in demo model on one rank, with latents and
// outputs in real POSIX shm regions.
#include "daemon/engine/executor.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "daemon/models/model_registry.h"
#include "daemon/models/tile_group.h"
#include "daemon/models/torch_status.h"
#include "daemon/engine/cuda_events.h"
#include "daemon/engine/rank_stream.h"

namespace vaed::engine {
namespace {

// A POSIX shm segment of `bytes` bytes, unlinked at destruction.
class Segment {
 public:
  explicit Segment(uint64_t bytes) {
    static std::atomic<int> next{0};
    name_ = "vaed-engine-test-" + std::to_string(getpid()) + "-" + std::to_string(next++);
    const int fd = shm_open(("/" + name_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    close(fd);
  }
  ~Segment() { shm_unlink(("/" + name_).c_str()); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// Records finished jobs; throws from OnProgress always and from the first
// OnFinished.
class ThrowingSink : public ResultSink {
 public:
  void OnProgress(const std::shared_ptr<const DecodeJob>&, const ProgressEvent&) override {
    ++progress_calls;
    throw std::runtime_error("sink: progress refused");
  }
  void OnFinalRange(const std::shared_ptr<const DecodeJob>&, const FinalRangeEvent&) override {
    throw std::runtime_error("sink: final range refused");
  }
  void OnFinished(std::shared_ptr<const DecodeJob> job, Result<DecodeResult> result) override {
    std::lock_guard<std::mutex> lock(mu);
    if (++finished_calls == 1) throw std::runtime_error("sink: first result refused");
    finished.push_back({job->request_id, result.status()});
    cv.notify_all();
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished.size() >= n; });
  }

  std::atomic<int> progress_calls{0};
  std::mutex mu;
  std::condition_variable cv;
  int finished_calls = 0;
  std::vector<std::pair<uint64_t, Status>> finished;
};

// Records, for each finished job, how many jobs the executor reports as
// running at the moment the result is handed over (the reply goes out from
// here in the daemon).
class RunningRecordingSink : public ResultSink {
 public:
  void OnProgress(const std::shared_ptr<const DecodeJob>&, const ProgressEvent&) override {}
  void OnFinalRange(const std::shared_ptr<const DecodeJob>&, const FinalRangeEvent&) override {}
  void OnFinished(std::shared_ptr<const DecodeJob>, Result<DecodeResult>) override {
    const size_t running = executor->running();
    std::lock_guard<std::mutex> lock(mu);
    running_at_answer.push_back(running);
    cv.notify_all();
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60),
                       [&] { return running_at_answer.size() >= n; });
  }

  const Executor* executor = nullptr;  // set before any job is submitted
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> running_at_answer;
};

// Records the warm flag of every finished job, by request id.
class WarmRecordingSink : public ResultSink {
 public:
  void OnProgress(const std::shared_ptr<const DecodeJob>&, const ProgressEvent&) override {}
  void OnFinalRange(const std::shared_ptr<const DecodeJob>&, const FinalRangeEvent&) override {}
  void OnFinished(std::shared_ptr<const DecodeJob> job, Result<DecodeResult> result) override {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    warm[job->request_id] = result.ok() && result->warm;
    cv.notify_all();
  }
  // The warm flag of request `id` once it finished (false after 60 s).
  bool WarmOf(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return warm.count(id) > 0; });
    return warm.count(id) > 0 && warm[id];
  }

  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, bool> warm;
};

// Records the status of every finished job, by request id.
class StatusRecordingSink : public ResultSink {
 public:
  void OnProgress(const std::shared_ptr<const DecodeJob>&, const ProgressEvent&) override {}
  void OnFinalRange(const std::shared_ptr<const DecodeJob>&, const FinalRangeEvent&) override {}
  void OnFinished(std::shared_ptr<const DecodeJob> job, Result<DecodeResult> result) override {
    std::lock_guard<std::mutex> lock(mu);
    statuses.emplace(job->request_id, result.status());
    cv.notify_all();
  }
  // The status of request `id` once it finished (kDeadlineExceeded after 60 s).
  Status StatusOf(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return statuses.count(id) > 0; });
    return statuses.count(id) > 0 ? statuses.at(id) : DeadlineExceeded("no answer in 60 s");
  }

  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, Status> statuses;
};

// The demo model's warm shape `h` x `w` (one latent frame), warmed with
// the default settings.
WarmUp DemoWarmUp(int64_t h, int64_t w, int64_t latent_channels) {
  return {.shape = {.model = "demo",
                    .field = "models.entry[0].warm_shapes[0]",
                    .canvas = std::to_string(h) + "x" + std::to_string(w),
                    .latent_shape = {1, latent_channels, h, w}},
          .model_index = 0,
          .passes = {{.what = "profile safe", .settings = {}}}};
}

models::ModelConfig DemoConfig() {
  models::ModelConfig demo;
  demo.name = "demo";
  demo.kind = models::ModelKind::kDemo;
  return demo;
}

// One rank running the demo model, answering into a `SinkT`.
template <typename SinkT>
class ExecutorTestBase : public ::testing::Test {
 protected:
  // What the executor warms up before Create() returns.
  virtual std::vector<WarmUp> WarmUps(const models::ModelRegistry&) { return {}; }
  // Its ranks and groups (one rank by default).
  virtual GroupOptions Group() { return {}; }
  // How its ranks get their RankStream (null: the executor's default).
  virtual RankStreamFactory RankStreams() { return nullptr; }

  void SetUp() override {
    const GroupOptions group = Group();
    std::vector<models::ModelRegistry*> registries;
    for (uint32_t i = 0; i < group.ranks; ++i) {
      auto r = models::ModelRegistry::Create({DemoConfig()}, "demo");
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      registries_.push_back(std::move(r).value());
      registries.push_back(registries_.back().get());
    }
    registry_ = registries_.front().get();
    ExecutorOptions options;
    options.intra_op_threads = 1;
    auto e = Executor::Create(options, group, registries, &sink_, WarmUps(*registry_),
                              RankStreams());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    executor_ = std::move(e).value();
  }

  // A demo-model job of `frames` latent frames of h x w cells, float32
  // output.
  std::shared_ptr<DecodeJob> MakeJob(uint64_t id, int64_t h = 4, int64_t w = 4,
                                     int64_t frames = 1) {
    models::VaeModel* model = registry_->Find("demo");
    const std::vector<int64_t> shape = {frames, model->info().latent_channels, h, w};
    auto plan = model->Plan(DType::kFloat32, shape);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    auto job = std::make_shared<DecodeJob>();
    job->request_id = id;
    job->client_id = 1;
    job->model = model;
    job->model_index = 0;
    job->progress = true;
    job->received = std::chrono::steady_clock::now();
    VideoPart v;
    v.plan = *plan;
    v.format = OutputFormat::kFloat32Nchw;
    const uint64_t in_bytes = 4 * static_cast<uint64_t>(frames * h * w * shape[1]);
    v.latent = {0, 0, in_bytes, DType::kFloat32, shape};
    v.output.shape = {plan->frames, plan->channels, plan->height_px, plan->width_px};
    v.output.dtype = DType::kFloat32;
    v.output.size = 4 * static_cast<uint64_t>(plan->frames * plan->channels * plan->height_px *
                                              plan->width_px);
    segments_.push_back(std::make_unique<Segment>(in_bytes));
    v.latent_region = std::shared_ptr<HostRegion>(
        std::move(HostRegion::Open(segments_.back()->name(), in_bytes)).value());
    segments_.push_back(std::make_unique<Segment>(v.output.size));
    v.output_region = std::shared_ptr<HostRegion>(
        std::move(HostRegion::Open(segments_.back()->name(), v.output.size)).value());
    job->video = std::move(v);
    return job;
  }

  SinkT sink_;
  std::vector<std::unique_ptr<models::ModelRegistry>> registries_;  // by local rank
  models::ModelRegistry* registry_ = nullptr;                       // rank 0's
  std::vector<std::unique_ptr<Segment>> segments_;
  std::unique_ptr<Executor> executor_;  // last: stopped before the rest goes
};

using ExecutorEdgeTest = ExecutorTestBase<ThrowingSink>;
using ExecutorAnswerTest = ExecutorTestBase<RunningRecordingSink>;

// The demo model's 4x4 canvas warmed up at start.
class ExecutorWarmUpTest : public ExecutorTestBase<WarmRecordingSink> {
 protected:
  std::vector<WarmUp> WarmUps(const models::ModelRegistry& registry) override {
    return {DemoWarmUp(4, 4, registry.Find("demo")->info().latent_channels)};
  }
};

TEST_F(ExecutorWarmUpTest, TheFirstJobOfAWarmedShapeIsWarm) {
  ASSERT_TRUE(executor_->Submit(MakeJob(1)).ok());
  EXPECT_TRUE(sink_.WarmOf(1));
}

TEST_F(ExecutorWarmUpTest, TheFirstJobOfAnotherShapeIsColdItsSecondWarm) {
  ASSERT_TRUE(executor_->Submit(MakeJob(1, 4, 8)).ok());
  EXPECT_FALSE(sink_.WarmOf(1));
  ASSERT_TRUE(executor_->Submit(MakeJob(2, 4, 8)).ok());
  EXPECT_TRUE(sink_.WarmOf(2));
}

TEST(ExecutorWarmUpFailureTest, AWarmUpThatFailsFailsCreateNamingTheEntry) {
  auto registry = models::ModelRegistry::Create({DemoConfig()}, "demo");
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  WarmRecordingSink sink;
  // 7 latent channels: the demo model refuses the latent, as it would a
  // request's; the warm-up fails and with it the executor's start.
  ExecutorOptions options;
  options.intra_op_threads = 1;
  auto e = Executor::Create(options, GroupOptions{}, {registry->get()}, &sink,
                            {DemoWarmUp(4, 4, 7)});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.status().field(), "models.entry[0].warm_shapes[0]");
  EXPECT_THAT(e.status().message(),
              ::testing::HasSubstr("warm-up of model 'demo' models.entry[0].warm_shapes[0] = "
                                   "\"4x4\" on rank 0"));
}

// A decode is warm when every rank that ran it had decoded its bucket.
TEST(DecodeHistoryTest, WarmIsPerRankAndBucket) {
  DecodeHistory history;
  EXPECT_FALSE(history.RecordDecodes({{0, "m/a"}}));
  EXPECT_TRUE(history.RecordDecodes({{0, "m/a"}}));
  EXPECT_FALSE(history.RecordDecodes({{1, "m/a"}}));  // another rank
  EXPECT_FALSE(history.RecordDecodes({{0, "m/b"}}));  // another bucket
  EXPECT_TRUE(history.RecordDecodes({{0, "m/a"}, {1, "m/a"}}));
  EXPECT_FALSE(history.RecordDecodes({{0, "m/a"}, {2, "m/a"}}));  // rank 2 new
  EXPECT_TRUE(history.RecordDecodes({{0, "m/a"}, {2, "m/a"}}));
  EXPECT_TRUE(history.RecordDecodes({}));
}

// Regression: the rank handed the result to the sink (the reply
// went out) and only afterwards took the job off its slot, so a client that
// read its reply and then asked for the status could see `in_flight: 1`
// (python.metrics' test_status_reports_component_latencies failed now and
// then). Before the fix every entry here was 1.
TEST_F(ExecutorAnswerTest, RegressionAJobIsNoLongerRunningWhenItsReplyGoesOut) {
  sink_.executor = executor_.get();
  for (uint64_t id = 1; id <= 3; ++id) {
    std::shared_ptr<DecodeJob> job = MakeJob(id);
    job->progress = false;
    ASSERT_TRUE(executor_->Submit(job).ok());
    ASSERT_TRUE(sink_.WaitFor(static_cast<size_t>(id)));
  }
  std::lock_guard<std::mutex> lock(sink_.mu);
  EXPECT_THAT(sink_.running_at_answer, ::testing::ElementsAre(0u, 0u, 0u));
}

TEST_F(ExecutorEdgeTest, ASinkThatThrowsNeitherKillsARankNorStopsTheExecutor) {
  ASSERT_TRUE(executor_->Submit(MakeJob(1)).ok());  // its result is refused by the sink
  ASSERT_TRUE(executor_->Submit(MakeJob(2)).ok());
  ASSERT_TRUE(sink_.WaitFor(1));
  ASSERT_TRUE(executor_->Submit(MakeJob(3)).ok());
  ASSERT_TRUE(sink_.WaitFor(2));
  std::lock_guard<std::mutex> lock(sink_.mu);
  EXPECT_EQ(sink_.finished_calls, 3);
  EXPECT_GE(sink_.progress_calls.load(), 3);
  EXPECT_EQ(sink_.finished[0].first, 2u);
  EXPECT_TRUE(sink_.finished[0].second.ok()) << sink_.finished[0].second.ToString();
  EXPECT_EQ(sink_.finished[1].first, 3u);
  EXPECT_TRUE(sink_.finished[1].second.ok()) << sink_.finished[1].second.ToString();
  EXPECT_TRUE(executor_->fatal_error().empty());
}

TEST_F(ExecutorEdgeTest, AStickyDeviceErrorMakesTheExecutorRefuseWork) {
  auto job = MakeJob(1);
  job->settings.faults.device_fatal = 1;
  job->progress = false;
  ASSERT_TRUE(executor_->Submit(job).ok());
  // The first result is refused by the sink; the executor is unhealthy by
  // then and refuses new work.
  for (int i = 0; i < 600 && executor_->fatal_error().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(executor_->fatal_error(), ::testing::HasSubstr("illegal memory access"));
  const Status refused = executor_->Submit(MakeJob(2));
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
}

using ExecutorEventTest = ExecutorTestBase<StatusRecordingSink>;

// Decode.inputs_ready_event is never ignored by a rank: one without a CUDA
// stream (every CPU rank) answers the job with an error naming the field
// instead of reading latents the event was meant to order.
TEST_F(ExecutorEventTest, AnInputsReadyEventOnACpuRankIsRefusedNotIgnored) {
  auto job = MakeJob(1);
  job->progress = false;
  job->inputs_ready_event = std::string(64, 'e');
  ASSERT_TRUE(executor_->Submit(job).ok());
  const Status s = sink_.StatusOf(1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), ::testing::HasSubstr("inputs_ready_event: rank 0 is not a CUDA rank"));
  // The rank serves on.
  ASSERT_TRUE(executor_->Submit(MakeJob(2)).ok());
  EXPECT_TRUE(sink_.StatusOf(2).ok()) << sink_.StatusOf(2).ToString();
}


// The order of a request's device work and its answer, without a device:
// each rank's RankStream runs on a double of the device that writes every
// call into one log, and the sink writes what the server would send (final
// ranges, the reply) into the same log. The rule (rank_stream.h): no reply
// while the request's device work is unfinished, so the answering rank's
// fence comes after every write it announced and before the reply.
class OrderLog {
 public:
  void Add(std::string entry) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> entries_;
};

class RecordingDevice final : public DeviceQueue {
 public:
  RecordingDevice(int rank, OrderLog* log) : rank_(rank), log_(log) {}
  void* stream() const override { return nullptr; }
  Status WaitForClientEvent(uint64_t, const std::string&) override {
    log_->Add(Name() + " waits for the inputs");
    return Status::Ok();
  }
  Result<std::string> RecordEvent() override {
    log_->Add(Name() + " records an event");
    return std::string(kCudaIpcEventHandleBytes, 'r');
  }
  Status Synchronize() override {
    log_->Add(Name() + " fence");
    return fence_status_;
  }
  // What every later fence answers (a device that lost its context).
  void FailFences(Status s) { fence_status_ = std::move(s); }

 private:
  std::string Name() const { return "rank " + std::to_string(rank_); }
  const int rank_;
  OrderLog* const log_;
  Status fence_status_;
};

// StatusRecordingSink that also logs what the server would send.
class OrderRecordingSink : public StatusRecordingSink {
 public:
  void OnFinalRange(const std::shared_ptr<const DecodeJob>&, const FinalRangeEvent&) override {
    log.Add("final range");
  }
  void OnFinished(std::shared_ptr<const DecodeJob> job, Result<DecodeResult> result) override {
    log.Add("reply");
    StatusRecordingSink::OnFinished(std::move(job), std::move(result));
  }

  OrderLog log;
};

class FenceOrderTest : public ExecutorTestBase<OrderRecordingSink> {
 protected:
  RankStreamFactory RankStreams() override {
    return [this](int local_rank) -> Result<std::unique_ptr<RankStream>> {
      auto device = std::make_unique<RecordingDevice>(local_rank, &sink_.log);
      devices_[static_cast<size_t>(local_rank)] = device.get();
      return std::make_unique<RankStream>(std::move(device));
    };
  }
  // Each rank's double, by local rank (owned by its RankStream).
  std::array<RecordingDevice*, 2> devices_{};

  // A streamed job of 8 latent frames: two frame batches of the demo model.
  std::shared_ptr<DecodeJob> StreamedJob(uint64_t id) {
    auto job = MakeJob(id, 4, 4, 8);
    job->progress = false;
    job->stream_output = true;
    return job;
  }

  // Where `entry` is in the log (its last occurrence when `last`); -1 if
  // absent.
  static int IndexOf(const std::vector<std::string>& log, const std::string& entry,
                     bool last = false) {
    int found = -1;
    for (size_t i = 0; i < log.size(); ++i) {
      if (log[i] != entry) continue;
      found = static_cast<int>(i);
      if (!last) break;
    }
    return found;
  }

  // The log once the reply is in: a frame batch was announced before it
  // and rank 0's fence lies between the last announcement and the reply.
  void ExpectFenceBetweenWritesAndReply() {
    const std::vector<std::string> log = sink_.log.entries();
    std::string all;
    for (const std::string& e : log) all += e + "; ";
    const int written = IndexOf(log, "final range", /*last=*/true);
    const int fence = IndexOf(log, "rank 0 fence", /*last=*/true);
    const int reply = IndexOf(log, "reply");
    ASSERT_GE(written, 0) << all;
    ASSERT_GE(reply, 0) << all;
    EXPECT_GT(fence, written) << all;
    EXPECT_LT(fence, reply) << all;
  }
};

TEST_F(FenceOrderTest, RegressionAFailureAfterStreamedWritesFencesBeforeTheErrorReply) {
  auto job = StreamedJob(1);
  job->settings.faults.later_unit_exception = 1;
  ASSERT_TRUE(executor_->Submit(job).ok());
  const Status s = sink_.StatusOf(1);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("later_unit_exception"));
  EXPECT_EQ(job->streamed->video_frames.load(), 4u);  // the first batch was written
  ExpectFenceBetweenWritesAndReply();
}

TEST_F(FenceOrderTest, ADeadlineAfterStreamedWritesFencesBeforeTheErrorReply) {
  auto job = StreamedJob(1);
  job->settings.faults.slow_unit_ms = 400;
  job->cancel = std::make_shared<models::CancelToken>(std::chrono::steady_clock::now(), 200);
  ASSERT_TRUE(executor_->Submit(job).ok());
  const Status s = sink_.StatusOf(1);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  ExpectFenceBetweenWritesAndReply();
}

TEST_F(FenceOrderTest, ASuccessfulDecodeFencesBeforeItsReply) {
  ASSERT_TRUE(executor_->Submit(StreamedJob(1)).ok());
  EXPECT_TRUE(sink_.StatusOf(1).ok());
  ExpectFenceBetweenWritesAndReply();
}

// A device that lost its context shows it first at the fence (the decode's
// own calls all went through): the reply carries the sticky error and the
// executor is unhealthy, as for any other sticky error.
TEST_F(FenceOrderTest, AStickyErrorFirstSeenAtTheFenceMakesTheExecutorUnhealthy) {
  devices_[0]->FailFences(
      Internal("waiting for the rank's CUDA stream: CUDA error: an illegal memory access was "
               "encountered")
          .WithReason(ErrorReason::kStickyDevice));
  ASSERT_TRUE(executor_->Submit(StreamedJob(1)).ok());
  const Status s = sink_.StatusOf(1);
  EXPECT_EQ(s.reason(), ErrorReason::kStickyDevice) << s.ToString();
  EXPECT_THAT(executor_->fatal_error(), ::testing::HasSubstr("illegal memory access"));
  EXPECT_EQ(executor_->Submit(MakeJob(2)).code(), StatusCode::kUnavailable);
}

// Two ranks in one group of 2; the demo model's hybrid tiling gives each
// of them tiles.
class GroupFenceOrderTest : public FenceOrderTest {
 protected:
  GroupOptions Group() override {
    GroupOptions g;
    g.ranks = 2;
    g.size = 2;
    g.qualified_sizes = {1, 2};
    g.collective_timeout_ms = 20000;
    return g;
  }
  std::shared_ptr<DecodeJob> TiledJob(uint64_t id) {
    auto job = MakeJob(id, 20, 28, 8);
    job->progress = false;
    job->stream_output = true;
    job->requested_group_size = 2;
    job->settings.tiling = models::TilingOverride{.tile_latent = 10, .overlap_latent = 4};
    return job;
  }
};

TEST_F(GroupFenceOrderTest, AMembersFailureFencesTheAnsweringRankBeforeTheReplyAndTheMember) {
  auto job = TiledJob(1);
  job->settings.faults.member_exception = 1;
  ASSERT_TRUE(executor_->Submit(job).ok());
  const Status s = sink_.StatusOf(1);
  EXPECT_TRUE(s.ok()) << s.ToString();  // decoded again on rank 0 alone
  ExpectFenceBetweenWritesAndReply();
  // The member fenced its failed part too (before its next task; it
  // touches no client memory, so the reply does not wait for it).
  EXPECT_GE(IndexOf(sink_.log.entries(), "rank 1 fence"), 0);
  EXPECT_TRUE(executor_->fatal_error().empty());
}

// A sticky device error on a member rank: the daemon must restart, as
// after one on the output rank, with the reason kept through the member's
// communicator.
TEST_F(GroupFenceOrderTest, AMembersStickyDeviceErrorMakesTheExecutorUnhealthy) {
  auto job = TiledJob(1);
  job->settings.faults.member_device_fatal = 1;
  ASSERT_TRUE(executor_->Submit(job).ok());
  (void)sink_.StatusOf(1);
  for (int i = 0; i < 600 && executor_->fatal_error().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(executor_->fatal_error(), ::testing::HasSubstr("a member of group"));
  EXPECT_THAT(executor_->fatal_error(), ::testing::HasSubstr("illegal memory access"));
  EXPECT_EQ(executor_->Submit(MakeJob(2)).code(), StatusCode::kUnavailable);
}

TEST(ErrorReasonTest, ReasonsSurviveContextAndAreNamed) {
  const Status s = ResourceExhausted("alloc").WithReason(ErrorReason::kOutOfMemory);
  EXPECT_EQ(s.WithContext("decode").reason(), ErrorReason::kOutOfMemory);
  EXPECT_EQ(Internal("x").reason(), ErrorReason::kNone);
  EXPECT_EQ(ErrorReasonName(ErrorReason::kStickyDevice), "sticky_device");
  EXPECT_EQ(ErrorReasonName(ErrorReason::kCollective), "collective");
}

// LibTorch errors are classified once, where they enter (the adapter), into
// a typed reason that nothing downstream reads from the text. A CUDA error
// is classified by its code (c10::AcceleratorError), never by its words.
TEST(TorchAdapterTest, ClassifiesLibTorchErrorsIntoTypedReasons) {
  const Status sticky = models::RunTorch("decode", []() -> Status {
    throw c10::AcceleratorError({__func__, __FILE__, __LINE__}, 700,
                                "CUDA error: an illegal memory access was encountered");
  });
  EXPECT_EQ(sticky.code(), StatusCode::kInternal);
  EXPECT_EQ(sticky.reason(), ErrorReason::kStickyDevice);
  const Status words_only = models::RunTorch("decode", []() -> Status {
    TORCH_CHECK(false, "CUDA error: an illegal memory access was encountered");
    return Status::Ok();
  });
  EXPECT_EQ(words_only.code(), StatusCode::kInternal);
  EXPECT_EQ(words_only.reason(), ErrorReason::kNone);
  const Status oom = models::RunTorch("decode", []() -> Status {
    TORCH_CHECK(false, "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1");
    return Status::Ok();
  });
  EXPECT_EQ(oom.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.reason(), ErrorReason::kOutOfMemory);
  const Status collective = models::RunTorch("tile gather", []() -> Status {
    throw models::CollectiveFailed(Unavailable("collective gather of group s2.b0 failed"));
  });
  EXPECT_EQ(collective.code(), StatusCode::kUnavailable);
  EXPECT_EQ(collective.reason(), ErrorReason::kCollective);
  EXPECT_EQ(collective.message(), "tile gather: collective gather of group s2.b0 failed");
  // A sticky device error inside a collective stays sticky: the daemon
  // must restart, not fall back and serve on.
  const Status sticky_collective = models::RunTorch("tile gather", []() -> Status {
    throw models::CollectiveFailed(
        Internal("cudaStreamSynchronize: an illegal memory access was encountered")
            .WithReason(ErrorReason::kStickyDevice));
  });
  EXPECT_EQ(sticky_collective.code(), StatusCode::kInternal);
  EXPECT_EQ(sticky_collective.reason(), ErrorReason::kStickyDevice);
  const Status other = models::RunTorch("decode", []() -> Status {
    throw std::runtime_error("something else");
  });
  EXPECT_EQ(other.code(), StatusCode::kInternal);
  EXPECT_EQ(other.reason(), ErrorReason::kNone);
}

}  // namespace
}  // namespace vaed::engine
