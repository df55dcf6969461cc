// Tests of the model registry (daemon/models/model_registry.h).
#include "daemon/models/model_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "safetensors_test_util.h"

namespace vaed::models {
namespace {

using ::testing::HasSubstr;

ModelConfig Demo(std::string name, uint64_t seed = 0) {
  ModelConfig c;
  c.name = std::move(name);
  c.kind = models::ModelKind::kDemo;
  c.seed = seed;
  return c;
}

Status CreateStatus(const std::vector<ModelConfig>& configs, const std::string& default_model) {
  Result<std::unique_ptr<ModelRegistry>> r = ModelRegistry::Create(configs, default_model);
  return r.ok() ? Status::Ok() : r.status();
}

TEST(ModelRegistryTest, CreateRejectsEmptyConfig) {
  Status s = CreateStatus({}, "taef2");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no model is configured"));
}

TEST(ModelRegistryTest, CreateRejectsEmptyName) {
  Status s = CreateStatus({Demo("")}, "");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("models.entry[0].name is empty"));
}

TEST(ModelRegistryTest, CreateRejectsDuplicateNames) {
  Status s = CreateStatus({Demo("a"), Demo("b"), Demo("a")}, "a");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("models.entry[2].name 'a' is a duplicate"));
}

TEST(ModelRegistryTest, CreateRejectsH3OnlyKeysOnOtherKinds) {
  ModelConfig c = Demo("d");
  c.config_path = "/tmp/config.json";
  EXPECT_THAT(CreateStatus({c}, "d").message(), HasSubstr("models.entry[0].config is set"));
  c = Demo("d");
  c.compute_dtype = ComputeDtype::kBFloat16;
  EXPECT_THAT(CreateStatus({c}, "d").message(), HasSubstr("models.entry[0].compute_dtype"));
  c = Demo("d");
  c.stack_tiling = StackTiling::kOn;
  EXPECT_THAT(CreateStatus({c}, "d").message(),
              HasSubstr("does not decode in tiles (only h3_video and h3 stack tiles)"));
}

// stack_tiling and compute_dtype are enums (the config reader refuses other
// names: config_test.cc); a missing weights file fails the load.
TEST(ModelRegistryTest, CreateRejectsBadH3VideoOptionsBeforeLoading) {
  ModelConfig c;
  c.name = "h3";
  c.kind = models::ModelKind::kH3Video;
  c.stack_tiling = StackTiling::kAuto;
  c.compute_dtype = ComputeDtype::kFloat32;
  c.weights_path = "/nonexistent/h3.safetensors";
  Status s = CreateStatus({c}, "h3");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/h3.safetensors"));
}

TEST(ModelRegistryTest, CompiledPlanKeysAreCheckedAndOnlyForH3Video) {
  ModelConfig c;
  c.name = "h3";
  c.kind = models::ModelKind::kH3Video;
  c.warm_shapes = {"32x48", "16 x 16"};
  EXPECT_THAT(CreateStatus({c}, "h3").message(),
              HasSubstr("models.entry[0].warm_shapes[1] is '16 x 16'; must be \"HxW\" in latent "
                        "cells, each in [1, 16384]"));
  c.warm_shapes = {"0x16"};
  EXPECT_THAT(CreateStatus({c}, "h3").message(), HasSubstr("warm_shapes[0] is '0x16'"));
  c.warm_shapes = {"16x16385"};
  EXPECT_THAT(CreateStatus({c}, "h3").message(), HasSubstr("warm_shapes[0] is '16x16385'"));
  c.warm_shapes = {"16x16x"};
  EXPECT_THAT(CreateStatus({c}, "h3").message(), HasSubstr("warm_shapes[0] is '16x16x'"));
  c.warm_shapes = {};
  c.plan_cache_capacity = 0;
  EXPECT_THAT(CreateStatus({c}, "h3").message(),
              HasSubstr("models.entry[0].plan_cache_capacity is 0; must be in [1, 1024]"));
  c.plan_cache_capacity.reset();
  c.plan_after_sightings = 5000;
  EXPECT_THAT(CreateStatus({c}, "h3").message(),
              HasSubstr("models.entry[0].plan_after_sightings is 5000; must be in [1, 1000]"));
  ModelConfig d = Demo("d");
  d.warm_shapes = {"16x16"};
  EXPECT_THAT(CreateStatus({d}, "d").message(),
              HasSubstr("models.entry[0].warm_shapes is set for model 'd'"));
  EXPECT_THAT(CreateStatus({d}, "d").message(),
              HasSubstr("has no compiled plans (only h3_video and h3 do)"));
  d = Demo("d");
  d.plan_cache_capacity = 4;
  EXPECT_THAT(CreateStatus({d}, "d").message(), HasSubstr("plan_cache_capacity"));
}

TEST(ModelRegistryTest, CreateRejectsTaef2WithoutWeightsPath) {
  ModelConfig c;
  c.name = "taef2";
  c.kind = models::ModelKind::kTaef2;
  Status s = CreateStatus({c}, "taef2");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("models.entry[0].weights is empty"));
}

TEST(ModelRegistryTest, CreateRejectsTaef2WithBadFrameBatch) {
  ModelConfig c;
  c.name = "taef2";
  c.kind = models::ModelKind::kTaef2;
  c.weights_path = "/nonexistent.safetensors";
  c.frame_batch = 0;
  Status s = CreateStatus({c}, "taef2");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("models.entry[0].frame_batch is 0"));
}

TEST(ModelRegistryTest, CreateRejectsDemoWithWeightsPath) {
  ModelConfig c = Demo("d");
  c.weights_path = "/some/weights.safetensors";
  Status s = CreateStatus({c}, "d");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("models.entry[0].weights is set for model 'd' of kind demo"));
}

TEST(ModelRegistryTest, CreateRejectsKeysTheKindDoesNotTake) {
  struct Case {
    ModelConfig config;
    std::string message;
  };
  auto make = [](ModelKind kind, auto edit) {
    ModelConfig c;
    c.name = "m";
    c.kind = kind;
    if (c.kind == ModelKind::kTaef2) c.weights_path = "/nonexistent/taef2.safetensors";
    edit(c);
    return c;
  };
  const std::vector<Case> cases = {
      {make(ModelKind::kTaef2, [](ModelConfig& c) { c.audio_weights_path = "/a.safetensors"; }),
       "models.entry[0].audio_weights is set for model 'm' of kind taef2, which has no audio "
       "decoder (only h3_audio and h3 do)"},
      {make(ModelKind::kH3Video, [](ModelConfig& c) { c.audio_config_path = "/a.json"; }),
       "models.entry[0].audio_config is set for model 'm' of kind h3_video"},
      {make(ModelKind::kH3Audio, [](ModelConfig& c) { c.weights_path = "/v.safetensors"; }),
       "models.entry[0].weights is set for model 'm' of kind h3_audio, which takes its weights "
       "as audio_weights"},
      {make(ModelKind::kH3Audio, [](ModelConfig& c) { c.config_path = "/v.json"; }),
       "which takes its config as audio_config"},
      {make(ModelKind::kH3Audio, [](ModelConfig& c) { c.stack_tiling = StackTiling::kOn; }),
       "models.entry[0].stack_tiling is 'on'"},
      {make(ModelKind::kH3, [](ModelConfig& c) { c.frame_batch = 8; }),
       "models.entry[0].frame_batch is set for model 'm' of kind h3, which has no frame "
       "batches"},
      {make(ModelKind::kTaef2, [](ModelConfig& c) { c.seed = 7; }),
       "models.entry[0].seed is set for model 'm' of kind taef2, which loads all its weights"},
      {make(ModelKind::kH3, [](ModelConfig& c) {
         c.weights_path = "/v.safetensors";
         c.audio_weights_path = "/a.safetensors";
         c.seed = 1;
       }),
       "models.entry[0].seed is set"},
  };
  for (const Case& c : cases) {
    Status s = CreateStatus({c.config}, "m");
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_EQ(ModelRegistry::Validate({c.config}, "m").message(), s.message())
        << "Validate() and Create() must agree";
  }
  // Seeds are taken where some weights are generated.
  ModelConfig partly = make(ModelKind::kH3, [](ModelConfig& c) {
    c.weights_path = "/v.safetensors";
    c.seed = 1;
  });
  EXPECT_TRUE(ModelRegistry::Validate({partly}, "m").ok());
}

TEST(ModelRegistryTest, CreateRejectsDefaultModelNotConfigured) {
  Status s = CreateStatus({Demo("a"), Demo("b")}, "c");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "default_model 'c' is not a configured model (configured: a, b)");
}

TEST(ModelRegistryTest, CreateValidatesWholeConfigBeforeLoading) {
  // The second entry is bad; the first (a missing weights file) must not be
  // loaded, so the error is the config error, not kNotFound.
  ModelConfig real;
  real.name = "taef2";
  real.kind = models::ModelKind::kTaef2;
  real.weights_path = "/nonexistent/taef2_decoder.safetensors";
  ModelConfig bad = Demo("z");
  bad.weights_path = "/demo/generates/its/weights.safetensors";
  Status s = CreateStatus({real, bad}, "taef2");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("models.entry[1].weights is set for model 'z'"));
}

TEST(ModelRegistryTest, CreatePropagatesLoadErrors) {
  ModelConfig real;
  real.name = "taef2";
  real.kind = models::ModelKind::kTaef2;
  real.weights_path = "/nonexistent/taef2_decoder.safetensors";
  Status s = CreateStatus({real}, "taef2");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("model 'taef2'"));
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/taef2_decoder.safetensors"));
}

TEST(ModelRegistryTest, FindAndGetResolveNamesAndTheDefault) {
  Result<std::unique_ptr<ModelRegistry>> r =
      ModelRegistry::Create({Demo("a", 1), Demo("b", 2)}, "b");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ModelRegistry& reg = **r;
  EXPECT_EQ(reg.default_model(), "b");
  ASSERT_NE(reg.Find("a"), nullptr);
  EXPECT_EQ(reg.Find("a")->info().name, "a");
  ASSERT_NE(reg.Find(""), nullptr);
  EXPECT_EQ(reg.Find("")->info().name, "b");
  EXPECT_EQ(reg.Find("c"), nullptr);

  Result<VaeModel*> got = reg.Get("a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, reg.Find("a"));

  std::vector<const VaeModel*> all = reg.models();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]->info().name, "a");
  EXPECT_EQ(all[1]->info().name, "b");
  EXPECT_TRUE(all[0]->info().demo_weights);
}

TEST(ModelRegistryTest, GetUnknownNameListsAvailableModels) {
  Result<std::unique_ptr<ModelRegistry>> r = ModelRegistry::Create({Demo("a"), Demo("b")}, "a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<VaeModel*> got = (*r)->Get("taef3");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(got.status().message(), "unknown model 'taef3' (available: a, b)");
}

TEST(ModelRegistryTest, LoadsRealTaef2Weights) {
  const std::string weights = test_util::SharedDataPath("taef2_decoder.safetensors");
  if (!test_util::Exists(weights)) GTEST_SKIP() << "shared data absent: " << weights;
  ModelConfig real;
  real.name = "taef2";
  real.kind = models::ModelKind::kTaef2;
  real.weights_path = weights;
  Result<std::unique_ptr<ModelRegistry>> r = ModelRegistry::Create({real, Demo("demo")}, "taef2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<VaeModel*> m = (*r)->Get("");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->info().kind, "taef2");
  EXPECT_FALSE((*m)->info().demo_weights);
  EXPECT_EQ((*m)->info().weights_sha256,
            "89f5078dc26a2dd6b6ce5d18ef0cee482bb81c56ff56c417185f1699defd2138");
}

}  // namespace
}  // namespace vaed::models
