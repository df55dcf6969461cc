// Command-line flags whose value is one of a closed set of names (CLI11):
// the name is parsed into the enum once, at the flag, through the enum's
// table (enum_names.h). Shared by vaectl and the benchmark programs.
//
// Thread-safety: call while building the CLI::App, before parsing.
#ifndef VAED_OPS_COMMON_ENUM_OPTION_H_
#define VAED_OPS_COMMON_ENUM_OPTION_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "ops/common/enum_names.h"

namespace vaed::ops {

// Adds option `name`, a closed set of values: the name given is parsed into
// `*out` through `names` (enum_names.h) once, here; a name not in
// the table is a usage error naming the flag and the allowed names, in the
// table's order (CLI11's "not in {...}"). --help shows the default, the name
// of `*out`. `names` must outlive the parse (the tables are static).
template <typename E>
CLI::Option* AddEnumOption(CLI::App& app, const std::string& name, E* out,
                           const EnumNames<E>& names, const std::string& help) {
  const EnumNames<E>* table = &names;
  return app
      .add_option_function<std::string>(
          name,
          // The check below ran first: the name is in the table.
          [out, table](const std::string& value) { *out = *FromName(*table, value); }, help)
      ->default_str(NameOf(names, *out))
      ->check(CLI::IsMember(names));
}

// As AddEnumOption, for a comma-separated list of such names into `*out`
// (replacing its default, which --help shows as "[a,b]").
template <typename E>
CLI::Option* AddEnumListOption(CLI::App& app, const std::string& name, std::vector<E>* out,
                               const EnumNames<E>& names, const std::string& help) {
  const EnumNames<E>* table = &names;
  std::string shown;
  for (E value : *out) shown += (shown.empty() ? "" : ",") + NameOf(names, value);
  return app
      .add_option_function<std::vector<std::string>>(
          name,
          // The check below ran first, on each name: all are in the table.
          [out, table](const std::vector<std::string>& values) {
            out->clear();
            for (const std::string& v : values) out->push_back(*FromName(*table, v));
          },
          help)
      ->delimiter(',')
      ->default_str("[" + shown + "]")
      ->check(CLI::IsMember(names));
}

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_ENUM_OPTION_H_
