// A program from outside the vaed tree, built against an installed
// libvaed_client (tests/install/installed_client_test.sh): it calls the C++
// API, a generated protocol class (its code in libvaed_client, its base in
// libprotobuf) and the C ABI, and needs no daemon. Prints
// "vaed <version>: ..." and exits 0 when every call behaved.
#include <cstdio>
#include <string>

#include "vaed/client.h"
#include "vaed/vaed_c.h"

#ifndef VAED_CONSUMER_VERSION
#error "build with -DVAED_CONSUMER_VERSION=\"<the version the package reports>\""
#endif

int main() {
  // No daemon listens here: Connect must come back with a Status, not throw.
  const std::string socket = vaed::client::Client::SocketPath("/nonexistent/vaed.sock");
  auto client = vaed::client::Client::Connect({.socket = socket, .client_name = "consumer"});
  if (client.ok()) {
    std::fprintf(stderr, "connected to %s, where no daemon should be\n", socket.c_str());
    return 1;
  }

  vaed::v1::DecodeReply reply;
  reply.set_frames(3);
  vaed::v1::DecodeReply parsed;
  if (!parsed.ParseFromString(reply.SerializeAsString()) || parsed.frames() != 3) {
    std::fprintf(stderr, "DecodeReply did not round-trip\n");
    return 1;
  }

  std::printf("vaed %s: Connect(%s) -> %s; DecodeReply frames %u; dtype %s; C status 0 %s\n",
              VAED_CONSUMER_VERSION, socket.c_str(),
              std::string(vaed::StatusCodeName(client.status().code())).c_str(), parsed.frames(),
              std::string(vaed::DTypeName(vaed::DType::kFloat32)).c_str(), vaed_status_name(0));
  return 0;
}
