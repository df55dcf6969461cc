#include "ops/bench/matrix/modes.h"

namespace vaed::bench {

const std::vector<ModeSpec>& KnownModes() {
  static const std::vector<ModeSpec> kModes = {
      {"eager", "safe", client::StackTiling::kOff, client::Compile::kOff,
       "profile safe, stack_tiling OFF, compile OFF: eager sequential tiles (the baseline)",
       /*baseline=*/true},
      {"stacked", "diagnostic", client::StackTiling::kOn, client::Compile::kOff,
       "profile diagnostic, stack_tiling ON, compile OFF"},
      {"compiled", "optimized", client::StackTiling::kOff, client::Compile::kOn,
       "profile optimized, stack_tiling OFF, compile ON"},
      {"compiled_stacked", "optimized", client::StackTiling::kOn, client::Compile::kOn,
       "profile optimized, stack_tiling ON, compile ON"},
      {"auto", "optimized", client::StackTiling::kAuto, client::Compile::kAuto,
       "profile optimized, stack_tiling AUTO, compile AUTO (the daemon decides)"},
  };
  return kModes;
}

const ModeSpec* FindMode(const std::string& name) {
  for (const ModeSpec& m : KnownModes()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

bool IsBaselineMode(const std::string& name) {
  const ModeSpec* m = FindMode(name);
  return m != nullptr && m->baseline;
}

std::vector<std::string> KnownModeNames() {
  std::vector<std::string> names;
  for (const ModeSpec& m : KnownModes()) names.push_back(m.name);
  return names;
}

const char* StackTilingName(client::StackTiling s) {
  switch (s) {
    case client::StackTiling::kOff:
      return "OFF";
    case client::StackTiling::kOn:
      return "ON";
    case client::StackTiling::kAuto:
      return "AUTO";
    default:
      return "DEFAULT";
  }
}

const char* CompileName(client::Compile c) {
  switch (c) {
    case client::Compile::kOff:
      return "OFF";
    case client::Compile::kOn:
      return "ON";
    case client::Compile::kAuto:
      return "AUTO";
    default:
      return "DEFAULT";
  }
}

std::vector<std::string> RequiredCapabilities(const ModeSpec& m) {
  std::vector<std::string> caps;
  if (m.stack_tiling == client::StackTiling::kOn || m.stack_tiling == client::StackTiling::kAuto) {
    caps.push_back("stack_tiling");
  }
  if (m.compile == client::Compile::kOn) caps.push_back("compiled_plans");
  return caps;
}

std::string VariantName(const ModeSpec& m, uint32_t group_size) {
  return group_size == 0 ? std::string(m.name)
                         : std::string(m.name) + " S=" + std::to_string(group_size);
}

}  // namespace vaed::bench
