#include "daemon/server/printable_name.h"

namespace vaed::server {

Status CheckPrintableName(const std::string& name, const std::string& field) {
  constexpr size_t kMaxName = 128;
  if (name.size() > kMaxName) {
    return InvalidArgument(field + " is " + std::to_string(name.size()) + " bytes; at most " +
                           std::to_string(kMaxName) + " are allowed");
  }
  for (unsigned char ch : name) {
    if (ch < 0x20 || ch > 0x7e) {
      return InvalidArgument(field + " contains byte " + std::to_string(ch) +
                             "; only printable ASCII (0x20-0x7e) is allowed");
    }
  }
  return Status::Ok();
}

}  // namespace vaed::server
