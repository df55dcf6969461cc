// A closed set of option values: an enum and the names that spell its
// values in the config, on the command line, in logs and in replies. The
// text is parsed into the enum once, where it enters (the TOML reader, a
// flag); code past that point compares enum values, never strings.
//
// Each enum keeps its names beside it as a NameTable, in documentation
// order, e.g.
//   enum class FewTiles { kPad, kShrink };
//   inline constexpr NameTable<FewTiles, 2> kFewTilesNames = {{
//       {FewTiles::kPad, "pad"}, {FewTiles::kShrink, "shrink"}}};
//
// Thread-safety: constant tables and pure functions.
#ifndef VAED_DAEMON_MODELS_NAMED_ENUM_H_
#define VAED_DAEMON_MODELS_NAMED_ENUM_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vaed::models {

// One value and the name that spells it.
template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
using NameTable = std::array<EnumName<E>, N>;

// The name of `value` in `table`; "" for a value the table lacks (a table
// that misses a value of its enum is a bug the enum's tests catch).
template <typename E, size_t N>
constexpr std::string_view NameOf(const NameTable<E, N>& table, E value) {
  for (const EnumName<E>& e : table) {
    if (e.value == value) return e.name;
  }
  return "";
}

// The value `text` spells in `table` (exact, case-sensitive); nullopt when
// no name matches.
template <typename E, size_t N>
constexpr std::optional<E> ParseName(const NameTable<E, N>& table, std::string_view text) {
  for (const EnumName<E>& e : table) {
    if (e.name == text) return e.value;
  }
  return std::nullopt;
}

// The names of `table`, in its order (allowed values in messages and help).
template <typename E, size_t N>
std::vector<std::string> NamesOf(const NameTable<E, N>& table) {
  std::vector<std::string> names;
  names.reserve(N);
  for (const EnumName<E>& e : table) names.emplace_back(e.name);
  return names;
}

// The names of `table` joined with ", " ("taef2, demo, h3_video"), for
// messages that list what is allowed.
template <typename E, size_t N>
std::string JoinedNames(const NameTable<E, N>& table) {
  std::string joined;
  for (const EnumName<E>& e : table) {
    if (!joined.empty()) joined += ", ";
    joined += e.name;
  }
  return joined;
}

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_NAMED_ENUM_H_
