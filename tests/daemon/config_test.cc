// The daemon config (daemon/server/config.h): its key tables
// (config_keys.h) for reading, validating and printing each key; the
// documented example systemd/vaed.toml against the tables; whole-config
// checks; and the command line (command_line.h).
#include "daemon/server/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/engine/cuda_devices.h"
#include "daemon/server/command_line.h"
#include "daemon/server/config_keys.h"
#include "tests/common/test_paths.h"

namespace vaed::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kExampleConfig = std::string(VAED_SOURCE_DIR) + "/systemd/vaed.toml";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool IsEntryKey(const ConfigKeyInfo& k) { return k.key.rfind("models.entry", 0) == 0; }

// "server.socket" -> section "server", name "socket".
std::pair<std::string, std::string> Split(const std::string& key) {
  const size_t dot = key.find('.');
  return {key.substr(0, dot), key.substr(dot + 1)};
}

// systemd/vaed.toml sets every key of the tables to its default, so that an
// operator reads each key where it is explained; models.default also states
// its default in prose. The [[models.entry]] keys are explained in its
// comment list.
TEST(ConfigTableTest, ExampleConfigSetsEveryKeyToItsDefault) {
  const std::string text = ReadText(kExampleConfig);
  ASSERT_FALSE(text.empty()) << kExampleConfig;
  const toml::table file = toml::parse(text, std::string_view(kExampleConfig));
  auto example = LoadConfigFile(kExampleConfig, DaemonOptions{});
  ASSERT_TRUE(example.ok()) << example.status().ToString();
  const std::vector<ConfigKeyInfo> defaults = ListConfigKeys(DaemonOptions{});
  const std::vector<ConfigKeyInfo> set = ListConfigKeys(*example);
  ASSERT_EQ(defaults.size(), set.size());
  for (size_t i = 0; i < defaults.size(); ++i) {
    const ConfigKeyInfo& key = defaults[i];
    if (key.key.rfind("models.entry[].", 0) == 0) {
      const std::string name = key.key.substr(std::string("models.entry[].").size());
      EXPECT_TRUE(std::regex_search(text, std::regex("\\n#   " + name + " ")))
          << key.key << " is not explained in the [[models.entry]] comment of " << kExampleConfig;
      continue;
    }
    if (key.key == "models.entry") continue;
    if (key.key == "models.default") {
      // Left unset, so that the first real entry uncommented becomes the
      // default (command_line.cc); the prose states the rule.
      EXPECT_FALSE(file.at_path(key.key)) << kExampleConfig;
      EXPECT_THAT(text, HasSubstr("Default: the first entry below that is not a demo model, "
                                  "else \"" + DaemonOptions{}.models.default_model + "\""));
      continue;
    }
    EXPECT_TRUE(file.at_path(key.key)) << key.key << " is not set in " << kExampleConfig;
    EXPECT_EQ(set[i].value, key.value) << key.key << " in " << kExampleConfig;
  }
}

// What ToToml prints holds every key and reads back to the same values.
TEST(ConfigTableTest, PrintedOptionsHoldEveryKeyAndReadBack) {
  auto defaults = ParseConfigToml(kDefaultConfigToml, "embedded defaults", DaemonOptions{});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  defaults->group.qualified_sizes = {1, 2};
  defaults->server.allowed_groups = {"video"};
  const std::string printed = ToToml(*defaults);
  const toml::table root = toml::parse(printed);
  for (const ConfigKeyInfo& key : ListConfigKeys(*defaults)) {
    if (IsEntryKey(key) && key.key != "models.entry") continue;
    EXPECT_TRUE(root.at_path(key.key)) << key.key << " is not printed:\n" << printed;
    EXPECT_FALSE(key.doc.empty()) << key.key;
  }
  auto back = ParseConfigToml(printed, "printed", DaemonOptions{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToToml(*back), printed);
  const std::vector<ConfigKeyInfo> a = ListConfigKeys(*defaults);
  const std::vector<ConfigKeyInfo> b = ListConfigKeys(*back);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].value, b[i].value) << a[i].key;
}

// A value of the wrong type, and an integer out of range, are refused with
// the source, the key and the rule, for every key of every table.
TEST(ConfigTableTest, EveryKeyRefusesWrongTypesAndOutOfRangeValues) {
  for (const ConfigKeyInfo& key : ListConfigKeys(DaemonOptions{})) {
    if (IsEntryKey(key)) continue;  // the [[models.entry]] keys: below
    const auto [section, name] = Split(key.key);
    auto parse = [&, section = section, name = name](const std::string& value) {
      return ParseConfigToml("[" + section + "]\n" + name + " = " + value + "\n", "t.toml",
                             DaemonOptions{})
          .status()
          .message();
    };
    const std::string prefix = "t.toml: " + key.key + " ";
    if (key.type == "string") {
      EXPECT_EQ(parse("1"), prefix + "must be a string");
    } else if (key.type == "boolean") {
      EXPECT_EQ(parse("\"yes\""), prefix + "must be true or false");
    } else if (key.type == "array of strings") {
      EXPECT_EQ(parse("[1]"), prefix + "must be an array of strings");
    } else if (key.type == "integer") {
      EXPECT_EQ(parse("\"1\""), prefix + "must be an integer");
      const std::string range = std::to_string(key.min) + ".." + std::to_string(key.max);
      EXPECT_EQ(parse(std::to_string(key.min - 1)),
                prefix + "is " + std::to_string(key.min - 1) + "; must be " + range);
      if (key.max < std::numeric_limits<int64_t>::max()) {
        EXPECT_EQ(parse(std::to_string(key.max + 1)),
                  prefix + "is " + std::to_string(key.max + 1) + "; must be " + range);
      }
    } else if (key.type == "array of integers") {
      EXPECT_EQ(parse("[\"1\"]"), prefix + "must be an array of integers");
      EXPECT_EQ(parse("[" + std::to_string(key.min - 1) + "]"),
                prefix + "holds " + std::to_string(key.min - 1) + "; values must be " +
                    std::to_string(key.min) + ".." + std::to_string(key.max));
    } else {
      ADD_FAILURE() << key.key << " has type " << key.type;
    }
    EXPECT_THAT(parse("1\nno_such_key = 1"), HasSubstr("no_such_key is not a known key"))
        << key.key;
  }
  auto entry = [](const std::string& line) {
    return ParseConfigToml("[[models.entry]]\nname = \"m\"\nkind = \"demo\"\n" + line + "\n",
                           "t.toml", DaemonOptions{})
        .status()
        .message();
  };
  EXPECT_EQ(entry("frame_batch = 0"), "t.toml: models.entry[0].frame_batch is 0; must be 1..256");
  EXPECT_EQ(entry("seed = \"1\""), "t.toml: models.entry[0].seed must be an integer");
  EXPECT_EQ(entry("weights = 1"), "t.toml: models.entry[0].weights must be a string");
  EXPECT_EQ(entry("weights_sha256 = 1"),
            "t.toml: models.entry[0].weights_sha256 must be a string");
  EXPECT_THAT(entry("path = 1"),
              HasSubstr("t.toml: models.entry[0].path is not a known key "
                        "(known here: audio_config, audio_weights, audio_weights_sha256, "
                        "compute_dtype, config, "));
  EXPECT_EQ(ParseConfigToml("[[models.entry]]\nkind = \"demo\"\n", "t.toml", DaemonOptions{})
                .status()
                .message(),
            "t.toml: models.entry[0].name is required and must not be empty");
  // Kind, stack_tiling and compute_dtype are enums: the reader refuses any
  // other name, listing the allowed ones.
  auto h3_entry = [](const std::string& line) {
    return ParseConfigToml("[[models.entry]]\nname = \"m\"\nkind = \"h3_video\"\n" + line + "\n",
                           "t.toml", DaemonOptions{})
        .status()
        .message();
  };
  EXPECT_EQ(h3_entry("stack_tiling = \"sometimes\""),
            "t.toml: models.entry[0].stack_tiling is 'sometimes'; must be \"off\", \"on\" or "
            "\"auto\"");
  EXPECT_EQ(h3_entry("compute_dtype = \"half\""),
            "t.toml: models.entry[0].compute_dtype is 'half'; must be \"float32\", \"float16\" "
            "or \"bfloat16\"");
  EXPECT_EQ(ParseConfigToml("[[models.entry]]\nname = \"y\"\nkind = \"x\"\n", "t.toml",
                            DaemonOptions{})
                .status()
                .message(),
            "t.toml: models.entry[0].kind is 'x'; must be \"taef2\", \"demo\", \"h3_video\", "
            "\"h3_audio\" or \"h3\"");
  EXPECT_THAT(ParseConfigToml("[servers]\n", "t.toml", DaemonOptions{}).status().message(),
              HasSubstr("t.toml: servers is not a known key (known here: executor, group, log, "
                        "metrics, models, profiles, quarantine, server)"));
  EXPECT_EQ(ParseConfigToml("server = 1\n", "t.toml", DaemonOptions{}).status().message(),
            "t.toml: server must be a table");
}

// ValidateOptions applies each key's rule to options set in code or by
// flags, worded as the reader words it (without a source).
TEST(ConfigTableTest, ValidateOptionsChecksEveryKeyRule) {
  auto defaults = ParseConfigToml(kDefaultConfigToml, "embedded defaults", DaemonOptions{});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  ASSERT_TRUE(ValidateOptions(*defaults).ok()) << ValidateOptions(*defaults).ToString();
  DaemonOptions v = *defaults;
  v.metrics.port = 70000;
  EXPECT_EQ(ValidateOptions(v).message(), "metrics.port is 70000; must be 0..65535");
  // Keys with a closed set of values are enums: code cannot set another
  // value, and the reader refuses one naming the key and the names.
  EXPECT_EQ(ParseConfigToml("[group]\nfew_tiles = \"grow\"\n", "t.toml", *defaults)
                .status()
                .message(),
            "t.toml: group.few_tiles is 'grow'; must be \"pad\" or \"shrink\"");
  EXPECT_THAT(
      ParseConfigToml("[log]\nlevel = \"loud\"\n", "t.toml", *defaults).status().message(),
      HasSubstr("log.level is 'loud'; must be \"trace\", \"debug\", \"info\""));
  v = *defaults;
  v.group.qualified_sizes = {1, 65};
  EXPECT_EQ(ValidateOptions(v).message(), "group.qualified_sizes holds 65; values must be 1..64");
  v = *defaults;
  v.models.entries[0].frame_batch = 0;
  EXPECT_EQ(ValidateOptions(v).message(), "models.entry[0].frame_batch is 0; must be 1..256");
  v = *defaults;
  v.server.max_region_bytes_per_client = std::numeric_limits<uint64_t>::max();
  EXPECT_THAT(ValidateOptions(v).message(),
              HasSubstr("server.max_region_bytes_per_client is 18446744073709551615"));
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

  auto bad = ParseConfigToml("[executor]\nallow_fault_injection = 1\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(),
              HasSubstr("t.toml: executor.allow_fault_injection must be true or false"));
  bad = ParseConfigToml("[executor]\nmemory_budget_mib = -1\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(bad.status().message(), HasSubstr("executor.memory_budget_mib is -1"));
  bad = ParseConfigToml(
      "[[models.entry]]\nname = \"h3\"\nkind = \"h3_video\"\n"
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
  auto listed =
      ParseConfigToml("[group]\nranks = 4\nqualified_sizes = [1, 4]\n", "t.toml", DaemonOptions{});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->group.qualified_sizes, (std::vector<uint32_t>{1, 4}));
  auto no_store = ParseConfigToml("[group]\nworld_nodes = 2\n", "t.toml", DaemonOptions{});
  ASSERT_TRUE(no_store.ok());
  EXPECT_THAT(ValidateOptions(*no_store).message(), HasSubstr("need group.store_address"));
  auto backend = ParseConfigToml("[group]\nbackend = \"mpi\"\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(backend.status().message(), HasSubstr("group.backend is 'mpi'"));
}

// executor.device/devices: checked without a device at configuration time
// (the rest at start-up: rank_devices.h).
TEST(RuntimeConfigTest, DeviceKeysAreCheckedBeforeAnythingLoads) {
  auto cuda = ParseConfigToml("[executor]\ndevice = \"cuda\"\n", "t.toml", DaemonOptions{});
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  if (!engine::CudaDevicesAvailable()) {
    const Status s = ValidateOptions(*cuda);
    EXPECT_THAT(s.message(), HasSubstr("executor.device is \"cuda\" but this vaed was built "
                                       "without CUDA"));
    EXPECT_EQ(s.field(), "executor.device");
  }
  auto listed_for_cpu = ParseConfigToml(
      "[executor]\ndevices = [\"GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf\"]\n", "t.toml",
      DaemonOptions{});
  ASSERT_TRUE(listed_for_cpu.ok());
  EXPECT_EQ(ValidateOptions(*listed_for_cpu).field(), "executor.devices");
  auto other = ParseConfigToml("[executor]\ndevice = \"tpu\"\n", "t.toml", DaemonOptions{});
  EXPECT_THAT(other.status().message(), HasSubstr("executor.device is 'tpu'"));
}

// Regression: `vaed --model h3=...` kept the
// embedded demo model as the default, so a request naming no model went to
// the demo model and failed on its latent. The first --model of another
// kind is now the default unless --default-model says otherwise.
TEST(RuntimeConfigTest, RegressionModelFlagsMakeTheFirstRealModelTheDefault) {
  auto parse = [](std::vector<std::string> args) {
    Argv argv(std::move(args));
    return ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
  };
  CommandLine cli = parse({"vaed", "--model", "d2=demo", "--model", "h3=h3_video",
                           "--model", "a=h3_audio"});
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.models.default_model, "h3");
  cli = parse({"vaed", "--model", "h3=h3_video", "--default-model", "demo"});
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.models.default_model, "demo");  // asked for explicitly
  cli = parse({"vaed", "--model", "d2=demo"});
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.models.default_model, "demo");  // only demos: unchanged
  cli = parse({"vaed"});
  EXPECT_EQ(cli.options.models.default_model, "demo");
}

// Regression: --group-ranks recomputed the qualified sizes only when the
// list was still {1}, so with a config file setting group.ranks (whose
// reader had already derived sizes from it) the flag kept the file's sizes
// ([group] ranks = 2 + --group-ranks 4 gave [1, 2]; ranks = 4 +
// --group-ranks 2 failed on size 4), and it overwrote an explicit
// qualified_sizes = [1]. The flag now derives them unless the file lists
// group.qualified_sizes.
TEST(CommandLineTest, RegressionGroupRanksFlagDerivesSizesUnlessTheFileListsThem) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "vaed-group-ranks";
  std::filesystem::create_directories(dir);
  auto sizes = [&](const std::string& toml, const std::string& ranks) {
    std::ofstream(dir / "vaed.toml") << toml;
    Argv argv({"vaed", "--config", (dir / "vaed.toml").string(), "--group-ranks", ranks});
    ::testing::internal::CaptureStderr();
    CommandLine cli =
        ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(cli.exit_now) << toml << " --group-ranks " << ranks << ": " << err;
    return cli.options.group.qualified_sizes;
  };
  EXPECT_EQ(sizes("[group]\nranks = 2\n", "4"), (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_EQ(sizes("[group]\nranks = 4\n", "2"), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(sizes("[group]\nqualified_sizes = [1]\n", "4"), (std::vector<uint32_t>{1}));
  EXPECT_EQ(sizes("[group]\nranks = 2\nqualified_sizes = [1, 2]\n", "4"),
            (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(sizes("[group]\nranks = 2\nworld_nodes = 2\nstore_address = \"127.0.0.1:1\"\n",
                  "4"),
            (std::vector<uint32_t>{1, 2, 4, 8}));
  EXPECT_EQ(sizes("[executor]\nintra_op_threads = 1\n", "4"), (std::vector<uint32_t>{1, 2, 4}));
  std::filesystem::remove_all(dir);
}

// Regression: usage errors exited with CLI11's own codes
// (105 for `--config /nonexistent`, 109 for an unknown flag), which the
// docs did not list; an invalid config exits 2, and so does every usage
// error now. --help still exits 0.
TEST(CommandLineTest, RegressionAUsageErrorExits2NotACli11Code) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"vaed", "--config", "/nonexistent/vaed.toml"},
        std::vector<std::string>{"vaed", "--no-such-flag"},
        std::vector<std::string>{"vaed", "--intra-op-threads", "x"}}) {
    Argv argv(args);
    CommandLine cli = ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
    EXPECT_TRUE(cli.exit_now) << args.back();
    EXPECT_EQ(cli.exit_code, 2) << args.back();
  }
  Argv help({"vaed", "--help"});
  CommandLine cli = ParseCommandLine(static_cast<int>(help.pointers.size()), help.pointers.data());
  EXPECT_TRUE(cli.exit_now);
  EXPECT_EQ(cli.exit_code, 0);
}

// Regression: a --config file that lists a real model
// without naming models.default kept the demo as the default (requests
// naming no model got demo output), and one that left the demo out failed
// ("models.default 'demo' is not a configured model"). The first real entry
// is now the default unless the file names one.
TEST(RuntimeConfigTest, RegressionAConfigFilesFirstRealModelIsTheDefault) {
  char dir_template[] = "/tmp/vaed-config-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  auto parse = [&](const std::string& toml) {
    std::ofstream(dir + "/vaed.toml") << toml;
    Argv argv({"vaed", "--config", dir + "/vaed.toml"});
    return ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
  };
  const std::string entries =
      "[[models.entry]]\nname = \"demo\"\nkind = \"demo\"\n"
      "[[models.entry]]\nname = \"v\"\nkind = \"h3_video\"\n";
  CommandLine cli = parse(entries);
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.models.default_model, "v");
  cli = parse("[models]\ndefault = \"demo\"\n" + entries);
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.models.default_model, "demo");  // named by the file
  cli = parse("[[models.entry]]\nname = \"v\"\nkind = \"h3_video\"\n");
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.models.default_model, "v");
  cli = parse("[executor]\nintra_op_threads = 1\n");  // no entries: the embedded demo
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.models.default_model, "demo");
  std::filesystem::remove_all(dir);
}

TEST(RuntimeConfigTest, StackTilingAndBudgetFlags) {
  Argv argv({"vaed", "--model", "h3=h3_video", "--model", "t=demo", "--default-model", "h3",
             "--vae-stack-tiling", "true", "--memory-budget-mib", "512"});
  CommandLine cli = ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.executor.memory_budget_mib, 512u);
  for (const auto& m : cli.options.models.entries) {
    // Tiled models get it; the demo model (untiled) keeps "off".
    EXPECT_EQ(m.stack_tiling, m.kind == models::ModelKind::kH3Video ? models::StackTiling::kOn
                                                                     : models::StackTiling::kOff)
        << m.name;
  }
  Argv auto_argv({"vaed", "--model", "h3=h3_video", "--vae-stack-tiling", "auto"});
  cli = ParseCommandLine(static_cast<int>(auto_argv.pointers.size()), auto_argv.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  for (const auto& m : cli.options.models.entries) {
    if (m.kind == models::ModelKind::kH3Video) {
      EXPECT_EQ(m.stack_tiling, models::StackTiling::kAuto);
    }
  }
  Argv bad({"vaed", "--vae-stack-tiling", "sometimes"});
  cli = ParseCommandLine(static_cast<int>(bad.pointers.size()), bad.pointers.data());
  EXPECT_TRUE(cli.exit_now);
  EXPECT_NE(cli.exit_code, 0);
}

// --model's KIND is parsed where it enters: an unknown one is refused
// naming the model and the known kinds.
TEST(CommandLineTest, ModelFlagRejectsUnknownKindListingKnownKinds) {
  Argv argv({"vaed", "--model", "y=x"});
  ::testing::internal::CaptureStderr();
  CommandLine cli = ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(cli.exit_now);
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_EQ(err, "vaed: --model 'y=x': unknown model kind 'x' for model 'y' (known: taef2, "
                 "demo, h3_video, h3_audio, h3)\n");
}

// [metrics] and log.format: defaults, TOML keys, validation naming the key,
// the flags, and --print-config's TOML.
TEST(ObservabilityConfigTest, MetricsAndLogFormatKeysParseValidateAndRoundTrip) {
  auto defaults = ParseConfigToml(kDefaultConfigToml, "embedded defaults", DaemonOptions{});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_TRUE(defaults->metrics.enabled);
  EXPECT_EQ(defaults->metrics.address, "127.0.0.1");
  EXPECT_EQ(defaults->metrics.port, 9464u);
  EXPECT_EQ(defaults->log.format, LogFormat::kText);

  auto o = ParseConfigToml(
      "[metrics]\nenabled = false\naddress = \"0.0.0.0\"\nport = 0\n"
      "[log]\nformat = \"json\"\n",
      "t.toml", DaemonOptions{});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->metrics.enabled);
  EXPECT_EQ(o->metrics.address, "0.0.0.0");
  EXPECT_EQ(o->metrics.port, 0u);
  EXPECT_EQ(o->log.format, LogFormat::kJson);
  const std::string toml = ToToml(*o);
  EXPECT_THAT(toml, HasSubstr("[metrics]\naddress = '0.0.0.0'\nenabled = false\nport = 0"));
  EXPECT_THAT(toml, HasSubstr("format = 'json'"));
  // What --print-config prints parses back to the same options.
  auto back = ParseConfigToml(toml, "printed", DaemonOptions{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->metrics.address, "0.0.0.0");
  EXPECT_FALSE(back->metrics.enabled);
  EXPECT_EQ(back->log.format, LogFormat::kJson);

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
  EXPECT_THAT(ParseConfigToml("[log]\nformat = \"xml\"\n", "t.toml", *defaults).status().message(),
              HasSubstr("log.format is 'xml'"));
}

TEST(ObservabilityConfigTest, MetricsAndLogFormatFlags) {
  Argv argv({"vaed", "--metrics-address", "[::1]:0", "--log-format", "json"});
  CommandLine cli = ParseCommandLine(static_cast<int>(argv.pointers.size()), argv.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_TRUE(cli.options.metrics.enabled);
  EXPECT_EQ(cli.options.metrics.address, "::1");
  EXPECT_EQ(cli.options.metrics.port, 0u);
  EXPECT_EQ(cli.options.log.format, LogFormat::kJson);

  Argv host({"vaed", "--metrics-address", "localhost:19464"});
  cli = ParseCommandLine(static_cast<int>(host.pointers.size()), host.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_EQ(cli.options.metrics.address, "localhost");
  EXPECT_EQ(cli.options.metrics.port, 19464u);

  Argv off({"vaed", "--no-metrics"});
  cli = ParseCommandLine(static_cast<int>(off.pointers.size()), off.pointers.data());
  ASSERT_FALSE(cli.exit_now);
  EXPECT_FALSE(cli.options.metrics.enabled);
  EXPECT_EQ(cli.options.log.format, LogFormat::kText);

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

// --help names config keys; each one exists, and a flag that sets a key
// accepts exactly the key's range.
// Bug: an empty --socket (or --default-model,
// --log-level) read as "not given", so `vaed --socket ''` served on the
// config's socket (/run/vaed/vaed.sock) without a word. Now refused.
TEST(CommandLineTest, RegressionAnEmptyFlagValueIsRefusedNotIgnored) {
  for (const std::string flag : {"--socket", "--default-model", "--log-level", "--log-format"}) {
    Argv empty({"vaed", flag, ""});
    ::testing::internal::CaptureStderr();
    CommandLine cli = ParseCommandLine(static_cast<int>(empty.pointers.size()),
                                       empty.pointers.data());
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(cli.exit_now) << flag;
    EXPECT_NE(cli.exit_code, 0) << flag;
    EXPECT_THAT(err, HasSubstr(flag)) << flag;
  }
}

TEST(CommandLineTest, KeysNamedInHelpExistAndFlagsTakeTheirRanges) {
  const std::string help = CommandLineHelp();
  const std::regex key_re(
      "\\b(server|quarantine|executor|group|log|metrics|profiles|models)\\.[a-z_]+");
  std::set<std::string> named;
  for (auto it = std::sregex_iterator(help.begin(), help.end(), key_re);
       it != std::sregex_iterator(); ++it) {
    named.insert(it->str());
  }
  EXPECT_GE(named.size(), 10u) << help;
  for (const std::string& key : named) EXPECT_TRUE(FindConfigKey(key)) << key << " in --help";

  for (const auto& [flag, key] : std::vector<std::pair<std::string, std::string>>{
           {"--group-ranks", "group.ranks"},
           {"--group-size", "group.size"},
           {"--intra-op-threads", "executor.intra_op_threads"},
           {"--queue-capacity", "executor.queue_capacity"},
           {"--memory-budget-mib", "executor.memory_budget_mib"}}) {
    const std::optional<ConfigKeyInfo> info = FindConfigKey(key);
    ASSERT_TRUE(info) << key;
    EXPECT_THAT(help, HasSubstr("(" + key)) << flag;
    for (int64_t v : {info->min - 1, info->max + 1}) {
      Argv bad({"vaed", flag, std::to_string(v)});
      CommandLine cli =
          ParseCommandLine(static_cast<int>(bad.pointers.size()), bad.pointers.data());
      EXPECT_TRUE(cli.exit_now) << flag << " " << v;
      EXPECT_NE(cli.exit_code, 0) << flag << " " << v;
    }
    // The bounds pass the flag's check (the whole config may still be
    // refused, e.g. a group size above the ranks).
    for (int64_t v : {info->min, info->max}) {
      Argv good({"vaed", flag, std::to_string(v)});
      ::testing::internal::CaptureStderr();
      ParseCommandLine(static_cast<int>(good.pointers.size()), good.pointers.data());
      EXPECT_THAT(::testing::internal::GetCapturedStderr(), Not(HasSubstr("not in range")))
          << flag << " " << v;
    }
  }
}

}  // namespace
}  // namespace vaed::server
