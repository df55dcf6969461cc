// Device UUIDs: how vaed names a GPU everywhere (configuration, regions,
// ranks, status). Never by ordinal: a DiT worker and the daemon usually see
// different CUDA_VISIBLE_DEVICES, so ordinal 0 in one process can be
// ordinal 3 in the other, while the UUID is the device's own.
//
// Text form: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", 32 lowercase hex
// digits of the 16 bytes in order, as nvidia-smi -L and
// torch.cuda.get_device_properties(i).uuid print them. Parsing accepts
// any case, dashes anywhere and an optional "GPU-" or "MIG-" prefix.
//
// Every build has this (no CUDA headers): CPU builds parse and compare the
// UUIDs clients send, to answer clearly.
#ifndef VAED_DEVICE_UUID_H_
#define VAED_DEVICE_UUID_H_

#include <array>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "vaed/status.h"

namespace vaed {

struct DeviceUuid {
  std::array<uint8_t, 16> bytes{};

  // Byte order (lexicographic), which is also the order of the text form:
  // the order in which a GPU build numbers its ranks.
  auto operator<=>(const DeviceUuid&) const = default;
};

// Parses the text form above. Errors: kInvalidArgument naming `field`
// (e.g. "register_region.cuda.device_uuid" or "executor.devices[1]"), the
// text, and the rule (32 hex digits, dashes and a GPU-/MIG- prefix allowed).
Result<DeviceUuid> ParseDeviceUuid(std::string_view text, std::string_view field);

// "GPU-" + the 32 digits in the 8-4-4-4-12 grouping, lowercase.
std::string FormatDeviceUuid(const DeviceUuid& uuid);

}  // namespace vaed

#endif  // VAED_DEVICE_UUID_H_
