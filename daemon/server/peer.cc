#include "daemon/server/peer.h"

#include <charconv>
#include <limits>

namespace vaed::server {

namespace {

// The last ':'-separated field of `s` as an unsigned decimal <= max; `s`
// loses it and its ':'.
std::optional<uint64_t> PopField(std::string_view* s, uint64_t max) {
  const size_t colon = s->rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view field = s->substr(colon + 1);
  if (field.empty() || field.size() > 20) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || end != field.data() + field.size() || v > max) return std::nullopt;
  *s = s->substr(0, colon);
  return v;
}

}  // namespace

std::optional<PeerCredentials> ParsePeerAddress(std::string_view address) {
  std::string_view rest = address;
  const auto pid = PopField(&rest, static_cast<uint64_t>(std::numeric_limits<int32_t>::max()));
  if (!pid) return std::nullopt;
  const auto gid = PopField(&rest, std::numeric_limits<uint32_t>::max());
  if (!gid) return std::nullopt;
  const auto uid = PopField(&rest, std::numeric_limits<uint32_t>::max());
  if (!uid) return std::nullopt;
  return PeerCredentials{static_cast<uint32_t>(*uid), static_cast<uint32_t>(*gid),
                         static_cast<int32_t>(*pid)};
}

}  // namespace vaed::server
