// The H3 video limits come from memory, not a fixed extent.
// The RFC's benchmark shape, latent [1, 24, 33, 96, 168] (1536x2688, 111
// frames, 112 tiles), is planned by a daemon with room for it and refused,
// naming the estimate and the budget, by one configured with a small
// memory budget (plan-only requests: nothing is decoded). Needs the H3
// golden pack's tiny decoder under ../shared (skips without it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using ::testing::HasSubstr;
using testing::DaemonProcess;

const std::vector<int64_t> kRfcShape = {1, 24, 33, 96, 168};

class H3LimitsTest : public ::testing::Test {
 protected:
  // A daemon serving the tiny H3 decoder with `budget_mib` of tensor memory.
  void Start(const std::string& budget_mib) {
    if (!testing::H3TinyVideoPresent()) {
      GTEST_SKIP() << "../shared/golden/h3 is absent; the limits test needs its tiny decoder";
    }
    daemon_ = std::make_unique<DaemonProcess>(std::vector<std::string>{
        "--model",
        "h3=h3_video:" + testing::SharedPath(testing::kH3TinyVideoWeights) + ":" +
            testing::SharedPath(testing::kH3TinyVideoConfig),
        "--default-model", "h3", "--memory-budget-mib", budget_mib});
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    auto client = client::Client::Connect({.socket = daemon_->socket(), .client_name = "limits"});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  void TearDown() override {
    if (daemon_) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
  }
  Result<v1::DecodeReply> Plan(const std::vector<int64_t>& shape) {
    return ClientProtocol::PlanDecode(*client_, "h3", DType::kFloat32, shape,
                                      client::OutputFormat::kUInt8NHWC);
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<client::Client> client_;
};

TEST_F(H3LimitsTest, RfcShapeIsPlannedWhereMemoryAllows) {
  Start("65536");
  if (IsSkipped()) return;
  auto plan = Plan(kRfcShape);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->frames(), 111u);
  EXPECT_EQ(plan->height_px(), 1536u);
  EXPECT_EQ(plan->width_px(), 2688u);
  // Wider than the 160-cell cap this replaces (2560 px) on both axes.
  auto wide = Plan({1, 24, 7, 161, 200});
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_EQ(wide->width_px(), 3200u);
}

TEST_F(H3LimitsTest, RfcShapeIsRefusedNamingTheBudgetWhenItCannotFit) {
  Start("1024");
  if (IsSkipped()) return;
  auto plan = Plan(kRfcShape);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.status().message(), HasSubstr("latent [1, 24, 33, 96, 168] needs about"));
  EXPECT_THAT(plan.status().message(), HasSubstr("executor.memory_budget_mib = 1024 MiB"));
  EXPECT_THAT(plan.status().message(), HasSubstr("resident weights"));
  EXPECT_THAT(plan.status().message(), HasSubstr("output 5.1 GiB"));
  // The daemon keeps serving, and a shape that fits is still planned.
  auto small = Plan({1, 24, 7, 16, 16});
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->frames(), 22u);  // T = 5k+2 -> 17k+5
}

}  // namespace
}  // namespace vaed
