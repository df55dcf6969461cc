// Acceptance for the start-up warm-up through a real daemon:
// the golden tiny H3 video decoder on 2 ranks with warm_shapes ["17x8"] (a
// canvas of two 16x8-cell tiles, small so start-up stays quick on CI).
//   * every rank decodes the warm shape before READY (one log line each,
//     before the daemon says it serves);
//   * the first request of the warmed shape is warm, on one rank and on a
//     group of both (each rank decoded the canvas in its warm-up);
//   * the first request of a shape that was not warmed is cold, the next
//     one on the same ranks warm;
//   * a warm shape that cannot be decoded (the memory budget) stops the
//     daemon at start-up with an error naming the model and the entry.
// Timings are the benchmark's (vaed_bench_warm_up), not asserted here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;

// The daemon config: `extra` goes into [executor]; the model entry gets
// warm_shapes `warm`.
std::string Config(const std::string& extra, const std::string& warm) {
  return "[executor]\n"
         "intra_op_threads = 1\n" +
         extra +
         "[group]\n"
         "ranks = 2\n"
         "size = 1\n"
         "qualified_sizes = [1, 2]\n"
         "[metrics]\n"
         "enabled = false\n"
         "[models]\n"
         "default = \"h3\"\n"
         "[[models.entry]]\n"
         "name = \"h3\"\n"
         "kind = \"h3_video\"\n"
         "weights = \"" +
         testing::SharedPath(testing::kH3TinyVideoWeights) +
         "\"\n"
         "config = \"" +
         testing::SharedPath(testing::kH3TinyVideoConfig) +
         "\"\n"
         "warm_shapes = [" +
         warm + "]\n";
}

// Decodes a random latent [1, 24, 7, h, w] (one window) to uint8 on a
// group of `group_size` ranks (0: the daemon's default, 1).
Result<v1::DecodeReply> Decode(client::Client& c, int64_t h, int64_t w, uint32_t group_size = 0) {
  const std::vector<int64_t> shape = {1, 24, 7, h, w};
  VAED_ASSIGN_OR_RETURN(v1::DecodeReply plan,
                        ClientProtocol::PlanDecode(c, "h3", DType::kFloat32, shape,
                                                   client::OutputFormat::kUInt8NHWC));
  const uint64_t values = static_cast<uint64_t>(24 * 7 * h * w);
  VAED_ASSIGN_OR_RETURN(auto in, client::SharedRegion::Create(values * sizeof(float)));
  VAED_ASSIGN_OR_RETURN(auto out, client::SharedRegion::Create(plan.output_bytes()));
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::vector<float> latent(values);
  for (float& v : latent) v = normal(gen);
  std::memcpy(in->data(), latent.data(), values * sizeof(float));
  VAED_ASSIGN_OR_RETURN(uint64_t in_id, c.RegisterRegion(*in));
  VAED_ASSIGN_OR_RETURN(uint64_t out_id, c.RegisterRegion(*out));
  client::DecodeRequest request{
      .model = "h3",
      .latent = {in_id, 0, DType::kFloat32, shape},
      .output = {out_id, 0, FromProto(plan.output_dtype()),
                 std::vector<int64_t>(plan.output_shape().begin(), plan.output_shape().end())},
      .format = client::OutputFormat::kUInt8NHWC};
  request.group_size = group_size;
  Result<v1::DecodeReply> reply = ClientProtocol::Decode(c, request);
  VAED_RETURN_IF_ERROR(c.UnregisterRegion(in_id));
  VAED_RETURN_IF_ERROR(c.UnregisterRegion(out_id));
  return reply;
}

class WarmUpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::H3TinyVideoPresent()) return;
    config_ =
        new std::string(testing::WriteTempConfig("warmup", "two-ranks", Config("", "\"17x8\"")));
    daemon_ = new DaemonProcess({"--config", *config_});
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
    delete daemon_;
    daemon_ = nullptr;
    if (config_ != nullptr) std::remove(config_->c_str());
    delete config_;
    config_ = nullptr;
  }
  void SetUp() override {
    if (daemon_ == nullptr) {
      GTEST_SKIP() << "../shared/golden/h3 is absent; the warm-up tests decode with the golden "
                      "tiny H3 weights";
    }
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    auto c = client::Client::Connect({.socket = daemon_->socket(), .client_name = "warm-up"});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }

  static DaemonProcess* daemon_;
  static std::string* config_;
  std::unique_ptr<client::Client> client_;
};
DaemonProcess* WarmUpTest::daemon_ = nullptr;
std::string* WarmUpTest::config_ = nullptr;

TEST_F(WarmUpTest, EveryRankWarmsTheShapeUpBeforeTheDaemonServes) {
  // A request waits until the daemon serves, so the log is complete up to
  // "serving" after it.
  ASSERT_TRUE(ClientProtocol::GetStatus(*client_).ok());
  const std::string log = daemon_->Log();
  const size_t serving = log.find("serving ipc://");
  ASSERT_NE(serving, std::string::npos) << log;
  for (const char* rank : {"rank 0", "rank 1"}) {
    const size_t warmed = log.find(std::string("warm-up: ") + rank +
                                   ": model 'h3' models.entry[0].warm_shapes[0] \"17x8\" "
                                   "(latent [1, 24, 12, 17, 8])");
    ASSERT_NE(warmed, std::string::npos) << rank << "\n" << log;
    EXPECT_LT(warmed, serving) << rank << "\n" << log;
  }
  // The default profile (safe) decoded eager, then the plans optimized
  // requests use were built.
  EXPECT_THAT(log, HasSubstr("profile safe "));
  EXPECT_THAT(log, HasSubstr("compiled plans (profile optimized) "));
  EXPECT_THAT(log, HasSubstr("plan float32 b1 t7 h16 w8: built"));
}

// Regression: warm_shapes built and ran one decoder call of
// the shape's first tile bucket in the model's constructor, on the main
// thread, so the first request of the shape still paid its first-decode
// costs on its rank's thread, and its reply said warm = false (the history
// counted requests only). Before the warm-up both replies here were cold.
TEST_F(WarmUpTest, RegressionTheFirstRequestOfAWarmedShapeIsWarm) {
  auto one = Decode(*client_, 17, 8);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_TRUE(one->warm()) << daemon_->Log();
  // Tile-parallel on both ranks: each decoded the canvas in its warm-up.
  auto both = Decode(*client_, 17, 8, 2);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->group().ranks_size(), 2) << both->group().DebugString();
  EXPECT_EQ(both->group().ranks(1).tiles(), 1u);
  EXPECT_TRUE(both->warm()) << daemon_->Log();
}

TEST_F(WarmUpTest, TheFirstRequestOfAShapeNotWarmedIsColdTheNextWarm) {
  // On the group of both ranks, so that the second request runs where the
  // first did.
  auto first = Decode(*client_, 18, 8, 2);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->group().ranks_size(), 2) << first->group().DebugString();
  EXPECT_FALSE(first->warm());
  auto second = Decode(*client_, 18, 8, 2);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->warm());
}

TEST(WarmUpFailureTest, AWarmShapeThatCannotBeDecodedStopsStartUpNamingTheEntry) {
  if (!testing::H3TinyVideoPresent()) GTEST_SKIP() << "../shared/golden/h3 is absent";
  // 12 MiB hold both ranks' weights (2 x 3.5 MiB) and a decoded 1x1 canvas
  // on each rank at once, but not one decoder call of a 16x8-cell tile (its
  // 28 output frames of 256x128 px in float32 alone are 11 MiB). (With 8
  // MiB the two ranks' concurrent 1x1 warm-ups could already exceed it
  // under load, and rank 0 then failed on entry [0] instead.)
  const std::string config = testing::WriteTempConfig(
      "warmup", "budget", Config("memory_budget_mib = 12\n", "\"1x1\", \"17x8\""));
  char dir[] = "/tmp/vaed-warmup-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const testing::RunResult r =
      testing::RunVaed({"--config", config, "--socket", std::string(dir) + "/vaed.sock"});
  std::remove(config.c_str());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // The shape is refused by the request memory
  // check before any warm-up decode (warm_up_plan.h), as a request of that
  // shape would be; the rank-side failure (a decode that fails during the
  // warm-up) is ExecutorWarmUpFailureTest's.
  EXPECT_THAT(r.output, HasSubstr("warm-up of model 'h3' models.entry[0].warm_shapes[1] = "
                                  "\"17x8\" (checked before any warm-up decode)"));
  EXPECT_THAT(r.output, HasSubstr("resource_exhausted"));
  EXPECT_THAT(r.output, HasSubstr("a request may use here (executor.memory_budget_mib = 12 MiB"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("serving ipc://")));
}

}  // namespace
}  // namespace vaed
