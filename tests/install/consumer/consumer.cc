// A program from outside the vaed tree, built against an installed
// libvaed_client (tests/install/installed_client_test.sh): it calls the C++
// API and every function the installed vaed/status.h and vaed/tensor_ref.h
// declare that a program may call (each must be exported), uses its reply
// types (vaed/replies.h: plain structs, so the program links no protobuf)
// and the C ABI, and needs no daemon. Prints
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

  vaed::client::DecodeReply reply;
  reply.frames = 3;
  reply.timings.push_back({"decode", 0.5});
  const vaed::client::DecodeReply copied = reply;
  if (copied.frames != 3 || copied.timings.size() != 1 || copied.audio.has_value()) {
    std::fprintf(stderr, "DecodeReply did not copy\n");
    return 1;
  }

  std::printf(
      "vaed %s: Connect(%s) -> %s; DecodeReply frames %u; dtype %s; reason %s; C status 0 %s\n",
      VAED_CONSUMER_VERSION, socket.c_str(),
      std::string(vaed::StatusCodeName(client.status().code())).c_str(), copied.frames,
      std::string(vaed::DTypeName(vaed::DType::kFloat32)).c_str(),
      std::string(vaed::ErrorReasonName(client.status().reason())).c_str(), vaed_status_name(0));
  return 0;
}
