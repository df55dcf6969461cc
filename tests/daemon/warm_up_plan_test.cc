// Which decodes the start-up warm-up runs for a model's warm_shapes, per
// profile policy and stack_tiling default (daemon/server/warm_up_plan.h).
// An h3_video model with the golden tiny config and seeded random weights
// (skips without ../shared).
#include "daemon/server/warm_up_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/test_paths.h"

namespace vaed::server {
namespace {

using models::CompileMode;
using models::StackTiling;
using ::testing::HasSubstr;

std::string TinyConfig() {
  return std::string(VAED_SHARED_DIR) + "/golden/h3/video_tiny_config.json";
}

// A registry of one h3_video model "h3" with `stack_tiling` and the warm
// shapes 16x16 and 20x8.
std::unique_ptr<models::ModelRegistry> Registry(models::StackTiling stack_tiling) {
  models::ModelConfig c;
  c.name = "h3";
  c.kind = models::ModelKind::kH3Video;
  c.config_path = TinyConfig();
  c.seed = 1;
  c.stack_tiling = stack_tiling;
  c.warm_shapes = {"16x16", "20x8"};
  auto r = models::ModelRegistry::Create({c}, "h3");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// "what: stack compile" per pass, e.g. "profile safe: off off".
std::vector<std::string> Passes(const engine::WarmUp& w) {
  auto stack = [](StackTiling s) {
    switch (s) {
      case StackTiling::kDefault:
        return "default";
      case StackTiling::kOff:
        return "off";
      case StackTiling::kOn:
        return "on";
      case StackTiling::kAuto:
        return "auto";
    }
    return "?";
  };
  auto compile = [](CompileMode c) {
    return c == CompileMode::kOn ? "on" : (c == CompileMode::kAuto ? "auto" : "off");
  };
  std::vector<std::string> out;
  for (const engine::WarmUpPass& p : w.passes) {
    out.push_back(p.what + ": " + stack(p.settings.stack_tiling) + " " +
                  compile(p.settings.compile));
  }
  return out;
}

class WarmUpPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(TinyConfig())) {
      GTEST_SKIP() << "../shared/golden/h3 is absent (the tiny H3 config)";
    }
  }
};

TEST_F(WarmUpPlanTest, EveryWarmShapeOfTheModelIsPlannedWithItsLatentAndEntry) {
  auto registry = Registry(models::StackTiling::kOff);
  ASSERT_NE(registry, nullptr);
  auto plan = PlanWarmUps(*registry, ProfileOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].shape.model, "h3");
  EXPECT_EQ((*plan)[0].model_index, 0u);
  EXPECT_EQ((*plan)[0].shape.field, "models.entry[0].warm_shapes[0]");
  EXPECT_EQ((*plan)[0].shape.canvas, "16x16");
  // Two temporal windows, so the cross-fade runs too.
  EXPECT_EQ((*plan)[0].shape.latent_shape, (std::vector<int64_t>{1, 24, 12, 16, 16}));
  EXPECT_EQ((*plan)[1].shape.field, "models.entry[0].warm_shapes[1]");
  EXPECT_EQ((*plan)[1].shape.latent_shape, (std::vector<int64_t>{1, 24, 12, 20, 8}));
}

// Regression: warm_shapes skipped the memory check every
// request gets, so warm_shapes = ["16384x16384"] went on to allocate ~309 GB
// at start-up instead of being refused. Now a warm shape is planned and
// checked against what one request may use, naming the entry.
TEST_F(WarmUpPlanTest, RegressionAWarmShapeNoRequestCouldDecodeIsRefusedNamingTheEntry) {
  auto registry = Registry(models::StackTiling::kOff);
  ASSERT_NE(registry, nullptr);
  const engine::RequestMemory tiny{.known = true, .bytes = 1 << 20,
                                   .source = "executor.memory_budget_mib = 1 MiB"};
  auto plan = PlanWarmUps(*registry, ProfileOptions{}, tiny);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(plan.status().field(), "models.entry[0].warm_shapes[0]");
  EXPECT_THAT(plan.status().message(), HasSubstr("warm_shapes[0] = \"16x16\""));
  EXPECT_THAT(plan.status().message(), HasSubstr("executor.memory_budget_mib = 1 MiB"));
  // Enough memory (or none known): planned as before.
  const engine::RequestMemory ample{.known = true, .bytes = uint64_t{64} << 30,
                                    .source = "test"};
  EXPECT_TRUE(PlanWarmUps(*registry, ProfileOptions{}, ample).ok());
}

TEST_F(WarmUpPlanTest, SafeDefaultRunsEagerThenBuildsThePlansOptimizedWouldUse) {
  auto registry = Registry(models::StackTiling::kOff);
  ASSERT_NE(registry, nullptr);
  auto plan = PlanWarmUps(*registry, ProfileOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_THAT(Passes((*plan)[0]),
              ::testing::ElementsAre("profile safe: off off",
                                     "compiled plans (profile optimized): default on"));
}

TEST_F(WarmUpPlanTest, NoPlansWhenNoAllowedProfileUsesThem) {
  auto registry = Registry(models::StackTiling::kOff);
  ASSERT_NE(registry, nullptr);
  auto plan =
      PlanWarmUps(*registry, ProfileOptions{.default_profile = Profile::kSafe, .allowed = {Profile::kSafe}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_THAT(Passes((*plan)[0]), ::testing::ElementsAre("profile safe: off off"));
  // Diagnostic alone still uses plans.
  plan = PlanWarmUps(*registry,
                     ProfileOptions{.default_profile = Profile::kSafe,
                                    .allowed = {Profile::kSafe, Profile::kDiagnostic}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_THAT(Passes((*plan)[0]),
              ::testing::ElementsAre("profile safe: off off",
                                     "compiled plans (profile diagnostic): default on"));
}

TEST_F(WarmUpPlanTest, OptimizedDefaultBuildsItsPlansInOnePass) {
  auto registry = Registry(models::StackTiling::kOn);
  ASSERT_NE(registry, nullptr);
  auto plan = PlanWarmUps(*registry, ProfileOptions{.default_profile = Profile::kOptimized});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_THAT(Passes((*plan)[0]), ::testing::ElementsAre("profile optimized: default on"));
}

TEST_F(WarmUpPlanTest, StackAutoFirstMeasuresTilePeaksSequentially) {
  // auto decides from peaks measured on earlier calls: without the
  // measuring pass the warm-up would decode sequentially and the first
  // request stack (another decoder-call shape, a plan not built yet).
  auto registry = Registry(models::StackTiling::kAuto);
  ASSERT_NE(registry, nullptr);
  auto plan = PlanWarmUps(*registry, ProfileOptions{.default_profile = Profile::kOptimized});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_THAT(Passes((*plan)[0]),
              ::testing::ElementsAre("tile peaks for stack_tiling auto: off off",
                                     "profile optimized: default on"));
  // Under safe the eager sequential pass measures already.
  plan = PlanWarmUps(*registry, ProfileOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_THAT(Passes((*plan)[0]),
              ::testing::ElementsAre("profile safe: off off",
                                     "compiled plans (profile optimized): default on"));
}

TEST_F(WarmUpPlanTest, NoWarmShapesNoWarmUps) {
  models::ModelConfig demo;
  demo.name = "demo";
  demo.kind = models::ModelKind::kDemo;
  auto registry = models::ModelRegistry::Create({demo}, "demo");
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  auto plan = PlanWarmUps(**registry, ProfileOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->empty());
}

}  // namespace
}  // namespace vaed::server
