// Regression tests of bugs found and fixed in the daemon's serving code
// (daemon/server/, daemon/main): each starts its own `vaed` process
// (tests/common/daemon_process.h) with the built-in demo model, names its
// bug, the commit that fixed it and what failed before.
// tests/regressions/README.md lists them all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/daemon_process.h"
#include "tests/common/raw_connection.h"
#include "vaed/client.h"
#include "vaed/framing.h"
#include "vaed/wire.h"

namespace vaed {
namespace {

using testing::DaemonProcess;
using testing::RawConnection;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Decodes a demo latent float32 [N, 32, h, w] (values sin(0.01 i)) into
// uint8 [N, 8h, 8w, 3] through `c`, in regions of its own.
Result<v1::DecodeReply> DecodeDemo(client::Client& c, int64_t n, int64_t h, int64_t w) {
  const std::vector<int64_t> latent = {n, 32, h, w}, output = {n, 8 * h, 8 * w, 3};
  VAED_ASSIGN_OR_RETURN(auto in, client::SharedRegion::Create(uint64_t(n * 32 * h * w * 4)));
  VAED_ASSIGN_OR_RETURN(auto out, client::SharedRegion::Create(uint64_t(n * 64 * h * w * 3)));
  float* f = reinterpret_cast<float*>(in->data());
  for (int64_t i = 0; i < n * 32 * h * w; ++i) f[i] = std::sin(0.01f * float(i));
  VAED_ASSIGN_OR_RETURN(uint64_t in_id, c.RegisterRegion(*in));
  VAED_ASSIGN_OR_RETURN(uint64_t out_id, c.RegisterRegion(*out));
  return c.Decode({.model = "demo",
                   .latent = {in_id, 0, DType::kFloat32, latent},
                   .output = {out_id, 0, DType::kUInt8, output}});
}

// One decode of a small demo latent by a fresh client: the daemon still
// serves.
void ExpectStillServing(const DaemonProcess& d) {
  auto c = client::Client::Connect({.socket = d.socket(), .client_name = "after"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto r = DecodeDemo(**c, 1, 4, 4);
  ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << d.Log();
  EXPECT_EQ(r->frames(), 1u);
}

size_t OpenDescriptors(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

// Bug: the silence timeout (server.client_timeout_ms) counted from the
// client's last request, so a client whose decode outlasted the timeout was
// dropped right after its reply, and its next request failed with "client
// id N is not known". Fixed in eaae3c5: the timeout counts from the last
// reply. (Was LifecycleTest.KeepsClientWhoseDecodeOutlastsTheClientTimeout.)
TEST(RegressionTest, ClientWhoseDecodeOutlastsTheClientTimeoutIsKept) {
  const std::string cfg = testing::WriteTempConfig(
      "regression", "long-decode",
      "[server]\nheartbeat_interval_ms = 200\nclient_timeout_ms = 600\n"
      "[executor]\nintra_op_threads = 1\n");
  DaemonProcess daemon({"--config", cfg});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto c = client::Client::Connect(
      {.socket = daemon.socket(), .client_name = "slow", .heartbeats = false});
  ASSERT_TRUE(c.ok());
  auto r = DecodeDemo(**c, 4, 40, 40);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  double decode_s = 0;
  for (const auto& t : r->timings()) {
    if (t.component() == "decode") decode_s = t.seconds();
  }
  ASSERT_GT(decode_s, 0.6) << "the decode must outlast client_timeout_ms for this test to bite";
  // Right after the reply, within the timeout: the client is still known.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto s = (*c)->GetStatus();
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  std::remove(cfg.c_str());
}

// Bug: the daemon replaced a regular file found at --socket with its socket
// (and removed it at exit), destroying the file. Fixed in 747c981 (review
// fixes): anything at the path that is not a socket is refused. Before: the
// file was unlinked. (Was DaemonStartTest.RefusesToReplaceARegularFileAtTheSocketPath.)
TEST(RegressionTest, DaemonRefusesToReplaceARegularFileAtTheSocketPath) {
  char tmpl[] = "/tmp/vaed-precious-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/vaed-precious-file.txt";
  {
    std::ofstream f(path);
    f << "precious";
  }
  testing::RunResult r = testing::RunVaed({"--socket", path});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("is not a socket"));
  std::ifstream in(path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

// Bugs (issue 6 review, the attacks on the idle timeout and on the close):
// a connection that never says Hello but keeps sending (each request
// answered unknown_client) reset its idle timer and stayed open forever;
// and a connection that never reads its replies could not be closed,
// because the close waited behind the unsent replies, so its descriptor
// stayed open. Fixed in 546afd2: connections without a client are closed
// after client_timeout_ms whatever they send, and the close is forced with
// shutdown(2) on the connection's own socket. Afterwards the daemon holds
// no more descriptors than before. (Was
// HostileInputTest.ChattyAndNonReadingConnectionsAreClosedAndTheirDescriptorsFreed.)
TEST(RegressionTest, ChattyAndNonReadingConnectionsAreClosedAndTheirDescriptorsFreed) {
  const std::string cfg = testing::WriteTempConfig(
      "regression", "chatty",
      "[server]\nheartbeat_interval_ms = 200\nclient_timeout_ms = 1000\nsend_hwm = 16\n");
  DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  ExpectStillServing(daemon);
  const size_t before = OpenDescriptors(daemon.pid());
  v1::Request status;
  status.set_request_id(1);
  status.set_client_id(424242);  // never said Hello: answered unknown_client
  status.mutable_status();
  const std::string one = *wire::EncodeFrame(status.SerializeAsString());
  std::string burst;
  for (int i = 0; i < 3000; ++i) burst += one;
  std::vector<std::unique_ptr<RawConnection>> deaf;
  for (int i = 0; i < 8; ++i) {
    deaf.push_back(std::make_unique<RawConnection>(daemon.socket()));
    ASSERT_TRUE(deaf.back()->ok());
    ASSERT_TRUE(deaf.back()->Write(burst));  // never reads a reply
  }
  RawConnection chatty(daemon.socket());
  ASSERT_TRUE(chatty.ok());
  bool chatty_closed = false;
  const auto t0 = Clock::now();
  while (!chatty_closed && Clock::now() - t0 < std::chrono::seconds(6)) {
    if (!chatty.Write(one)) {  // EPIPE / ECONNRESET: the daemon closed it
      chatty_closed = true;
      break;
    }
    (void)chatty.Read(300, &chatty_closed);
  }
  EXPECT_TRUE(chatty_closed) << "a connection sending requests without Hello stayed open";
  size_t after = OpenDescriptors(daemon.pid());
  for (int i = 0; i < 50 && after > before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = OpenDescriptors(daemon.pid());
  }
  EXPECT_LE(after, before) << "descriptors of closed connections are still open " << daemon.Log();
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  std::filesystem::remove(cfg);
}

}  // namespace
}  // namespace vaed
