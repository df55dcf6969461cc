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
using ::testing::Not;

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
    EXPECT_EQ(r->profile, c.profile) << c.what;
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

TEST(RuntimeConfigTest, ExecutorAndModelKeysParseAndRoundTrip) {
  auto o = ParseConfigToml(
      "[executor]\nmemory_budget_mib = 2048\nallow_fault_injection = true\n"
      "[[models.entry]]\nname = \"h3\"\nkind = \"h3_video\"\nplan_cache_capacity = 3\n"
      "plan_after_sightings = 1\nwarm_shapes = [\"16x16\", \"32x48\"]\n",
      "t.toml", DaemonOptions{});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->executor.memory_budget_mib, 2048u);
  EXPECT_TRUE(o->executor.allow_fault_injection);
  ASSERT_EQ(o->models.entries.size(), 1u);
  EXPECT_EQ(o->models.entries[0].plan_cache_capacity, 3);
  EXPECT_EQ(o->models.entries[0].plan_after_sightings, 1);
  EXPECT_EQ(o->models.entries[0].warm_shapes, (std::vector<std::string>{"16x16", "32x48"}));
  const std::string toml = ToToml(*o);
  EXPECT_THAT(toml, HasSubstr("memory_budget_mib = 2048"));
  EXPECT_THAT(toml, HasSubstr("allow_fault_injection = true"));
  EXPECT_THAT(toml, HasSubstr("warm_shapes = [ '16x16', '32x48' ]"));

  auto bad = ParseConfigToml("[executor]\nallow_fault_injection = 1\n", "t.toml",
                             DaemonOptions{});
  EXPECT_THAT(bad.status().message(),
              HasSubstr("t.toml: executor.allow_fault_injection must be true or false"));
  bad = ParseConfigToml("[executor]\nmemory_budget_mib = -1\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("executor.memory_budget_mib is -1"));
  bad = ParseConfigToml("[[models.entry]]\nname = \"h3\"\nkind = \"h3_video\"\n"
                        "warm_shapes = \"16x16\"\n",
                        "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(),
              HasSubstr("models.entry[0].warm_shapes must be an array of strings"));
}

// argv for ParseCommandLine (it takes char**).
struct Argv {
  explicit Argv(std::vector<std::string> args) : strings(std::move(args)) {
    for (std::string& a : strings) pointers.push_back(a.data());
  }
  std::vector<std::string> strings;
  std::vector<char*> pointers;
};

// [group]: ranks without qualified_sizes qualifies 1, 2, 4, ... (as
// --group-ranks); groups spanning daemons need a store; the backend is
// checked against the build.
TEST(GroupConfigTest, RanksQualifyPowersOfTwoAndSpanningNeedsAStore) {
  auto o = ParseConfigToml("[group]\nranks = 4\nsize = 2\n", "t.toml", DaemonOptions{});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->group.qualified_sizes, (std::vector<uint32_t>{1, 2, 4}));
  auto two_nodes = ParseConfigToml(
      "[group]\nranks = 2\nworld_nodes = 2\nnode_rank = 1\nstore_address = \"127.0.0.1:29500\"\n",
      "t.toml", DaemonOptions{});
  ASSERT_TRUE(two_nodes.ok()) << two_nodes.status().ToString();
  EXPECT_EQ(two_nodes->group.qualified_sizes, (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_THAT(ValidateOptions(*two_nodes).message(), Not(HasSubstr("group."))) << "valid [group]";
  auto listed = ParseConfigToml("[group]\nranks = 4\nqualified_sizes = [1, 4]\n", "t.toml",
                                DaemonOptions{});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->group.qualified_sizes, (std::vector<uint32_t>{1, 4}));
  auto no_store = ParseConfigToml("[group]\nworld_nodes = 2\n", "t.toml", DaemonOptions{});
  ASSERT_TRUE(no_store.ok());
  EXPECT_THAT(ValidateOptions(*no_store).message(), HasSubstr("need group.store_address"));
  auto backend = ParseConfigToml("[group]\nbackend = \"mpi\"\n", "t.toml", DaemonOptions{});
  ASSERT_TRUE(backend.ok());
  EXPECT_THAT(ValidateOptions(*backend).message(), HasSubstr("group.backend is 'mpi'"));
}

TEST(RuntimeConfigTest, StackTilingAndBudgetFlags) {
  Argv argv({"vaed", "--model", "h3=h3_video", "--model", "t=demo", "--default-model", "h3",
             "--vae-stack-tiling", "true", "--memory-budget-mib", "512"});
  CommandLine cli = ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.executor.memory_budget_mib, 512u);
  for (const auto& m : cli.options.models.entries) {
    // Tiled models get it; the demo model (untiled) keeps "off".
    EXPECT_EQ(m.stack_tiling, m.kind == "h3_video" ? "on" : "off") << m.name;
  }
  Argv auto_argv({"vaed", "--model", "h3=h3_video", "--vae-stack-tiling", "auto"});
  cli = ParseCommandLine(static_cast<int>(auto_argv.pointers.size()), auto_argv.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  for (const auto& m : cli.options.models.entries) {
    if (m.kind == "h3_video") {
      EXPECT_EQ(m.stack_tiling, "auto");
    }
  }
  Argv bad({"vaed", "--vae-stack-tiling", "sometimes"});
  cli = ParseCommandLine(static_cast<int>(bad.pointers.size()), bad.pointers.data());
  EXPECT_TRUE(cli.exit_now);
  EXPECT_NE(cli.exit_code, 0);
}

// [metrics] and log.format: defaults, TOML keys, validation naming the key,
// the flags, and --print-config's TOML.
TEST(ObservabilityConfigTest, MetricsAndLogFormatKeysParseValidateAndRoundTrip) {
  auto defaults = ParseConfigToml(kDefaultConfigToml, "embedded defaults", DaemonOptions{});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(defaults->metrics.enabled);
  EXPECT_EQ(defaults->metrics.address, "127.0.0.1");
  EXPECT_EQ(defaults->metrics.port, 9464u);
  EXPECT_EQ(defaults->log.format, "text");

  auto o = ParseConfigToml("[metrics]\nenabled = false\naddress = \"0.0.0.0\"\nport = 0\n"
                           "[log]\nformat = \"json\"\n",
                           "t.toml", DaemonOptions{});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->metrics.enabled);
  EXPECT_EQ(o->metrics.address, "0.0.0.0");
  EXPECT_EQ(o->metrics.port, 0u);
  EXPECT_EQ(o->log.format, "json");
  const std::string toml = ToToml(*o);
  EXPECT_THAT(toml, HasSubstr("[metrics]\naddress = '0.0.0.0'\nenabled = false\nport = 0"));
  EXPECT_THAT(toml, HasSubstr("format = 'json'"));
  // What --print-config prints parses back to the same options.
  auto back = ParseConfigToml(toml, "printed", DaemonOptions{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->metrics.address, "0.0.0.0");
  EXPECT_FALSE(back->metrics.enabled);
  EXPECT_EQ(back->log.format, "json");

  auto bad = ParseConfigToml("[metrics]\nport = 65536\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("t.toml: metrics.port is 65536; must be 0..65535"));
  bad = ParseConfigToml("[metrics]\nport = -1\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("metrics.port is -1"));
  bad = ParseConfigToml("[metrics]\nenabled = \"yes\"\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("metrics.enabled must be true or false"));
  bad = ParseConfigToml("[metrics]\npath = \"/m\"\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("metrics.path is not a known key"));

  DaemonOptions v = *defaults;
  EXPECT_TRUE(ValidateOptions(v).ok()) << ValidateOptions(v).ToString();
  v.metrics.address = "";
  EXPECT_THAT(ValidateOptions(v).message(), HasSubstr("metrics.address must not be empty"));
  v = *defaults;
  v.log.format = "xml";
  EXPECT_THAT(ValidateOptions(v).message(), HasSubstr("log.format is 'xml'"));
}

TEST(ObservabilityConfigTest, MetricsAndLogFormatFlags) {
  Argv argv({"vaed", "--metrics-address", "[::1]:0", "--log-format", "json"});
  CommandLine cli = ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_TRUE(cli.options.metrics.enabled);
  EXPECT_EQ(cli.options.metrics.address, "::1");
  EXPECT_EQ(cli.options.metrics.port, 0u);
  EXPECT_EQ(cli.options.log.format, "json");

  Argv host({"vaed", "--metrics-address", "localhost:19464"});
  cli = ParseCommandLine(static_cast<int>(host.pointers.size()), host.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.metrics.address, "localhost");
  EXPECT_EQ(cli.options.metrics.port, 19464u);

  Argv off({"vaed", "--no-metrics"});
  cli = ParseCommandLine(static_cast<int>(off.pointers.size()), off.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_FALSE(cli.options.metrics.enabled);
  EXPECT_EQ(cli.options.log.format, "text");

  for (const char* spec : {"9464", "127.0.0.1", ":9464", "127.0.0.1:", "127.0.0.1:65536",
                           "::1:9464", "[::1:9464", "h:12x"}) {
    Argv bad({"vaed", "--metrics-address", spec});
    cli = ParseCommandLine(static_cast<int>(bad.pointers.size()), bad.pointers.data());
    EXPECT_TRUE(cli.exit_now) << spec;
    EXPECT_NE(cli.exit_code, 0) << spec;
  }
  Argv both({"vaed", "--no-metrics", "--metrics-address", "127.0.0.1:1"});
  cli = ParseCommandLine(static_cast<int>(both.pointers.size()), both.pointers.data());
  EXPECT_TRUE(cli.exit_now);
  EXPECT_NE(cli.exit_code, 0);
  Argv format({"vaed", "--log-format", "xml"});
  cli = ParseCommandLine(static_cast<int>(format.pointers.size()), format.pointers.data());
  EXPECT_TRUE(cli.exit_now);
  EXPECT_NE(cli.exit_code, 0);
}

}  // namespace
}  // namespace vaed::server
