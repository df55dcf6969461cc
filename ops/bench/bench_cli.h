// Command-line pieces shared by the benchmark programs (CLI11).
//
// Thread-safety: call while building the CLI::App, before parsing.
#ifndef VAED_OPS_BENCH_BENCH_CLI_H_
#define VAED_OPS_BENCH_BENCH_CLI_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "ops/common/enum_names.h"

namespace vaed::bench {

// Adds option `name` bound to `*value`, whose default --help shows, and
// which accepts only values in [min, max]. The help names the range with
// the type of `min`/`max` ("INT in [1 - 256]"), so pass them in the type
// the help should show. Returns the option for further settings.
template <typename T, typename Bound>
CLI::Option* AddRangeOption(CLI::App& app, const std::string& name, T* value,
                            const std::string& help, Bound min, Bound max) {
  return app.add_option(name, *value, help)->capture_default_str()->check(CLI::Range(min, max));
}

// Adds option `name`, a closed set of values: the name given is parsed into
// `*out` through `names` (ops/common/enum_names.h) once, here; a name not in
// the table is a usage error naming the flag and the allowed names, in the
// table's order (CLI11's "not in {...}"). --help shows the default, the name
// of `*out`. `names` must outlive the parse (the tables are static).
template <typename E>
CLI::Option* AddEnumOption(CLI::App& app, const std::string& name, E* out,
                           const ops::EnumNames<E>& names, const std::string& help) {
  const ops::EnumNames<E>* table = &names;
  return app
      .add_option_function<std::string>(
          name,
          // The check below ran first: the name is in the table.
          [out, table](const std::string& value) { *out = *ops::FromName(*table, value); }, help)
      ->default_str(ops::NameOf(names, *out))
      ->check(CLI::IsMember(names));
}

// As AddEnumOption, for a comma-separated list of such names into `*out`
// (replacing its default, which --help shows as "[a,b]").
template <typename E>
CLI::Option* AddEnumListOption(CLI::App& app, const std::string& name, std::vector<E>* out,
                               const ops::EnumNames<E>& names, const std::string& help) {
  const ops::EnumNames<E>* table = &names;
  std::string shown;
  for (E value : *out) shown += (shown.empty() ? "" : ",") + ops::NameOf(names, value);
  return app
      .add_option_function<std::vector<std::string>>(
          name,
          // The check below ran first, on each name: all are in the table.
          [out, table](const std::vector<std::string>& values) {
            out->clear();
            for (const std::string& v : values) out->push_back(*ops::FromName(*table, v));
          },
          help)
      ->delimiter(',')
      ->default_str("[" + shown + "]")
      ->check(CLI::IsMember(names));
}

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_BENCH_CLI_H_
