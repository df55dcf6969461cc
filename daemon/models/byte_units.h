// Byte counts as text for logs and error messages: "5.1 GiB", "12.0 MiB"
// (binary units, one decimal).
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_MODELS_BYTE_UNITS_H_
#define VAED_DAEMON_MODELS_BYTE_UNITS_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace vaed::models {

inline std::string ByteUnits(uint64_t bytes, int shift, const char* unit) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.1f %s",
                static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << shift), unit);
  return buf;
}
inline std::string GiB(uint64_t bytes) { return ByteUnits(bytes, 30, "GiB"); }
inline std::string MiB(uint64_t bytes) { return ByteUnits(bytes, 20, "MiB"); }
// GiB from 1 GiB up, else MiB: a small budget reads "40.0 MiB", not "0.0 GiB".
inline std::string GiBOrMiB(uint64_t bytes) {
  return bytes >= (uint64_t{1} << 30) ? GiB(bytes) : MiB(bytes);
}

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_BYTE_UNITS_H_
