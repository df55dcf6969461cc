// Command-line pieces shared by the benchmark programs (CLI11).
//
// Thread-safety: call while building the CLI::App, before parsing.
#ifndef VAED_OPS_BENCH_BENCH_CLI_H_
#define VAED_OPS_BENCH_BENCH_CLI_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "ops/common/enum_option.h"

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

// The closed-set flags (ops/common/enum_option.h).
using ops::AddEnumListOption;
using ops::AddEnumOption;

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_BENCH_CLI_H_
