// The name tables of the daemon's closed option sets (named_enum.h): each
// value has exactly one name, each name parses back to its value, and the
// config tables list those names as the keys' allowed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "daemon/engine/rank_devices.h"
#include "daemon/models/model_config.h"
#include "daemon/models/named_enum.h"
#include "daemon/models/stack_tiling.h"
#include "daemon/parallel/backend.h"
#include "daemon/parallel/group_layout.h"
#include "daemon/server/config_keys.h"
#include "daemon/server/log_options.h"
#include "daemon/server/profile_options.h"

namespace vaed::server {
namespace {

using ::testing::ElementsAre;

// Every row of `table` names a distinct value with a distinct, non-empty
// name that round-trips; an unknown name parses to nothing.
template <typename E, size_t N>
void ExpectOneNamePerValue(const models::NameTable<E, N>& table, const char* what) {
  std::set<E> values;
  std::set<std::string_view> names;
  for (const auto& [value, name] : table) {
    EXPECT_FALSE(name.empty()) << what;
    EXPECT_TRUE(values.insert(value).second) << what << ": a value named twice";
    EXPECT_TRUE(names.insert(name).second) << what << ": '" << name << "' twice";
    EXPECT_EQ(models::NameOf(table, value), name) << what;
    EXPECT_EQ(models::ParseName(table, name), value) << what;
  }
  EXPECT_EQ(models::ParseName(table, "no such name"), std::nullopt) << what;
  EXPECT_EQ(models::ParseName(table, ""), std::nullopt) << what;
}

TEST(OptionNamesTest, EveryTableNamesEachValueOnce) {
  ExpectOneNamePerValue(parallel::kFewTilesNames, "group.few_tiles");
  ExpectOneNamePerValue(parallel::kBackendNames, "group.backend");
  ExpectOneNamePerValue(engine::kDeviceKindNames, "executor.device");
  ExpectOneNamePerValue(kLogLevelNames, "log.level");
  ExpectOneNamePerValue(kLogFormatNames, "log.format");
  ExpectOneNamePerValue(kProfileNames, "profiles");
  ExpectOneNamePerValue(models::kModelKindNames, "models.entry[].kind");
  ExpectOneNamePerValue(models::kComputeDtypeNames, "models.entry[].compute_dtype");
  ExpectOneNamePerValue(models::kConfiguredStackTilingNames, "models.entry[].stack_tiling");
}

// The names are part of the config's language: a renamed value would
// break every config that spells it.
TEST(OptionNamesTest, ConfigKeysAllowExactlyTheNames) {
  const auto allowed = [](const std::string& key) {
    const std::optional<ConfigKeyInfo> info = FindConfigKey(key);
    return info ? info->allowed : std::vector<std::string>{"no key " + key};
  };
  EXPECT_THAT(allowed("group.few_tiles"), ElementsAre("pad", "shrink"));
  EXPECT_THAT(allowed("group.backend"), ElementsAre("gloo", "nccl"));
  EXPECT_THAT(allowed("executor.device"), ElementsAre("cpu", "cuda"));
  EXPECT_THAT(allowed("log.level"),
              ElementsAre("trace", "debug", "info", "warn", "error", "critical", "off"));
  EXPECT_THAT(allowed("log.format"), ElementsAre("text", "json"));
  EXPECT_THAT(allowed("profiles.default"),
              ElementsAre("safe", "optimized", "diagnostic", "student"));
  EXPECT_THAT(allowed("profiles.allowed"),
              ElementsAre("safe", "optimized", "diagnostic", "student"));
  EXPECT_THAT(allowed("models.entry[].kind"),
              ElementsAre("taef2", "demo", "h3_video", "h3_audio", "h3"));
  EXPECT_THAT(allowed("models.entry[].compute_dtype"),
              ElementsAre("float32", "float16", "bfloat16"));
  EXPECT_THAT(allowed("models.entry[].stack_tiling"), ElementsAre("off", "on", "auto"));
  EXPECT_EQ(FindConfigKey("models.entry[].kind")->type, "string");
  EXPECT_EQ(FindConfigKey("profiles.allowed")->type, "array of strings");
}

// What --print-config prints of the enum keys reads back to the same values.
TEST(OptionNamesTest, EnumKeysRoundTripThroughToml) {
  auto o = ParseConfigToml(
      "[group]\nfew_tiles = \"shrink\"\n[log]\nlevel = \"debug\"\nformat = \"json\"\n"
      "[profiles]\ndefault = \"optimized\"\nallowed = [\"optimized\", \"diagnostic\"]\n"
      "[[models.entry]]\nname = \"v\"\nkind = \"h3_video\"\nstack_tiling = \"auto\"\n"
      "compute_dtype = \"bfloat16\"\n",
      "t.toml", DaemonOptions{});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  auto back = ParseConfigToml(ToToml(*o), "printed", DaemonOptions{});
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << ToToml(*o);
  EXPECT_EQ(back->group.few_tiles, parallel::FewTiles::kShrink);
  EXPECT_EQ(back->log.level, LogLevel::kDebug);
  EXPECT_EQ(back->log.format, LogFormat::kJson);
  EXPECT_EQ(back->profiles.default_profile, Profile::kOptimized);
  EXPECT_THAT(back->profiles.allowed, ElementsAre(Profile::kOptimized, Profile::kDiagnostic));
  ASSERT_EQ(back->models.entries.size(), 1u);
  EXPECT_EQ(back->models.entries[0].kind, models::ModelKind::kH3Video);
  EXPECT_EQ(back->models.entries[0].stack_tiling, models::StackTiling::kAuto);
  EXPECT_EQ(back->models.entries[0].compute_dtype, models::ComputeDtype::kBFloat16);
}

}  // namespace
}  // namespace vaed::server
