// The decode modes vaed_bench_matrix compares: each a way of asking the
// daemon for the same decode (a request profile + stack_tiling + compile).
// Output bytes must not depend on the mode.
//
// Thread-safety: pure functions over a constant table.
#ifndef VAED_OPS_BENCH_MATRIX_MODES_H_
#define VAED_OPS_BENCH_MATRIX_MODES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "vaed/client.h"

namespace vaed::bench {

// One way of asking for a decode.
struct ModeSpec {
  const char* name;     // "eager", "stacked", ... (--modes)
  const char* profile;  // DecodeRequest::profile
  client::StackTiling stack_tiling;
  client::Compile compile;
  const char* summary;  // one line for --help
  // The byte reference every other mode is compared with (eager); exactly
  // one mode is.
  bool baseline = false;
};

// Every mode, eager (the baseline) first. The table lives as long as the
// program.
const std::vector<ModeSpec>& KnownModes();

// The mode called `name`, or nullptr when there is none.
const ModeSpec* FindMode(const std::string& name);

// Whether `name` is the baseline mode's name (false for an unknown name).
bool IsBaselineMode(const std::string& name);

// The names of KnownModes(), in order.
std::vector<std::string> KnownModeNames();

// "OFF", "ON", "AUTO", "DEFAULT": the JSON spelling of a request option.
const char* StackTilingName(client::StackTiling s);
const char* CompileName(client::Compile c);

// The model capabilities (StatusReply.models[].capabilities) a mode's
// options need; a model without them rejects the request.
std::vector<std::string> RequiredCapabilities(const ModeSpec& m);

// The label of a (mode, group size) pair: "eager", or "eager S=2" when the
// benchmark measures group sizes (`group_size` > 0).
std::string VariantName(const ModeSpec& m, uint32_t group_size);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_MODES_H_
