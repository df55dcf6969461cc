#include "vaed/device_uuid.h"

#include <cstdio>

namespace vaed {

namespace {

// The value of one hex digit, or -1.
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool HasPrefix(std::string_view text) {
  if (text.size() < 4) return false;
  const std::string_view p = text.substr(0, 4);
  return p == "GPU-" || p == "gpu-" || p == "MIG-" || p == "mig-";
}

}  // namespace

Result<DeviceUuid> ParseDeviceUuid(std::string_view text, std::string_view field) {
  const auto refuse = [&] {
    return InvalidArgument(std::string(field) + " '" + std::string(text.substr(0, 80)) +
                           "' is not a device UUID: 32 hex digits, dashes and a GPU- or MIG- "
                           "prefix allowed (as nvidia-smi -L prints it: "
                           "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)")
        .WithField(std::string(field));
  };
  std::string_view digits_text = HasPrefix(text) ? text.substr(4) : text;
  DeviceUuid uuid;
  size_t digits = 0;
  for (char c : digits_text) {
    if (c == '-') continue;
    const int v = HexValue(c);
    if (v < 0 || digits >= 32) return refuse();
    uint8_t& byte = uuid.bytes[digits / 2];
    byte = static_cast<uint8_t>(digits % 2 == 0 ? v << 4 : byte | v);
    ++digits;
  }
  if (digits != 32) return refuse();
  return uuid;
}

std::string FormatDeviceUuid(const DeviceUuid& uuid) {
  const std::array<uint8_t, 16>& b = uuid.bytes;
  char buf[48];
  std::snprintf(buf, sizeof(buf),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

}  // namespace vaed
