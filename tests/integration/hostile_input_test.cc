// Acceptance: hostile input, dying clients, deadlines, access
// control and sticky device errors against real `vaed` processes. Every case
// ends with a good decode on the same daemon.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "tests/common/daemon_process.h"
#include "tests/common/raw_connection.h"
#include "tests/common/test_paths.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/framing.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

// AddressSanitizer under clang (which, at version 14, does not define
// GCC's __SANITIZE_ADDRESS__).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VAED_CLANG_ASAN 1
#endif
#endif
#ifndef VAED_CLANG_ASAN
#define VAED_CLANG_ASAN 0
#endif

namespace vaed {
namespace {

using testing::DaemonProcess;
using testing::RawConnection;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

// A small demo-model decode: float32 [F, 32, h, w] -> uint8 [F, 8h, 8w, 3].
struct Buffers {
  std::unique_ptr<client::SharedRegion> in, out;
  uint64_t in_id = 0, out_id = 0;
  std::vector<int64_t> latent_shape, output_shape;
};

Buffers MakeBuffers(client::Client& c, int64_t frames, int64_t h, int64_t w) {
  Buffers b;
  b.latent_shape = {frames, 32, h, w};
  b.output_shape = {frames, 8 * h, 8 * w, 3};
  const uint64_t in_bytes = uint64_t(frames * 32 * h * w) * 4;
  auto in = client::SharedRegion::Create(in_bytes);
  auto out = client::SharedRegion::Create(uint64_t(frames * 64 * h * w * 3));
  EXPECT_TRUE(in.ok() && out.ok());
  b.in = std::move(in).value();
  b.out = std::move(out).value();
  float* f = reinterpret_cast<float*>(b.in->data());
  for (uint64_t i = 0; i < in_bytes / 4; ++i) f[i] = std::sin(0.01f * float(i));
  auto in_id = c.RegisterRegion(*b.in);
  auto out_id = c.RegisterRegion(*b.out);
  EXPECT_TRUE(in_id.ok() && out_id.ok()) << in_id.status().ToString();
  b.in_id = in_id.ok() ? *in_id : 0;
  b.out_id = out_id.ok() ? *out_id : 0;
  return b;
}

client::DecodeRequest Request(const Buffers& b) {
  return {.model = "demo",
          .latent = {b.in_id, 0, DType::kFloat32, b.latent_shape},
          .output = {b.out_id, 0, DType::kUInt8, b.output_shape}};
}

std::unique_ptr<client::Client> Connect(const DaemonProcess& d, const std::string& name) {
  auto c = client::Client::Connect({.socket = d.socket(), .client_name = name});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

// The good decode every case ends with, from a fresh client.
void ExpectStillServing(const DaemonProcess& d) {
  auto c = Connect(d, "after");
  ASSERT_NE(c, nullptr);
  Buffers b = MakeBuffers(*c, 1, 4, 4);
  auto r = ClientProtocol::Decode(*c, Request(b));
  ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << d.Log();
  EXPECT_EQ(r->frames(), 1u);
}

std::string WriteConfig(const std::string& name, const std::string& toml) {
  return testing::WriteTempConfig("hostile", name, toml);
}

std::string Binary(const std::string& rel) { return std::string(VAED_BINARY_DIR) + "/" + rel; }

// Runs `argv` to completion and returns its stdout and stderr. `in_child`
// runs in the child before exec (lower its priority, change its uid); when
// it returns false the child exits with 126.
std::string RunAndCapture(const std::vector<std::string>& argv, int* exit_code = nullptr,
                          const std::function<bool()>& in_child = {}) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    if (in_child && !in_child()) _exit(126);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (exit_code) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// --------------------------------------------------------------- memory

// A segment truncated after its request was validated and queued: the
// executor's guarded copy takes the SIGBUS, the request fails as a client
// fault, and the daemon keeps serving.
TEST(HostileInputTest, SegmentTruncatedBeforeTheReadIsAClientFault) {
  const std::string cfg = WriteConfig("slow", "[executor]\nallow_fault_injection = true\n");
  DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto busy = Connect(daemon, "busy");
  auto victim = Connect(daemon, "victim");
  ASSERT_TRUE(busy && victim);
  // Keep the executor busy: 40 frames in 10 batches, 50 ms each (slow_tiles).
  Buffers slow = MakeBuffers(*busy, 40, 4, 4);
  client::DecodeRequest slow_req = Request(slow);
  slow_req.inject_faults = {"slow_tiles"};
  auto running =
      std::async(std::launch::async, [&] { return ClientProtocol::Decode(*busy, slow_req); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The victim's request is validated (its segment is whole) and queued.
  Buffers b = MakeBuffers(*victim, 1, 16, 16);
  auto queued =
      std::async(std::launch::async, [&] { return ClientProtocol::Decode(*victim, Request(b)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Now the client shrinks its own segment under the daemon's mapping.
  const int fd = shm_open(("/" + b.in->name()).c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
  auto fault = queued.get();
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().code(), StatusCode::kClientFault) << fault.status().ToString();
  EXPECT_THAT(fault.status().message(), HasSubstr("SIGBUS"));
  EXPECT_TRUE(running.get().ok());
  auto status = ClientProtocol::GetStatus(*victim);
  ASSERT_TRUE(status.ok());
  EXPECT_GE(status->client_faults(), 1u);
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  std::filesystem::remove(cfg);
}

// ------------------------------------------------------------ protocol

TEST(HostileInputTest, OversizedOutOfOrderAndUnknownMessages) {
  DaemonProcess daemon({"--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto c = Connect(daemon, "rude");
  ASSERT_NE(c, nullptr);
  // Over server.max_message_bytes (1 MiB): answered, not read as a request.
  auto big = ClientProtocol::SendRaw(*c, std::string((1 << 20) + 1, '\0'));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_TRUE(big->has_error());
  EXPECT_THAT(big->error().message(), HasSubstr("exceeds server.max_message_bytes"));
  // A message type this daemon does not know: a Request whose only body
  // is field 200 (a newer protocol's message, say).
  v1::Request newer;
  newer.set_request_id(3);
  newer.set_client_id(c->client_id());
  std::string bytes = newer.SerializeAsString();
  bytes += std::string("\xc2\x0c\x02\x08\x01", 5);  // field 200, 2 bytes: {1: 1}
  auto unknown = ClientProtocol::SendRaw(*c, bytes);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->request_id(), 3u);
  EXPECT_EQ(unknown->error().code(), v1::ERROR_CODE_PROTOCOL_ERROR) << unknown->DebugString();
  EXPECT_THAT(unknown->error().message(), HasSubstr("no body"));
  // Out of order: a request after Goodbye, and one naming a client id
  // that was never handed out.
  v1::Request bye;
  bye.set_request_id(4);
  bye.set_client_id(c->client_id());
  bye.mutable_goodbye();
  ASSERT_TRUE(ClientProtocol::SendRaw(*c, bye.SerializeAsString()).ok());
  v1::Request after;
  after.set_request_id(5);
  after.set_client_id(c->client_id());
  after.mutable_status();
  auto late = ClientProtocol::SendRaw(*c, after.SerializeAsString());
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->error().code(), v1::ERROR_CODE_UNKNOWN_CLIENT);
  after.set_client_id(987654321);
  auto forged = ClientProtocol::SendRaw(*c, after.SerializeAsString());
  ASSERT_TRUE(forged.ok());
  EXPECT_EQ(forged->error().code(), v1::ERROR_CODE_UNKNOWN_CLIENT);
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
}

// ------------------------------------------------------ raw connections

uint64_t RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      uint64_t kib = 0;
      in >> kib;
      return kib;
    }
  }
  return 0;
}

// The gap ZeroMQ's own messages left open: a peer announcing a huge message
// and streaming its bytes. The daemon answers from the 4-byte header and
// skips the bytes as they arrive: 256 MiB streamed, RSS unchanged.
TEST(HostileInputTest, HugeMessageIsAnsweredFromItsHeaderAndNeverBuffered) {
  DaemonProcess daemon({"--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  ExpectStillServing(daemon);  // warm: the decode's own memory is in RSS
  const uint64_t rss_before = RssKiB(daemon.pid());
  RawConnection raw(daemon.socket());
  ASSERT_TRUE(raw.ok());
  constexpr uint32_t kAnnounced = 0xC0000000u;  // 3 GiB
  ASSERT_TRUE(raw.Write(std::string("\x00\x00\x00\xc0", 4)));
  std::optional<v1::Reply> reply = raw.Read(5000);
  ASSERT_TRUE(reply.has_value()) << daemon.Log();
  EXPECT_EQ(reply->error().code(), v1::ERROR_CODE_PROTOCOL_ERROR);
  EXPECT_THAT(reply->error().message(),
              HasSubstr("message of " + std::to_string(kAnnounced) +
                        " bytes exceeds server.max_message_bytes"));
  const std::string chunk(1 << 20, '\x5a');
  for (int i = 0; i < 256; ++i) ASSERT_TRUE(raw.Write(chunk)) << "after " << i << " MiB";
  // Let the daemon drain what the socket still holds, then compare.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t rss_after = RssKiB(daemon.pid());
#if defined(__SANITIZE_ADDRESS__) || VAED_CLANG_ASAN
  // AddressSanitizer keeps freed chunks in its quarantine (256 MiB by
  // default): RSS says nothing here; the plain build checks it.
  std::printf("RSS %lu KiB -> %lu KiB (not checked under AddressSanitizer)\n",
              static_cast<unsigned long>(rss_before), static_cast<unsigned long>(rss_after));
#else
  EXPECT_LT(rss_after, rss_before + 32 * 1024)
      << "RSS " << rss_before << " KiB -> " << rss_after << " KiB after 256 MiB streamed";
#endif
  // After a skipped message the stream is read on: 2 MiB announced and
  // sent, then a Status request, which is answered.
  RawConnection next(daemon.socket());
  ASSERT_TRUE(next.ok());
  v1::Request status;
  status.set_request_id(7);
  status.mutable_status();
  ASSERT_TRUE(next.Write(std::string("\x00\x00\x20\x00", 4) + std::string(2 << 20, '\x01') +
                         *wire::EncodeFrame(status.SerializeAsString())));
  std::optional<v1::Reply> skipped = next.Read(5000);
  ASSERT_TRUE(skipped.has_value());
  EXPECT_THAT(skipped->error().message(), HasSubstr("message of 2097152 bytes exceeds"));
  std::optional<v1::Reply> answered = next.Read(5000);
  ASSERT_TRUE(answered.has_value()) << daemon.Log();
  EXPECT_EQ(answered->request_id(), 7u) << answered->DebugString();
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
}

// Connections past server.max_connections, or past
// server.max_clients_per_process for one process, get one
// RESOURCE_EXHAUSTED reply naming the limit and are closed. This test runs
// as root, an admin peer: it has 16 connections more than the limit.
TEST(HostileInputTest, ConnectionsPastTheLimitsAreRefusedWithTheirReason) {
  struct Case {
    std::string toml, limit;
    int admitted;
  };
  for (const Case& c :
       {Case{"[server]\nmax_connections = 2\n", "server.max_connections = 2", 2 + 16},
        Case{"[server]\nmax_clients_per_process = 2\n", "server.max_clients_per_process = 2",
             2}}) {
    SCOPED_TRACE(c.limit);
    const std::string cfg = WriteConfig("limits", c.toml);
    DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"});
    ASSERT_TRUE(daemon.ok()) << daemon.Log();
    {
      std::vector<std::unique_ptr<RawConnection>> held;
      for (int i = 0; i < c.admitted; ++i) {
        held.push_back(std::make_unique<RawConnection>(daemon.socket()));
        ASSERT_TRUE(held.back()->ok());
      }
      RawConnection& a = *held.front();
      bool closed = true;
      EXPECT_FALSE(a.Read(300, &closed).has_value());  // admitted: nothing said
      EXPECT_FALSE(closed);
      EXPECT_FALSE(held.back()->Read(100, &closed).has_value());
      EXPECT_FALSE(closed);
      RawConnection third(daemon.socket());
      ASSERT_TRUE(third.ok());
      std::optional<v1::Reply> refusal = third.Read(5000);
      ASSERT_TRUE(refusal.has_value()) << daemon.Log();
      EXPECT_EQ(refusal->request_id(), 0u);
      EXPECT_EQ(refusal->error().code(), v1::ERROR_CODE_RESOURCE_EXHAUSTED);
      EXPECT_THAT(refusal->error().message(), HasSubstr(c.limit));
      EXPECT_FALSE(third.Read(5000, &closed).has_value());
      EXPECT_TRUE(closed) << "the refused connection stays open";
    }
    // Closed connections free their places.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ExpectStillServing(daemon);
    auto c2 = Connect(daemon, "status");
    ASSERT_NE(c2, nullptr);
    auto status = ClientProtocol::GetStatus(*c2);
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(status->rejected_connections(), 1u);
    EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
    std::filesystem::remove(cfg);
  }
}

// A connection that never says Hello, and one that sends a message a byte
// at a time, are closed after server.client_timeout_ms; a client that
// heartbeats keeps its connection.
TEST(HostileInputTest, IdleAndTricklingConnectionsAreClosedAfterTheClientTimeout) {
  const std::string cfg = WriteConfig(
      "idle", "[server]\nheartbeat_interval_ms = 200\nclient_timeout_ms = 1000\n");
  DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto live = Connect(daemon, "live");
  ASSERT_NE(live, nullptr);
  RawConnection idle(daemon.socket()), trickle(daemon.socket());
  ASSERT_TRUE(idle.ok() && trickle.ok());
  const std::string frame = *wire::EncodeFrame(std::string(64, '\x01'));
  const auto t0 = Clock::now();
  bool idle_closed = false, trickle_closed = false;
  for (size_t i = 0; i < frame.size() && Clock::now() - t0 < std::chrono::seconds(8); ++i) {
    if (!trickle_closed && !trickle.Write(frame.substr(i, 1))) trickle_closed = true;
    bool c = false;
    if (!idle_closed) {
      (void)idle.Read(10, &c);
      idle_closed = c;
    }
    if (!trickle_closed) {
      (void)trickle.Read(190, &c);
      trickle_closed = c;
    }
    if (idle_closed && trickle_closed) break;
  }
  EXPECT_TRUE(idle_closed) << "a connection without a client stayed open";
  EXPECT_TRUE(trickle_closed) << "a message trickling a byte per 200 ms stayed open";
  EXPECT_THAT(daemon.Log(), HasSubstr("a message stayed incomplete for 1000 ms"));
  // The heartbeating client still works on its connection.
  auto s = ClientProtocol::GetStatus(*live);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(live->reconnects(), 0u);
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  std::filesystem::remove(cfg);
}

// A connection storm (connects as fast as the kernel takes them, every one
// held open) must not run the daemon out of descriptors (libzmq aborts on
// EMFILE): it stops listening near its open-files limit and listens again
// once the refused connections are gone. The daemon runs with 640
// descriptors (its caps need 544).
TEST(HostileInputTest, ConnectionStormNeverRunsTheDaemonOutOfDescriptors) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to lower the daemon's hard open-files limit";
  const std::string cfg =
      WriteConfig("storm", "[server]\nmax_connections = 8\nmax_regions = 8\n");
  DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"}, std::chrono::seconds(60),
                       [] {
                         struct rlimit lim {640, 640};
                         (void)setrlimit(RLIMIT_NOFILE, &lim);
                       });
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  struct rlimit own {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);
  const rlimit saved = own;
  own.rlim_cur = std::min<rlim_t>(own.rlim_max, 16384);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &own), 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", daemon.socket().c_str());
  std::vector<int> held;
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::seconds(4) && held.size() < 6000) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) break;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      held.push_back(fd);
    } else {
      close(fd);  // backlog full or not listening: try again
    }
  }
  const size_t connected = held.size();
  for (int fd : held) close(fd);
  (void)setrlimit(RLIMIT_NOFILE, &saved);
  std::printf("storm: %zu connections made and held in 4 s\n", connected);
  EXPECT_GT(connected, 640u) << "the storm was too weak to test anything";
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ExpectStillServing(daemon);
  EXPECT_THAT(daemon.Log(), Not(HasSubstr("Too many open files")));
  if (::testing::Test::HasFailure()) std::printf("%s\n", daemon.Log().c_str());
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  std::filesystem::remove(cfg);
}

// Every connection and region holds a descriptor and libzmq aborts when
// accept() runs out: the daemon refuses to start when the open-files limit
// cannot cover its caps.
TEST(HostileInputTest, DaemonRefusesToStartBelowTheDescriptorsItsLimitsNeed) {
  int code = -1;
  const std::string out = RunAndCapture(
      {Binary("daemon/vaed"), "--socket", "/tmp/vaed-nofile-" + std::to_string(getpid()) + "/s",
       "--intra-op-threads", "1"},
      &code, [] {
        struct rlimit lim {512, 512};
        return setrlimit(RLIMIT_NOFILE, &lim) == 0;
      });
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("open files limit is 512 (hard 512); vaed needs 4880"));
  EXPECT_THAT(out, HasSubstr("LimitNOFILE"));
}

// A process flooding garbage is quarantined; another client's decodes keep
// their latency (median within 2x of before the flood); an operator lists
// and releases the quarantine with vaectl.
TEST(HostileInputTest, FloodIsQuarantinedAndOthersKeepTheirLatency) {
  const std::string cfg = WriteConfig(
      "flood", "[quarantine]\nfault_threshold = 10\nwindow_ms = 10000\nduration_ms = 60000\n");
  DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto good = Connect(daemon, "good");
  ASSERT_NE(good, nullptr);
  Buffers b = MakeBuffers(*good, 1, 16, 16);
  auto median_ms = [&](int n) {
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      auto r = ClientProtocol::Decode(*good, Request(b));
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  (void)median_ms(5);  // warm
  const double before = median_ms(30);

  std::promise<std::string> flood_out;
  std::thread flood([&] {
    flood_out.set_value(RunAndCapture(
        {Binary("tests/integration/hostile_client"), "flood", daemon.socket(), "3000"}, nullptr,
        // A flooding client must not win by taking the CPU from the daemon
        // on a small machine: the test is about the daemon's isolation.
        [] { return nice(10) != -1; }));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double during = median_ms(30);
  flood.join();
  const std::string out = flood_out.get_future().get();
  std::printf("median decode latency: %.2f ms before, %.2f ms during the flood (ratio %.2f)\n",
              before, during, during / before);
  EXPECT_LE(during, 2.0 * before) << out;
  EXPECT_THAT(out, HasSubstr("protocol_error=10"));
  EXPECT_THAT(out, HasSubstr("quarantined=2990"));
  EXPECT_THAT(out, HasSubstr("retry_after_ms"));

  auto status = ClientProtocol::GetStatus(*good);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->quarantines(), 1u);
  EXPECT_EQ(status->quarantine_rejections(), 2990u);
  const std::string vaectl = Binary("ops/vaectl/vaectl");
  const std::string listed =
      RunAndCapture({vaectl, "--socket", daemon.socket(), "quarantine", "list"});
  EXPECT_THAT(listed, HasSubstr("hostile-flood"));
  EXPECT_THAT(listed, HasSubstr("protocol:"));
  int code = -1;
  const std::string released =
      RunAndCapture({vaectl, "--socket", daemon.socket(), "quarantine", "release", "all"}, &code);
  EXPECT_EQ(code, 0) << released;
  EXPECT_THAT(released, HasSubstr("released pid"));
  status = ClientProtocol::GetStatus(*good);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->quarantined_size(), 0);
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  std::filesystem::remove(cfg);
}

// ------------------------------------------------------------ deadlines

// A request past its deadline stops between units of work (here TAEF2
// frame batches slowed to 50 ms each), long before the decode would end.
TEST(HostileInputTest, DeadlineCancelsBetweenFrameBatchesNotAfter) {
  const std::string cfg = WriteConfig("deadline", "[executor]\nallow_fault_injection = true\n");
  DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto c = Connect(daemon, "deadline");
  ASSERT_NE(c, nullptr);
  Buffers b = MakeBuffers(*c, 40, 4, 4);  // 10 frame batches
  client::DecodeRequest req = Request(b);
  req.inject_faults = {"slow_tiles"};
  req.deadline_ms = 150;
  const auto t0 = Clock::now();
  auto r = ClientProtocol::Decode(*c, req);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("options.deadline_ms 150 passed"));
  EXPECT_THAT(r.status().message(), HasSubstr("before frame"));
  EXPECT_LT(seconds, 0.4) << "10 batches x 50 ms would take 0.5 s";
  // Without a deadline the same request completes.
  req.deadline_ms = 0;
  EXPECT_TRUE(ClientProtocol::Decode(*c, req).ok());
  auto status = ClientProtocol::GetStatus(*c);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->deadline_exceeded(), 1u);
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  std::filesystem::remove(cfg);
}

// ------------------------------------------------------------ crashes

size_t CountDevShm(const std::string& prefix) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

// Open file descriptors of `pid` on shm segments (/dev/shm/...).
size_t CountShmFds(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("/dev/shm/", 0) == 0) ++n;
  }
  return n;
}

// Lines of /proc/<pid>/maps that map a vaed shm segment.
size_t CountShmMappings(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  size_t n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/vaed-") != std::string::npos) ++n;
  }
  return n;
}

TEST(HostileInputTest, ClientKilledMidDecodeLeavesNoMappingOrSegmentInTheDaemon) {
  DaemonProcess daemon({"--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto observer = Connect(daemon, "observer");
  ASSERT_NE(observer, nullptr);
  // Other tests may create segments meanwhile: count by owner pid.
  EXPECT_EQ(CountShmMappings(daemon.pid()), 0u);
  EXPECT_EQ(CountShmFds(daemon.pid()), 0u);

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    close(pipe_fds[0]);
    const std::string victim = Binary("tests/integration/victim_client");
    execl(victim.c_str(), victim.c_str(), daemon.socket().c_str(), "16", nullptr);
    _exit(127);
  }
  close(pipe_fds[1]);
  FILE* p = fdopen(pipe_fds[0], "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof(line), p), nullptr) << daemon.Log();
  ASSERT_STREQ(line, "sending\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(CountShmMappings(daemon.pid()), 2u);  // the victim's latent and output
  EXPECT_EQ(CountShmFds(daemon.pid()), 2u);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  fclose(p);

  // The kernel closes the dead process's connection: the daemon cancels its
  // decode and unmaps at once.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    auto s = ClientProtocol::GetStatus(*observer);
    if (s.ok() && s->clients() == 1 && s->regions() == 0 && s->queue_depth() == 0 &&
        CountShmMappings(daemon.pid()) == 0 && CountShmFds(daemon.pid()) == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(CountShmMappings(daemon.pid()), 0u) << daemon.Log();
  EXPECT_EQ(CountShmFds(daemon.pid()), 0u) << daemon.Log();
  EXPECT_THAT(daemon.Log(), HasSubstr("closed its connection"));
  // The daemon creates no segment of its own; the killed client's own two
  // (named vaed-<its pid>-...) are what any dead POSIX shm user leaves
  // behind, for its supervisor to remove.
  EXPECT_EQ(CountDevShm("vaed-" + std::to_string(daemon.pid()) + "-"), 0u);
  EXPECT_EQ(CountDevShm("vaed-" + std::to_string(pid) + "-"), 2u);
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind("vaed-" + std::to_string(pid) + "-", 0) == 0) {
      std::filesystem::remove(e.path());
    }
  }
  EXPECT_EQ(CountDevShm("vaed-" + std::to_string(pid) + "-"), 0u);
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
}

// ------------------------------------------------------------ access

// A peer whose uid is not admitted is refused at connection time (by
// SO_PEERCRED, with a PERMISSION_DENIED reply) even though the file system lets it reach the socket;
// another uid in the list is served. Needs root (setuid in a child).
TEST(HostileInputTest, DisallowedUidIsRefusedAndSocketPermissionsHold) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a client under other uids";
  constexpr uid_t kAllowed = 65533, kRefused = 65534;
  constexpr gid_t kGroup = 65534;  // nogroup: lets both children reach the socket
  const std::string cfg =
      WriteConfig("access", "[server]\nsocket_group = \"65534\"\nallowed_uids = [65533]\n");
  DaemonProcess daemon({"--config", cfg});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  // The socket: mode 0660, group from server.socket_group.
  struct stat st {};
  ASSERT_EQ(stat(daemon.socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, kGroup);
  // Open the test's private directory to that group only (as /run/vaed is).
  ASSERT_EQ(chown(daemon.dir().c_str(), 0, kGroup), 0);
  ASSERT_EQ(chmod(daemon.dir().c_str(), 0750), 0);

  auto run_as = [&](uid_t uid) {
    int code = -1;
    const std::string out = RunAndCapture(
        {Binary("tests/integration/hostile_client"), "connect", daemon.socket()}, &code,
        [&] { return setgroups(0, nullptr) == 0 && setgid(kGroup) == 0 && setuid(uid) == 0; });
    return std::make_pair(code, out);
  };
  const auto refused = run_as(kRefused);
  EXPECT_EQ(refused.first, 1) << refused.second;
  EXPECT_THAT(refused.second, HasSubstr("error: permission_denied"));
  EXPECT_THAT(refused.second, HasSubstr("peer uid 65534"));
  const auto admitted = run_as(kAllowed);
  EXPECT_EQ(admitted.first, 0) << admitted.second << daemon.Log();
  EXPECT_THAT(admitted.second, HasSubstr("connected"));

  auto c = Connect(daemon, "root");  // uid 0 is always admitted
  ASSERT_NE(c, nullptr);
  auto status = ClientProtocol::GetStatus(*c);
  ASSERT_TRUE(status.ok());
  EXPECT_GE(status->rejected_connections(), 1u);
  EXPECT_THAT(daemon.Log(), HasSubstr("access: refused a connection: peer uid 65534"));
  // Client segments are created 0600: the owner only (a daemon of the same
  // uid, or root, needs no more).
  Buffers b = MakeBuffers(*c, 1, 4, 4);
  ASSERT_EQ(stat(("/dev/shm/" + b.in->name()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ExpectStillServing(daemon);
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  std::filesystem::remove(cfg);
}

// The deployment of systemd/: vaed runs as its own user; a worker of
// another uid in the daemon's group connects and decodes (registration
// grants the daemon's uid, and only it, access to the segments by a POSIX
// ACL: another member of the group cannot open them). Needs root to run
// both under other uids.
TEST(HostileInputTest, NonRootDaemonServesAClientOfAnotherUidInItsGroup) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run daemon and client under other uids";
  constexpr uid_t kDaemonUid = 5600, kClientUid = 5601;
  constexpr gid_t kDaemonGid = 5600, kClientGid = 5601;
  char tmpl[] = "/tmp/vaed-users-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  ASSERT_EQ(chmod(root.c_str(), 0755), 0);
  const std::string run = root + "/run";
  ASSERT_EQ(mkdir(run.c_str(), 0750), 0);
  ASSERT_EQ(chown(run.c_str(), kDaemonUid, kDaemonGid), 0);
  const std::string socket = run + "/vaed.sock", log = root + "/vaed.log";
  const std::string config = root + "/vaed.toml";
  {
    std::ofstream(config) << "[server]\nmax_connections_per_uid = 2\n";
    ASSERT_EQ(chmod(config.c_str(), 0644), 0);
  }
  const pid_t daemon = fork();
  if (daemon == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (freopen(log.c_str(), "w", stderr) == nullptr) _exit(125);
    dup2(fileno(stderr), fileno(stdout));
    if (setgroups(0, nullptr) != 0 || setgid(kDaemonGid) != 0 || setuid(kDaemonUid) != 0) {
      _exit(126);
    }
    const std::string bin = Binary("daemon/vaed");
    execl(bin.c_str(), bin.c_str(), "--socket", socket.c_str(), "--intra-op-threads", "1",
          "--config", config.c_str(), nullptr);
    _exit(127);
  }
  struct stat st {};
  for (int i = 0; i < 600 && stat(socket.c_str(), &st) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(stat(socket.c_str(), &st), 0) << "the daemon did not start";
  EXPECT_EQ(st.st_uid, kDaemonUid);
  EXPECT_EQ(st.st_mode & 0777, 0660u);

  int code = -1;
  const std::string out = RunAndCapture(
      {Binary("ops/vaectl/vaectl"), "--socket", socket, "decode", "--random-latent", "1,32,4,4",
       "--model", "demo", "--format", "none"},
      &code, [] {
        const gid_t groups[] = {kDaemonGid};
        return setgroups(1, groups) == 0 && setgid(kClientGid) == 0 && setuid(kClientUid) == 0;
      });
  EXPECT_EQ(code, 0) << out;

  // server.max_connections_per_uid = 2: the client uid's third connection
  // is refused naming the limit (root, an admin, is not limited).
  const std::string third = RunAndCapture(
      {"/usr/bin/python3", "-c",
       "import socket,time\n"
       "c=[socket.socket(socket.AF_UNIX) for _ in range(3)]\n"
       "[s.connect('" + socket + "') or time.sleep(0.2) for s in c]\n"
       "c[2].settimeout(5)\n"
       "print(c[2].recv(4096))\n"},
      &code, [] {
        const gid_t groups[] = {kDaemonGid};
        return setgroups(1, groups) == 0 && setgid(kClientGid) == 0 && setuid(kClientUid) == 0;
      });
  EXPECT_EQ(code, 0) << third;
  EXPECT_THAT(third, HasSubstr("uid 5601 already has 2 connections "
                               "(server.max_connections_per_uid = 2)"));

  // A registered segment of this (root) process: the daemon's uid decodes
  // from it, a third uid in the daemon's group cannot open it.
  {
    auto c = client::Client::Connect({.socket = socket, .client_name = "acl"});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    Buffers b = MakeBuffers(**c, 1, 4, 4);
    auto r = ClientProtocol::Decode(**c, Request(b));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    constexpr uid_t kNeighbourUid = 5602;
    int open_errno = -1;
    const std::string probe = RunAndCapture(
        {"/bin/sh", "-c", "cat /dev/shm/" + b.in->name() + " > /dev/null && echo opened"},
        &open_errno, [] {
          const gid_t groups[] = {kDaemonGid};
          return setgroups(1, groups) == 0 && setgid(kDaemonGid) == 0 &&
                 setuid(kNeighbourUid) == 0;
        });
    EXPECT_NE(open_errno, 0) << probe;
    EXPECT_THAT(probe, HasSubstr("Permission denied"));
  }

  std::ifstream in(log);
  const std::string daemon_log((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(code, 0) << out << daemon_log;
  int status = 0;
  kill(daemon, SIGTERM);
  ASSERT_EQ(waitpid(daemon, &status, 0), daemon);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon_log;
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace vaed
