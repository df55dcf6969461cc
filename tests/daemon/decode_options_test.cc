// Table-driven tests of per-request option resolution against profiles and
// model capabilities (daemon/server/decode_options.h), and of the
// [profiles] config table.
#include "daemon/server/decode_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/server/config.h"

namespace vaed::server {
namespace {

using ::testing::HasSubstr;

models::ModelInfo Model(std::string kind, bool tiled) {
  models::ModelInfo m;
  m.name = kind == "taef2" ? "taef2" : "h3";
  m.kind = std::move(kind);
  m.caps.tiled = tiled;
  m.caps.stack_tiling = tiled;
  m.caps.compiled_plans = tiled;  // as the H3 video decoder declares
  return m;
}

v1::DecodeOptions Options(std::string profile, v1::StackTiling stack = v1::STACK_TILING_UNSPECIFIED,
                          v1::Compile compile = v1::COMPILE_UNSPECIFIED,
                          std::vector<std::string> faults = {}) {
  v1::DecodeOptions o;
  o.set_profile(std::move(profile));
  o.set_stack_tiling(stack);
  o.set_compile(compile);
  for (std::string& f : faults) o.add_inject_faults(std::move(f));
  return o;
}

using models::CompileMode;

v1::DecodeOptions Tiled(v1::DecodeOptions o, uint32_t tile, uint32_t overlap) {
  o.mutable_tiling()->set_tile_latent(tile);
  o.mutable_tiling()->set_overlap_latent(overlap);
  return o;
}

struct Case {
  std::string what;
  models::ModelInfo model;
  v1::DecodeOptions options;
  // Empty: must resolve; otherwise the error must contain it.
  std::string error;
  models::StackTiling stack = models::StackTiling::kOff;
  std::string profile = "safe";
  std::string compile_decision = {};
  CompileMode compile = CompileMode::kOff;
  bool allow_faults = false;  // the daemon's executor.allow_fault_injection
};

TEST(ResolveDecodeOptionsTest, EveryCapabilityOptionAndValue) {
  const models::ModelInfo h3 = Model("h3_video", true);
  const models::ModelInfo taef2 = Model("taef2", false);
  models::ModelInfo taef2_tunable = taef2;
  taef2_tunable.caps.tunable_tiling = true;
  const std::vector<Case> cases = {
      // Profiles.
      {"default profile", h3, Options(""), "", models::StackTiling::kOff, "safe",
       "off (profile safe)"},
      {"optimized uses the model default and plans", h3, Options("optimized"), "",
       models::StackTiling::kDefault, "optimized",
       "auto: compiled plans by shape bucket (profile optimized)", CompileMode::kAuto},
      {"diagnostic on a model without plans", taef2, Options("diagnostic"), "",
       models::StackTiling::kDefault, "diagnostic",
       "off: no compiled-plan backend for model 'taef2' (kind taef2)"},
      {"unknown profile", h3, Options("turbo"),
       "options.profile 'turbo' is unknown (profiles: safe, optimized, diagnostic, student)"},
      {"student not allowed", h3, Options("student"),
       "options.profile 'student' is not allowed by this daemon (profiles.allowed: safe, "
       "optimized, diagnostic)"},
      // Stacked tiles.
      {"stack on, tiled model", h3, Options("", v1::STACK_TILING_ON), "",
       models::StackTiling::kOn},
      {"stack auto, tiled model", h3, Options("optimized", v1::STACK_TILING_AUTO), "",
       models::StackTiling::kAuto, "optimized", "", CompileMode::kAuto},
      {"stack off, untiled model", taef2, Options("", v1::STACK_TILING_OFF), "",
       models::StackTiling::kOff},
      {"stack on, untiled model", taef2, Options("", v1::STACK_TILING_ON),
       "options.stack_tiling is STACK_TILING_ON; model 'taef2' (kind taef2) does not support "
       "stacked tiles: it does not decode in tiles"},
      {"stack auto, untiled model: the safe path", taef2,
       Options("diagnostic", v1::STACK_TILING_AUTO), "", models::StackTiling::kOff, "diagnostic"},
      {"stack unknown value", h3, Options("", static_cast<v1::StackTiling>(9)),
       "options.stack_tiling 9 is unknown"},
      // Compiled plans.
      {"compile on, model with plans", h3,
       Options("optimized", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_ON), "",
       models::StackTiling::kDefault, "optimized", "on (requested)", CompileMode::kOn},
      {"compile on, model without plans", taef2,
       Options("optimized", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_ON),
       "options.compile is COMPILE_ON; model 'taef2' (kind taef2) has no compiled-plan backend"},
      {"compile on under safe", h3, Options("safe", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_ON),
       "options.compile is COMPILE_ON but profile 'safe' runs eager"},
      {"compile auto, model with plans", h3,
       Options("optimized", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_AUTO), "",
       models::StackTiling::kDefault, "optimized", "auto: compiled plans by shape bucket",
       CompileMode::kAuto},
      {"compile auto, model without plans", taef2,
       Options("optimized", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_AUTO), "",
       models::StackTiling::kDefault, "optimized",
       "auto: eager (no compiled-plan backend for model 'taef2' (kind taef2))"},
      {"compile auto under safe", h3, Options("safe", v1::STACK_TILING_UNSPECIFIED,
                                              v1::COMPILE_AUTO),
       "", models::StackTiling::kOff, "safe", "auto: eager (profile safe)"},
      {"compile off", taef2, Options("", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_OFF), "",
       models::StackTiling::kOff, "safe", "off (requested)"},
      {"compile unknown", h3, Options("", v1::STACK_TILING_UNSPECIFIED, static_cast<v1::Compile>(7)),
       "options.compile 7 is unknown"},
      // Output-changing knob: tiling (diagnostic, tunable_tiling models).
      {"tiling under optimized", taef2_tunable, Tiled(Options("optimized"), 40, 16),
       "options.tiling changes the output; only profile 'diagnostic' allows it"},
      {"tiling on fixed-tiling H3", h3, Tiled(Options("diagnostic"), 40, 16),
       "options.tiling is set; model 'h3' (kind h3_video) tiles as its model semantics"},
      {"tiling on a model without tiles", taef2, Tiled(Options("diagnostic"), 40, 16),
       "options.tiling is set; model 'taef2' (kind taef2) has no tiled decode"},
      {"tiling overlap too large", taef2_tunable, Tiled(Options("diagnostic"), 40, 40),
       "options.tiling.overlap_latent is 40; must be below tile_latent (40)"},
      {"tiling tile too small", taef2_tunable, Tiled(Options("diagnostic"), 4, 0),
       "options.tiling.tile_latent is 4; must be in [8, 4096] latent cells"},
      {"tiling in diagnostic", taef2_tunable, Tiled(Options("diagnostic"), 40, 16), "",
       models::StackTiling::kDefault, "diagnostic"},
      // Fault injection (tests only).
      {"faults refused by default", h3,
       Options("", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_UNSPECIFIED, {"oom_stacked"}),
       "options.inject_faults is set but this daemon does not allow fault injection "
       "(executor.allow_fault_injection = false)"},
      {"faults allowed", h3,
       Options("", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_UNSPECIFIED,
               {"oom_stacked", "oom_sequential", "plan_build", "tile_exception"}),
       "", models::StackTiling::kOff, "safe", "", CompileMode::kOff, true},
      {"unknown fault", h3,
       Options("", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_UNSPECIFIED, {"segfault"}),
       "options.inject_faults lists 'segfault'; known faults are oom_stacked", {}, "safe", "",
       CompileMode::kOff, true},
  };
  for (const Case& c : cases) {
    Result<ResolvedOptions> r =
        ResolveDecodeOptions(c.model, c.options, ProfileOptions{}, c.allow_faults);
    if (!c.error.empty()) {
      ASSERT_FALSE(r.ok()) << c.what;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.what;
      EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.what;
      continue;
    }
    ASSERT_TRUE(r.ok()) << c.what << ": " << r.status().ToString();
    EXPECT_EQ(r->stack_tiling, c.stack) << c.what;
    EXPECT_EQ(ProfileName(r->profile), c.profile) << c.what;
    EXPECT_EQ(r->compile, c.compile) << c.what;
    if (!c.compile_decision.empty()) {
      EXPECT_EQ(r->compile_decision, c.compile_decision) << c.what;
    }
    EXPECT_EQ(r->faults.any(), c.options.inject_faults_size() > 0) << c.what;
    EXPECT_EQ(r->tiling.has_value(), c.options.has_tiling()) << c.what;
    EXPECT_EQ(r->output_changing.size(), c.options.has_tiling() ? 1u : 0u) << c.what;
    EXPECT_EQ(r->stack_decision.empty(),
              c.model.caps.stack_tiling || c.options.stack_tiling() != v1::STACK_TILING_AUTO)
        << c.what;
  }
}

TEST(ResolveDecodeOptionsTest, StudentNeedsAnArtifactAndFaultsAreCounted) {
  models::ModelInfo m = Model("h3_video", true);
  ProfileOptions policy;
  auto faults = ResolveDecodeOptions(
      m, Options("", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_UNSPECIFIED,
                 {"oom_stacked", "oom_stacked", "plan_build"}),
      policy, true);
  ASSERT_TRUE(faults.ok()) << faults.status().ToString();
  EXPECT_EQ(faults->faults.oom_stacked, 2);
  EXPECT_EQ(faults->faults.plan_build, 1);
  EXPECT_EQ(faults->faults.oom_sequential + faults->faults.tile_exception, 0);
  auto untiled_auto = ResolveDecodeOptions(Model("taef2", false),
                                           Options("optimized", v1::STACK_TILING_AUTO), policy);
  ASSERT_TRUE(untiled_auto.ok());
  EXPECT_EQ(untiled_auto->stack_decision,
            "auto: off (model 'taef2' (kind taef2) does not decode in tiles)");

  policy.allowed.push_back(Profile::kStudent);
  auto student = ResolveDecodeOptions(m, Options("student"), policy);
  EXPECT_THAT(student.status().message(),
              HasSubstr("options.profile 'student' needs a student decoder artifact for model "
                        "'h3' (kind h3_video); none is configured"));
  m.caps.student = true;
  EXPECT_TRUE(ResolveDecodeOptions(m, Options("student"), policy).ok());
}

TEST(ProfileOptionsTest, ValidateNamesTheKey) {
  ProfileOptions p;
  EXPECT_TRUE(ValidateProfileOptions(p).ok());
  p.default_profile = Profile::kDiagnostic;
  p.allowed = {Profile::kSafe};
  EXPECT_EQ(ValidateProfileOptions(p).message(),
            "profiles.default 'diagnostic' is not in profiles.allowed (safe)");
  p.allowed = {};
  EXPECT_THAT(ValidateProfileOptions(p).message(), HasSubstr("profiles.allowed is empty"));
  // A name outside the set is the reader's to refuse (Profile is an enum).
  EXPECT_THAT(ParseConfigToml("[profiles]\nallowed = [\"safe\", \"fast\"]\n", "t.toml",
                              DaemonOptions{})
                  .status()
                  .message(),
              HasSubstr("profiles.allowed lists 'fast'; values must be \"safe\", \"optimized\""));
  p.default_profile = Profile::kSafe;
  p.allowed = {Profile::kSafe, Profile::kSafe};
  EXPECT_THAT(ValidateProfileOptions(p).message(), HasSubstr("lists 'safe' twice"));
}

TEST(ProfileOptionsTest, ConfigTableParsesAndRoundTrips) {
  auto o = ParseConfigToml("[profiles]\ndefault = \"optimized\"\nallowed = [\"optimized\", "
                           "\"safe\"]\n",
                           "t.toml", DaemonOptions{});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->profiles.default_profile, Profile::kOptimized);
  EXPECT_EQ(o->profiles.allowed, (std::vector<Profile>{Profile::kOptimized, Profile::kSafe}));
  EXPECT_THAT(ToToml(*o), HasSubstr("allowed = [ 'optimized', 'safe' ]"));
  auto bad = ParseConfigToml("[profiles]\nallowed = \"safe\"\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("t.toml: profiles.allowed must be an array"));
  auto unknown = ParseConfigToml("[profiles]\nfast = true\n", "t.toml", DaemonOptions{});
  EXPECT_FALSE(unknown.ok());
}

}  // namespace
}  // namespace vaed::server
