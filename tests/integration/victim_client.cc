// A client process for the killed-mid-request test: registers two regions,
// prints "sending" and then blocks in a long Decode until it is killed.
// Usage: victim_client SOCKET FRAMES
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vaed/client.h"
#include "vaed/client_protocol.h"

using vaed::client::ClientProtocol;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOCKET FRAMES\n", argv[0]);
    return 2;
  }
  const int64_t frames = std::atoll(argv[2]);
  const std::vector<int64_t> latent_shape = {frames, 32, 48, 48};
  const std::vector<int64_t> output_shape = {frames, 384, 384, 3};
  auto client = vaed::client::Client::Connect({.socket = argv[1], .client_name = "victim"});
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  auto in = vaed::client::SharedRegion::Create(uint64_t(frames) * 32 * 48 * 48 * 4);
  auto out = vaed::client::SharedRegion::Create(uint64_t(frames) * 384 * 384 * 3);
  if (!in.ok() || !out.ok()) return 1;
  auto in_id = (*client)->RegisterRegion(**in);
  auto out_id = (*client)->RegisterRegion(**out);
  if (!in_id.ok() || !out_id.ok()) return 1;
  std::printf("sending\n");
  std::fflush(stdout);
  auto r =
      ClientProtocol::Decode(**client, {.model = "demo",
                                        .latent = {*in_id, 0, vaed::DType::kFloat32, latent_shape},
                                        .output = {*out_id, 0, vaed::DType::kUInt8, output_shape}});
  std::printf("finished: %s\n", r.ok() ? "ok" : r.status().ToString().c_str());
  return 0;
}
