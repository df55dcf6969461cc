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
  return m;
}

v1::DecodeOptions Options(std::string profile, v1::StackTiling stack = v1::STACK_TILING_UNSPECIFIED,
                          v1::Compile compile = v1::COMPILE_UNSPECIFIED) {
  v1::DecodeOptions o;
  o.set_profile(std::move(profile));
  o.set_stack_tiling(stack);
  o.set_compile(compile);
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
};

TEST(ResolveDecodeOptionsTest, EveryCapabilityOptionAndValue) {
  const models::ModelInfo h3 = Model("h3_video", true);
  const models::ModelInfo taef2 = Model("taef2", false);
  const std::vector<Case> cases = {
      // Profiles.
      {"default profile", h3, Options(""), "", models::StackTiling::kOff, "safe",
       "off (profile safe)"},
      {"optimized uses the model default", h3, Options("optimized"), "",
       models::StackTiling::kDefault, "optimized", "off (profile optimized)"},
      {"diagnostic", taef2, Options("diagnostic"), "", models::StackTiling::kDefault,
       "diagnostic"},
      {"unknown profile", h3, Options("turbo"),
       "options.profile 'turbo' is unknown (profiles: safe, optimized, diagnostic, student)"},
      {"student not allowed", h3, Options("student"),
       "options.profile 'student' is not allowed by this daemon (profiles.allowed: safe, "
       "optimized, diagnostic)"},
      // Stacked tiles.
      {"stack on, tiled model", h3, Options("", v1::STACK_TILING_ON), "",
       models::StackTiling::kOn},
      {"stack auto, tiled model", h3, Options("optimized", v1::STACK_TILING_AUTO), "",
       models::StackTiling::kAuto, "optimized"},
      {"stack off, untiled model", taef2, Options("", v1::STACK_TILING_OFF), "",
       models::StackTiling::kOff},
      {"stack on, untiled model", taef2, Options("", v1::STACK_TILING_ON),
       "options.stack_tiling is STACK_TILING_ON; model 'taef2' (kind taef2) does not support "
       "stacked tiles: it does not decode in tiles"},
      {"stack auto, untiled model", taef2, Options("diagnostic", v1::STACK_TILING_AUTO),
       "options.stack_tiling is STACK_TILING_AUTO; model 'taef2'"},
      {"stack unknown value", h3, Options("", static_cast<v1::StackTiling>(9)),
       "options.stack_tiling 9 is unknown"},
      // Compiled plans (no backend in this build).
      {"compile on", h3, Options("optimized", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_ON),
       "options.compile is COMPILE_ON; model 'h3' (kind h3_video) has no compiled-plan backend"},
      {"compile auto", h3, Options("optimized", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_AUTO),
       "", models::StackTiling::kDefault, "optimized",
       "auto: eager (no compiled-plan backend for model 'h3' (kind h3_video))"},
      {"compile off", taef2, Options("", v1::STACK_TILING_UNSPECIFIED, v1::COMPILE_OFF), "",
       models::StackTiling::kOff, "safe", "off (requested)"},
      {"compile unknown", h3, Options("", v1::STACK_TILING_UNSPECIFIED, static_cast<v1::Compile>(7)),
       "options.compile 7 is unknown"},
  };
  for (const Case& c : cases) {
    Result<ResolvedOptions> r = ResolveDecodeOptions(c.model, c.options, ProfileOptions{});
    if (!c.error.empty()) {
      ASSERT_FALSE(r.ok()) << c.what;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.what;
      EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.what;
      continue;
    }
    ASSERT_TRUE(r.ok()) << c.what << ": " << r.status().ToString();
    EXPECT_EQ(r->stack_tiling, c.stack) << c.what;
    EXPECT_EQ(r->profile, c.profile) << c.what;
    EXPECT_FALSE(r->compile) << c.what;
    if (!c.compile_decision.empty()) {
      EXPECT_EQ(r->compile_decision, c.compile_decision) << c.what;
    }
  }
}

TEST(ResolveDecodeOptionsTest, CompiledPlansAndStudentFollowCapabilities) {
  models::ModelInfo m = Model("h3_video", true);
  m.caps.compiled_plans = true;
  ProfileOptions policy;
  auto on = ResolveDecodeOptions(m, Options("optimized", v1::STACK_TILING_UNSPECIFIED,
                                            v1::COMPILE_ON), policy);
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->compile);
  auto safe_on = ResolveDecodeOptions(m, Options("safe", v1::STACK_TILING_UNSPECIFIED,
                                                 v1::COMPILE_ON), policy);
  EXPECT_THAT(safe_on.status().message(), HasSubstr("profile 'safe' runs eager"));
  auto safe_auto = ResolveDecodeOptions(m, Options("safe", v1::STACK_TILING_UNSPECIFIED,
                                                   v1::COMPILE_AUTO), policy);
  ASSERT_TRUE(safe_auto.ok());
  EXPECT_FALSE(safe_auto->compile);
  EXPECT_EQ(safe_auto->compile_decision, "auto: eager (profile safe)");

  policy.allowed.push_back("student");
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
  p.default_profile = "diagnostic";
  p.allowed = {"safe"};
  EXPECT_EQ(ValidateProfileOptions(p).message(),
            "profiles.default 'diagnostic' is not in profiles.allowed (safe)");
  p.allowed = {};
  EXPECT_THAT(ValidateProfileOptions(p).message(), HasSubstr("profiles.allowed is empty"));
  p.allowed = {"safe", "fast"};
  p.default_profile = "safe";
  EXPECT_THAT(ValidateProfileOptions(p).message(),
              HasSubstr("profiles.allowed lists 'fast'; profiles are safe, optimized"));
  p.allowed = {"safe", "safe"};
  EXPECT_THAT(ValidateProfileOptions(p).message(), HasSubstr("lists 'safe' twice"));
}

TEST(ProfileOptionsTest, ConfigTableParsesAndRoundTrips) {
  auto o = ParseConfigToml("[profiles]\ndefault = \"optimized\"\nallowed = [\"optimized\", "
                           "\"safe\"]\n",
                           "t.toml", DaemonOptions{});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->profiles.default_profile, "optimized");
  EXPECT_EQ(o->profiles.allowed, (std::vector<std::string>{"optimized", "safe"}));
  EXPECT_THAT(ToToml(*o), HasSubstr("allowed = [ 'optimized', 'safe' ]"));
  auto bad = ParseConfigToml("[profiles]\nallowed = \"safe\"\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("t.toml: profiles.allowed must be an array"));
  auto unknown = ParseConfigToml("[profiles]\nfast = true\n", "t.toml", DaemonOptions{});
  EXPECT_FALSE(unknown.ok());
}

}  // namespace
}  // namespace vaed::server
