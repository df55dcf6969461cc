// Acceptance for the production runtime (DESIGN.md §2.6-2.8) through a real daemon:
// the failure ladder, compiled-plan failures, the memory budget, the plan
// cache's bound and stack_tiling auto's measured memory gate.
//
// One daemon runs with fault injection allowed, a 320 MiB tensor memory
// budget, stack_tiling auto, a plan cache of 2 buckets and the warm shape
// 16x16. Every fault is followed by a good request on the same daemon whose
// raw float32 output must equal, byte for byte, what the daemon returned
// when fresh (its first requests, profile safe, before any fault).
// Latents are the golden H3 cases grid_2x2 (4 tiles of 16x16 latent cells,
// one window) and small_canvas (one 14x14 tile), decoded with the golden
// tiny weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "daemon/models/safetensors.h"
#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const char* const kWeights = "golden/h3/video_tiny_weights.safetensors";
const char* const kConfig = "golden/h3/video_tiny_config.json";

bool GoldenPresent() {
  return testing::SharedFileExists(kWeights) && testing::SharedFileExists(kConfig) &&
         testing::SharedFileExists("golden/h3/video_case_grid_2x2.safetensors") &&
         testing::SharedFileExists("golden/h3/video_case_small_canvas.safetensors");
}

// A float32 latent held by the test.
struct Latent {
  std::vector<float> values;
  std::vector<int64_t> shape;
  uint64_t bytes() const { return values.size() * sizeof(float); }
};

Latent GoldenLatent(const std::string& name) {
  auto file = SafetensorsFile::Open(
      testing::SharedPath("golden/h3/video_case_" + name + ".safetensors"));
  Latent l;
  if (!file.ok()) return l;
  const TensorEntry* e = (*file)->Find("latent");
  if (e == nullptr) return l;
  l.shape = e->shape;
  l.values.resize(e->nbytes / sizeof(float));
  std::memcpy(l.values.data(), e->data, e->nbytes);
  return l;
}

Latent RandomLatent(std::vector<int64_t> shape, uint32_t seed) {
  Latent l;
  l.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : l.shape) n *= d;
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  l.values.resize(static_cast<size_t>(n));
  for (float& v : l.values) v = normal(gen);
  return l;
}

struct Decoded {
  v1::DecodeReply reply;
  std::vector<uint8_t> bytes;
};

// Decodes `latent` to raw float32 (or `format`) through `client`; `tweak`
// sets the request's options.
Result<Decoded> Decode(client::Client& client, const Latent& latent,
                       const std::function<void(client::DecodeRequest&)>& tweak = {},
                       client::OutputFormat format = client::OutputFormat::kFloat32NCHW) {
  VAED_ASSIGN_OR_RETURN(
      v1::DecodeReply plan,
      ClientProtocol::PlanDecode(client, "h3", DType::kFloat32, latent.shape, format));
  VAED_ASSIGN_OR_RETURN(auto in, client::SharedRegion::Create(latent.bytes()));
  VAED_ASSIGN_OR_RETURN(auto out, client::SharedRegion::Create(plan.output_bytes()));
  std::memcpy(in->data(), latent.values.data(), latent.bytes());
  VAED_ASSIGN_OR_RETURN(uint64_t in_id, client.RegisterRegion(*in));
  VAED_ASSIGN_OR_RETURN(uint64_t out_id, client.RegisterRegion(*out));
  client::DecodeRequest request;
  request.model = "h3";
  request.latent = {in_id, 0, DType::kFloat32, latent.shape};
  request.output = {out_id, 0, FromProto(plan.output_dtype()),
                    std::vector<int64_t>(plan.output_shape().begin(), plan.output_shape().end())};
  request.format = format;
  if (tweak) tweak(request);
  Result<v1::DecodeReply> reply = ClientProtocol::Decode(client, request);
  Decoded d;
  if (reply.ok()) {
    d.reply = *reply;
    d.bytes.assign(out->data(), out->data() + reply->output_bytes());
  }
  VAED_RETURN_IF_ERROR(client.UnregisterRegion(in_id));
  VAED_RETURN_IF_ERROR(client.UnregisterRegion(out_id));
  if (!reply.ok()) return reply.status();
  return d;
}

class RuntimeFaultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!GoldenPresent()) return;
    grid_ = new Latent(GoldenLatent("grid_2x2"));
    small_ = new Latent(GoldenLatent("small_canvas"));
    // The daemon under test.
    char tmpl[] = "/tmp/vaed-faults-XXXXXX";
    config_dir_ = new std::string(mkdtemp(tmpl));
    const std::string config = *config_dir_ + "/vaed.toml";
    std::ofstream(config) << "[executor]\n"
                             "intra_op_threads = 2\n"
                             "memory_budget_mib = 320\n"
                             "allow_fault_injection = true\n"
                             "[models]\n"
                             "default = \"h3\"\n"
                             "[[models.entry]]\n"
                             "name = \"h3\"\n"
                             "kind = \"h3_video\"\n"
                             "weights = \""
                          << testing::SharedPath(kWeights)
                          << "\"\n"
                             "config = \""
                          << testing::SharedPath(kConfig)
                          << "\"\n"
                             "stack_tiling = \"auto\"\n"
                             "plan_cache_capacity = 2\n"
                             "warm_shapes = [\"16x16\"]\n";
    daemon_ = new DaemonProcess({"--config", config});
    if (!daemon_->ok()) return;
    // References: the daemon's first requests, profile safe, before any
    // fault (each test runs in its own process under ctest, so this is a
    // fresh daemon's output).
    auto client = client::Client::Connect({.socket = daemon_->socket(), .client_name = "ref"});
    if (!client.ok()) {
      setup_error_ = new std::string("connecting: " + client.status().ToString());
      return;
    }
    auto g = Decode(**client, *grid_);
    auto s = Decode(**client, *small_);
    if (!g.ok() || !s.ok()) {
      setup_error_ = new std::string("grid_2x2: " + g.status().ToString() +
                                     "; small_canvas: " + s.status().ToString());
      return;
    }
    ref_grid_ = new std::vector<uint8_t>(g->bytes);
    ref_small_ = new std::vector<uint8_t>(s->bytes);
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
    delete daemon_;
    delete grid_;
    delete small_;
    delete ref_grid_;
    delete ref_small_;
    delete setup_error_;
    setup_error_ = nullptr;
    if (config_dir_ != nullptr) std::filesystem::remove_all(*config_dir_);
    delete config_dir_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    if (!GoldenPresent()) {
      GTEST_SKIP() << "../shared/golden/h3 is absent; the runtime fault tests decode the "
                      "golden H3 latents with the golden tiny weights";
    }
    ASSERT_NE(daemon_, nullptr);
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    ASSERT_NE(ref_grid_, nullptr) << "the fresh daemon did not decode the references: "
                                  << (setup_error_ != nullptr ? *setup_error_ : "") << "\n"
                                  << daemon_->Log();
    auto client = client::Client::Connect({.socket = daemon_->socket(), .client_name = "faults"});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  // The good request every fault is followed by: the grid case under
  // optimized (plans, auto stacking) and the small case under safe, both
  // byte-identical to the fresh daemon's output.
  void ExpectGoodRequestsUnchanged() {
    auto grid = Decode(*client_, *grid_, [](client::DecodeRequest& r) {
      r.profile = "optimized";
    });
    ASSERT_TRUE(grid.ok()) << grid.status().ToString() << "\n" << daemon_->Log();
    EXPECT_TRUE(grid->bytes == *ref_grid_) << "grid_2x2 output changed after a fault";
    auto small = Decode(*client_, *small_);
    ASSERT_TRUE(small.ok()) << small.status().ToString();
    EXPECT_TRUE(small->bytes == *ref_small_) << "small_canvas output changed after a fault";
  }

  // A grid_2x2 decode that ran out of memory with plans cached: the last
  // rung released them, retried eager and kept the fresh daemon's bytes.
  void ExpectPlansReleasedAndGridBytesKept(const Result<Decoded>& r) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->bytes == *ref_grid_);
    ASSERT_GE(r->reply.tiling().fallbacks_size(), 1);
    EXPECT_THAT(r->reply.tiling().fallbacks(0), HasSubstr("released the compiled-plan cache"));
  }

  Result<v1::PlanCacheInfo> PlanCache() {
    VAED_ASSIGN_OR_RETURN(v1::StatusReply status, ClientProtocol::GetStatus(*client_));
    for (const auto& m : status.models()) {
      if (m.name() == "h3") return m.plan_cache();
    }
    return NotFound("model h3 not in status");
  }

  static DaemonProcess* daemon_;
  static std::string* config_dir_;
  static Latent* grid_;
  static Latent* small_;
  static std::vector<uint8_t>* ref_grid_;
  static std::vector<uint8_t>* ref_small_;
  static std::string* setup_error_;  // why the references were not decoded
  std::unique_ptr<client::Client> client_;
};
DaemonProcess* RuntimeFaultsTest::daemon_ = nullptr;
std::string* RuntimeFaultsTest::config_dir_ = nullptr;
Latent* RuntimeFaultsTest::grid_ = nullptr;
Latent* RuntimeFaultsTest::small_ = nullptr;
std::vector<uint8_t>* RuntimeFaultsTest::ref_grid_ = nullptr;
std::vector<uint8_t>* RuntimeFaultsTest::ref_small_ = nullptr;
std::string* RuntimeFaultsTest::setup_error_ = nullptr;

TEST_F(RuntimeFaultsTest, WarmShapeWasBuiltBeforeReady) {
  auto cache = PlanCache();
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(cache->capacity(), 2u);
  EXPECT_GE(cache->builds(), 1u);
  // The warm-up's line (engine/warm_up.h): its compiled-plans decode built
  // the shape's one-tile bucket.
  const std::string log = daemon_->Log();
  EXPECT_THAT(log, HasSubstr("warm-up: rank 0: model 'h3' models.entry[0].warm_shapes[0] "
                             "\"16x16\""));
  EXPECT_THAT(log, HasSubstr("plan float32 b1 t7 h16 w16: built"));
}

TEST_F(RuntimeFaultsTest, OutOfMemoryAtTheStackedRungStepsDownAndKeepsTheBytes) {
  auto r = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.stack_tiling = client::StackTiling::kOn;
    q.inject_faults = {"oom_stacked"};
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->bytes == *ref_grid_);
  const v1::TilingInfo& t = r->reply.tiling();
  EXPECT_EQ(t.planned_tiles_per_call(), 4u);
  EXPECT_EQ(t.final_tiles_per_call(), 2u);
  ASSERT_GE(t.fallbacks_size(), 1);
  EXPECT_THAT(t.fallbacks(0), StartsWith("4 -> 2 tiles per call: "));
  EXPECT_THAT(t.fallbacks(0), HasSubstr("injected fault oom_stacked"));
  ExpectGoodRequestsUnchanged();
}

TEST_F(RuntimeFaultsTest, OutOfMemoryAtTheSequentialRungIsAClearError) {
  // With plans cached (the warm shape), the last rung releases them and
  // retries eager, which succeeds.
  auto released = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.stack_tiling = client::StackTiling::kOff;
    q.inject_faults = {"oom_sequential"};
  });
  ExpectPlansReleasedAndGridBytesKept(released);
  // Nothing cached now: nothing lower to try, a clear error.
  auto r = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.stack_tiling = client::StackTiling::kOff;
    q.inject_faults = {"oom_sequential"};
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("injected fault oom_sequential"));
  EXPECT_THAT(r.status().message(), HasSubstr("tiles per call at the failure: 1"));
  // Down the whole ladder, then out of rungs.
  auto all = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.stack_tiling = client::StackTiling::kOn;
    q.inject_faults = {"oom_stacked", "oom_stacked", "oom_sequential"};
  });
  ASSERT_FALSE(all.ok());
  EXPECT_THAT(all.status().message(), HasSubstr("4 -> 2 tiles per call"));
  EXPECT_THAT(all.status().message(), HasSubstr("2 -> 1 tiles per call"));
  ExpectGoodRequestsUnchanged();
}

TEST_F(RuntimeFaultsTest, RequestOverTheMemoryBudgetFailsCleanly) {
  // 1024 x 1024 px: one decoded window alone is 28 * 3 * 1024^2 * 4 bytes
  // = 336 MiB, over the 320 MiB budget whatever the rung. The
  // plan's memory estimate refuses it at admission, before anything
  // is allocated (it used to fail at allocation time, halfway through).
  const Latent big = RandomLatent({1, 24, 3, 64, 64}, 5);
  auto r = Decode(*client_, big, {}, client::OutputFormat::kUInt8NHWC);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("latent [1, 24, 3, 64, 64] needs about"));
  EXPECT_THAT(r.status().message(), HasSubstr("executor.memory_budget_mib = 320 MiB"));
  ExpectGoodRequestsUnchanged();
}

TEST_F(RuntimeFaultsTest, PlanBuildFailureRunsEagerAndMarksTheBucketEagerOnly) {
  auto r = Decode(*client_, *small_, [](client::DecodeRequest& q) {
    q.profile = "optimized";
    q.compile = client::Compile::kOn;
    q.inject_faults = {"plan_build"};
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->bytes == *ref_small_);
  EXPECT_THAT(r->reply.tiling().plan_decision(),
              HasSubstr("eager: plan build of float32 b1 t7 h14 w14 failed"));
  EXPECT_EQ(r->reply.tiling().eager_calls(), 1u);
  auto cache = PlanCache();
  ASSERT_TRUE(cache.ok());
  bool listed = false;
  for (const auto& e : cache->eager_only()) {
    if (e.bucket() == "float32 b1 t7 h14 w14") {
      listed = true;
      EXPECT_EQ(e.reason(), "build failed: build: injected fault plan_build");
    }
  }
  EXPECT_TRUE(listed) << "eager-only bucket not in status";
  // Sticky: asking again does not rebuild.
  auto again = Decode(*client_, *small_, [](client::DecodeRequest& q) {
    q.profile = "optimized";
    q.compile = client::Compile::kOn;
  });
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->bytes == *ref_small_);
  EXPECT_THAT(again->reply.tiling().plan_decision(), HasSubstr("is eager-only (build failed"));
  ExpectGoodRequestsUnchanged();
}

TEST_F(RuntimeFaultsTest, ExceptionInsideATileDecode) {
  // Eager: nothing to fall back to; the request fails, the daemon serves on.
  auto eager = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.inject_faults = {"tile_exception"};
  });
  ASSERT_FALSE(eager.ok());
  EXPECT_EQ(eager.status().code(), StatusCode::kInternal);
  EXPECT_THAT(eager.status().message(), HasSubstr("injected fault tile_exception"));
  ExpectGoodRequestsUnchanged();
  // In a compiled plan: that bucket falls back to eager for good, the
  // request succeeds.
  auto planned = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.profile = "optimized";
    q.compile = client::Compile::kOn;
    q.stack_tiling = client::StackTiling::kOn;
    q.inject_faults = {"tile_exception"};
  });
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_TRUE(planned->bytes == *ref_grid_);
  EXPECT_THAT(planned->reply.tiling().fallbacks(),
              ::testing::Contains(HasSubstr("marked eager-only: first run failed")));
  ExpectGoodRequestsUnchanged();
}

TEST_F(RuntimeFaultsTest, StackAutoUsesTheMeasuredEstimate) {
  // The warm-up measured one-tile calls of 16x16 tiles, so auto can decide
  // for the 4-tile grid from a measurement.
  auto r = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.profile = "optimized";
    q.stack_tiling = client::StackTiling::kAuto;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->bytes == *ref_grid_);
  const v1::TilingInfo& t = r->reply.tiling();
  // The estimate is scaled from measured one-tile calls (x k); whether a
  // stack of 4, of 2 or none fits depends on the headroom left under the
  // 320 MiB budget (cached plans of earlier requests count), so any of the
  // three is right as long as the reply says which and the decode did it.
  if (t.stack_decision().find("auto: sequential") == 0) {
    EXPECT_THAT(t.stack_decision(), HasSubstr("more than the headroom"));
    EXPECT_EQ(t.max_tiles_per_call(), 1u);
  } else {
    EXPECT_THAT(t.stack_decision(),
                ::testing::AnyOf(HasSubstr("auto: 4 of 4 same-shape tiles per call"),
                                 HasSubstr("auto: 2 of 4 same-shape tiles per call")));
    EXPECT_THAT(t.stack_decision(), HasSubstr("fits the headroom"));
    EXPECT_GE(t.max_tiles_per_call(), 2u);
  }
  EXPECT_THAT(t.stack_decision(), HasSubstr("measured on tile bucket t7 h16 w16"));
  EXPECT_GT(t.estimated_peak_bytes(), 0u);
  EXPECT_EQ(r->reply.memory_budget_bytes(), 320ull << 20);
  EXPECT_GT(r->reply.peak_tensor_bytes(), 0u);
  EXPECT_LE(r->reply.peak_tensor_bytes(), 320ull << 20);
}

TEST_F(RuntimeFaultsTest, AutoDecisionIsLoggedOncePerShapeBucket) {
  for (int i = 0; i < 3; ++i) {
    auto r = Decode(*client_, *small_, [](client::DecodeRequest& q) {
      q.stack_tiling = client::StackTiling::kAuto;
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->reply.tiling().stack_decision(), "auto: 1 tile per window, nothing to stack");
  }
  const std::string log = daemon_->Log();
  size_t count = 0;
  for (size_t at = log.find("tiles sequential (auto: 1 tile per window, nothing to stack)");
       at != std::string::npos;
       at = log.find("tiles sequential (auto: 1 tile per window, nothing to stack)", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << log;
}

TEST_F(RuntimeFaultsTest, CachedPlansNeverStarveLaterRequests) {
  // Fill the cache with plans, then push a request to the edge of the
  // budget: an out-of-memory failure releases the plans and retries eager,
  // and the good requests afterwards are served with unchanged bytes.
  for (int64_t side : {16, 15, 14}) {
    const Latent z = RandomLatent({1, 24, 3, 16, side}, static_cast<uint32_t>(side));
    ASSERT_TRUE(Decode(*client_, z, [](client::DecodeRequest& q) {
                  q.profile = "optimized";
                  q.compile = client::Compile::kOn;
                }).ok());
  }
  auto before = PlanCache();
  ASSERT_TRUE(before.ok());
  EXPECT_GT(before->plan_bytes(), 0u);
  auto r = Decode(*client_, *grid_, [](client::DecodeRequest& q) {
    q.profile = "optimized";
    q.compile = client::Compile::kOn;
    q.stack_tiling = client::StackTiling::kOff;
    q.inject_faults = {"oom_sequential"};
  });
  ExpectPlansReleasedAndGridBytesKept(r);
  EXPECT_THAT(r->reply.tiling().plan_decision(), HasSubstr("eager (compile off)"));
  auto after = PlanCache();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->buckets_size(), 0);
  EXPECT_EQ(after->plan_bytes(), 0u);
  ExpectGoodRequestsUnchanged();
}

TEST_F(RuntimeFaultsTest, PlanCacheStaysAtItsBoundWithCorrectOutputs) {
  // Four one-tile canvases = four buckets through a cache of two.
  for (int64_t side : {6, 8, 10, 12}) {
    SCOPED_TRACE("canvas " + std::to_string(side));
    const Latent z = RandomLatent({1, 24, 3, side, side}, static_cast<uint32_t>(side));
    auto safe = Decode(*client_, z);
    ASSERT_TRUE(safe.ok()) << safe.status().ToString();
    auto planned = Decode(*client_, z, [](client::DecodeRequest& q) {
      q.profile = "optimized";
      q.compile = client::Compile::kOn;
    });
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    EXPECT_TRUE(planned->bytes == safe->bytes);
    EXPECT_THAT(planned->reply.tiling().plan_decision(), HasSubstr(": built"));
    auto cache = PlanCache();
    ASSERT_TRUE(cache.ok());
    EXPECT_LE(cache->buckets_size(), 2);
  }
  auto cache = PlanCache();
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->buckets_size(), 2);
  EXPECT_EQ(cache->buckets(0), "float32 b1 t7 h12 w12");  // most recent first
  EXPECT_GE(cache->evictions(), 3u);
}

// A deadline cancels the decode between tile calls, not after it.
// Each tile call is slowed by 50 ms (slow_tiles) so the decode outlasts a
// 120 ms deadline by several calls.
TEST_F(RuntimeFaultsTest, DeadlineCancelsBetweenTileCalls) {
  auto slow = [](client::DecodeRequest& q) { q.inject_faults = {"slow_tiles"}; };
  auto t0 = std::chrono::steady_clock::now();
  auto full = Decode(*client_, *grid_, slow);
  const double full_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const uint32_t calls = full->reply.tiling().decoder_calls();
  ASSERT_GE(calls, 4u);

  t0 = std::chrono::steady_clock::now();
  auto r = Decode(*client_, *grid_, [&](client::DecodeRequest& q) {
    slow(q);
    q.deadline_ms = 120;
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("options.deadline_ms 120 passed"));
  std::smatch m;
  const std::string message = r.status().message();
  ASSERT_TRUE(std::regex_search(message, m, std::regex("before tile call (\\d+)"))) << message;
  EXPECT_LT(std::stoul(m[1].str()), calls) << "cancelled only at the end: " << message;
  EXPECT_LT(seconds, 0.75 * full_seconds) << message;
  ExpectGoodRequestsUnchanged();
}

}  // namespace
}  // namespace vaed
