// The names of a closed set of option values (an enum): one table per enum,
// in the order the tool's --help lists them. A flag's name is parsed into the
// enum once, at the flag (AddEnumOption, enum_option.h); past that edge the code compares enum values, and
// prints a value's name back with NameOf (reports, error messages, generated
// daemon configs). Shared by the ops tools (vaectl, the benchmarks).
//
// Thread-safety: pure functions over tables that are not modified.
#ifndef VAED_OPS_COMMON_ENUM_NAMES_H_
#define VAED_OPS_COMMON_ENUM_NAMES_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vaed::ops {

// Each value's name; names are unique. A vector of pairs rather than a map so
// that --help and CLI11's "not in {...}" error keep the listed order.
template <typename E>
using EnumNames = std::vector<std::pair<std::string, E>>;

// The value named `name`; nullopt when `names` has no such name.
template <typename E>
std::optional<E> FromName(const EnumNames<E>& names, const std::string& name) {
  for (const auto& [n, value] : names) {
    if (n == name) return value;
  }
  return std::nullopt;
}

// The name of `value`. Precondition: `names` names every value of E (the
// tables are complete); "" otherwise.
template <typename E>
std::string NameOf(const EnumNames<E>& names, E value) {
  for (const auto& [n, v] : names) {
    if (v == value) return n;
  }
  return "";
}

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_ENUM_NAMES_H_
