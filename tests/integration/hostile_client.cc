// A misbehaving client process for the hostile-input tests; a separate
// process so that its peer identity (uid + pid) differs from the test's.
//
// Usage:
//   hostile_client flood SOCKET N      sends N garbage messages, one at a
//                                      time; prints "codes: <code>=<count> ..."
//                                      and the first QUARANTINED message
//   hostile_client connect SOCKET      Hello + status; prints "connected" or
//                                      "error: <status>"; exit 0 / 1
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace {

int Flood(const char* socket, int n) {
  auto client = vaed::client::Client::Connect(
      {.socket = socket, .client_name = "hostile-flood", .request_timeout_ms = 10000});
  if (!client.ok()) {
    std::printf("error: %s\n", client.status().ToString().c_str());
    return 1;
  }
  std::map<std::string, int> codes;
  std::string quarantined;
  const std::string garbage(24, '\xff');  // never a valid vaed.v1.Request
  for (int i = 0; i < n; ++i) {
    auto reply = ClientProtocol::SendRaw(**client, garbage);
    if (!reply.ok()) {
      codes[std::string(vaed::StatusCodeName(reply.status().code()))]++;
      continue;
    }
    const vaed::Status s =
        reply->has_error() ? vaed::FromProtoError(reply->error()) : vaed::Status::Ok();
    codes[std::string(vaed::StatusCodeName(s.code()))]++;
    if (s.code() == vaed::StatusCode::kQuarantined && quarantined.empty()) {
      quarantined = s.message() + " (retry_after_ms " + std::to_string(s.retry_after_ms()) + ")";
    }
  }
  std::printf("codes:");
  for (const auto& [code, count] : codes) std::printf(" %s=%d", code.c_str(), count);
  std::printf("\nquarantined: %s\n", quarantined.c_str());
  return 0;
}

int Connect(const char* socket) {
  auto client = vaed::client::Client::Connect(
      {.socket = socket, .client_name = "hostile-connect", .connect_timeout_ms = 2000});
  if (!client.ok()) {
    std::printf("error: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto status = ClientProtocol::GetStatus(**client);
  if (!status.ok()) {
    std::printf("error: %s\n", status.status().ToString().c_str());
    return 1;
  }
  std::printf("connected\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "flood") == 0) return Flood(argv[2], std::atoi(argv[3]));
  if (argc == 3 && std::strcmp(argv[1], "connect") == 0) return Connect(argv[2]);
  std::fprintf(stderr, "usage: %s flood SOCKET N | connect SOCKET\n", argv[0]);
  return 2;
}
