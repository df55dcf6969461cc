// Pieces of the `vaed` TOML configs the benchmarks generate for the daemons
// they start (vaed_bench_matrix, vaed_bench_warm_up).
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_BENCH_DAEMON_CONFIG_TEXT_H_
#define VAED_OPS_BENCH_DAEMON_CONFIG_TEXT_H_

#include <filesystem>
#include <string>
#include <system_error>

namespace vaed::bench {

// `s` as a TOML basic string: quoted, with '"' and '\' escaped.
inline std::string TomlString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// `path` made absolute against the current directory (the daemon runs
// elsewhere); `path` unchanged when that fails.
inline std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.string();
}

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_DAEMON_CONFIG_TEXT_H_
