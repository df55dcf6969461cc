// MKL set up for reproducible decodes (daemon/models/mkl_reproducibility.h)
// as every test binary's main() and the daemon's main() set it up.
#include "daemon/models/mkl_reproducibility.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

namespace vaed::models {
namespace {

constexpr int kBranchOff = 1;   // MKL_CBWR_BRANCH_OFF
constexpr int kBranchAuto = 2;  // MKL_CBWR_AUTO

// MKL ran with CNR off (branch 1) in every process; main() now pins AUTO
// before LibTorch computes.
TEST(MklReproducibilityTest, DecodesRunInMklsReproducibleMode) {
  const char* env = std::getenv("MKL_CBWR");
  const int branch = CurrentMklReproducibilityBranch();
  ASSERT_NE(branch, -1) << "this LibTorch has no MKL";
  if (env != nullptr && *env != '\0') {
    EXPECT_NE(branch, kBranchOff) << "MKL_CBWR=" << env << " was not followed";
  } else {
    EXPECT_EQ(branch, kBranchAuto) << "MKL's reproducible mode is not AUTO";
  }
}

// Same inputs, same thread count: the same bytes, call after call.
TEST(MklReproducibilityTest, RepeatedMatmulsGiveTheSameBytes) {
  at::set_num_threads(2);
  torch::Generator g = at::detail::createCPUGenerator(3);
  const torch::Tensor a = torch::randn({1024, 384}, g, torch::kFloat);
  const torch::Tensor b = torch::randn({384, 768}, g, torch::kFloat);
  const torch::Tensor first = torch::mm(a, b);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(torch::equal(torch::mm(a, b), first)) << "call " << i;
  }
}

TEST(MklReproducibilityTest, ASetUpAfterMklHasRunIsReportedNotSilent) {
  // main() has pinned already and tests have computed: a second pin must
  // not claim it set anything it could not.
  (void)torch::mm(torch::ones({64, 64}), torch::ones({64, 64}));
  const MklReproducibilityOutcome again = SetUpMklForReproducibleDecodes();
  const char* env = std::getenv("MKL_CBWR");
  if (env != nullptr && *env != '\0') {
    EXPECT_EQ(again.result, MklReproducibility::kFromEnvironment);
    EXPECT_EQ(again.environment, env);
  } else {
    // MKL accepts setting the mode it already has, or refuses any change.
    EXPECT_TRUE(again.vml_initialised);
    EXPECT_TRUE(again.result == MklReproducibility::kPinnedAuto ||
                again.result == MklReproducibility::kTooLate)
        << again.Describe();
    EXPECT_EQ(CurrentMklReproducibilityBranch(), kBranchAuto);
  }
}

TEST(MklReproducibilityTest, EveryOutcomeDescribesItselfForTheLog) {
  MklReproducibilityOutcome o;
  o.result = MklReproducibility::kTooLate;
  o.vml_initialised = true;
  EXPECT_NE(o.Describe().find("OFF"), std::string::npos) << o.Describe();
  EXPECT_NE(o.Describe().find("may differ"), std::string::npos) << o.Describe();
  EXPECT_FALSE(o.reproducible());
  o.result = MklReproducibility::kRefused;
  o.mkl_code = -2;
  EXPECT_NE(o.Describe().find("code -2"), std::string::npos) << o.Describe();
  o.result = MklReproducibility::kFromEnvironment;
  o.environment = "COMPATIBLE";
  EXPECT_NE(o.Describe().find("MKL_CBWR=COMPATIBLE"), std::string::npos) << o.Describe();
  EXPECT_TRUE(o.reproducible());
  o.vml_initialised = false;
  EXPECT_NE(o.Describe().find("VML did not answer"), std::string::npos) << o.Describe();
  EXPECT_FALSE(o.reproducible());
}

}  // namespace
}  // namespace vaed::models
