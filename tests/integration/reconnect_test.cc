// Acceptance: liveness and transparent reconnect of the client library
// against real `vaed` processes: a daemon restarted on the same socket, a
// daemon killed while a decode is in flight, a daemon gone for good, and a
// daemon that dropped a silent client (kUnknownClient).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <future>
#include <thread>

#include "tests/common/daemon_process.h"
#include "tests/common/test_paths.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Client settings that find a dead daemon within about 0.8 s (the request's
// interval of silence, then 3 unanswered heartbeats 200 ms apart).
constexpr int kWaitHeartbeatMs = 200;
constexpr int kLivenessMs = 4 * kWaitHeartbeatMs;

// A `vaed` process on a socket path the test chooses, so that a second one
// can take over the path of a killed first one, as systemd's restart does.
class VaedOnSocket {
 public:
  // Starts `vaed --socket <socket> <extra_args>` and waits until it logs
  // that it serves (a stale socket file left at `socket` by a killed daemon
  // says nothing: tmpfs may even give the new socket the same inode).
  // Check ok() afterwards.
  VaedOnSocket(const std::string& socket, const std::vector<std::string>& extra_args)
      : log_(socket + "." + std::to_string(++starts_) + ".log") {
    std::vector<std::string> args = {std::string(VAED_BINARY_DIR) + "/daemon/vaed", "--socket",
                                     socket};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      FILE* f = freopen(log_.c_str(), "w", stderr);
      (void)f;
      dup2(fileno(stderr), fileno(stdout));
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      if (Log().find("serving ipc://" + socket) != std::string::npos) {
        ok_ = true;
        return;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
  ~VaedOnSocket() { Kill(); }
  VaedOnSocket(const VaedOnSocket&) = delete;
  VaedOnSocket& operator=(const VaedOnSocket&) = delete;

  bool ok() const { return ok_; }
  // SIGKILL, as a crash: the socket file stays behind.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  static inline int starts_ = 0;
  std::string log_;
  pid_t pid_ = -1;
  bool ok_ = false;
};

// A private directory for a socket path, removed afterwards.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/vaed-reconnect-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string socket() const { return path_ + "/vaed.sock"; }

 private:
  std::string path_;
};

// A demo-model request in two registered regions: latent float32
// [frames, 32, h, w] (seeded values) -> uint8 [frames, 8h, 8w, 3].
struct DemoJob {
  std::vector<int64_t> latent_shape, output_shape;
  std::unique_ptr<client::SharedRegion> in, out;
  uint64_t in_id = 0, out_id = 0;

  static std::unique_ptr<DemoJob> Create(client::Client& c, int64_t frames, int64_t h, int64_t w) {
    auto job = std::make_unique<DemoJob>();
    job->latent_shape = {frames, 32, h, w};
    job->output_shape = {frames, 8 * h, 8 * w, 3};
    const uint64_t latent_floats = uint64_t(frames * 32 * h * w);
    auto in = client::SharedRegion::Create(latent_floats * 4);
    auto out = client::SharedRegion::Create(uint64_t(frames * 8 * h * 8 * w * 3));
    if (!in.ok() || !out.ok()) return nullptr;
    job->in = std::move(in).value();
    job->out = std::move(out).value();
    float* f = reinterpret_cast<float*>(job->in->data());
    for (uint64_t i = 0; i < latent_floats; ++i) f[i] = std::sin(0.37f * float(i % 9973));
    auto in_id = c.RegisterRegion(*job->in);
    auto out_id = c.RegisterRegion(*job->out);
    if (!in_id.ok() || !out_id.ok()) return nullptr;
    job->in_id = *in_id;
    job->out_id = *out_id;
    return job;
  }

  client::DecodeRequest Request() const {
    return {.model = "demo",
            .latent = {in_id, 0, DType::kFloat32, latent_shape},
            .output = {out_id, 0, DType::kUInt8, output_shape}};
  }
  std::vector<uint8_t> Output() const { return {out->data(), out->data() + out->size()}; }
  void ClearOutput() { std::memset(out->data(), 0, out->size()); }
};

// This client's entry in the daemon's status, or nullptr.
const v1::ClientEntry* FindClient(const v1::StatusReply& s, uint64_t client_id) {
  for (const auto& e : s.client_list()) {
    if (e.client_id() == client_id) return &e;
  }
  return nullptr;
}

client::ClientOptions Options(const std::string& socket, const std::string& name) {
  client::ClientOptions o;
  o.socket = socket;
  o.client_name = name;
  o.reconnect_timeout_ms = 20000;
  o.wait_heartbeat_interval_ms = kWaitHeartbeatMs;
  return o;
}

TEST(ReconnectTest, RestartedDaemonIsReconnectedAndRegionsReregistered) {
  TempDir dir;
  const std::vector<std::string> args = {"--intra-op-threads", "1"};
  auto first = std::make_unique<VaedOnSocket>(dir.socket(), args);
  ASSERT_TRUE(first->ok()) << first->Log();
  auto c = client::Client::Connect(Options(dir.socket(), "restart"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto job = DemoJob::Create(**c, 2, 8, 8);
  ASSERT_NE(job, nullptr);
  auto before = ClientProtocol::Decode(**c, job->Request());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const std::vector<uint8_t> expected = job->Output();

  first->Kill();
  VaedOnSocket second(dir.socket(), args);
  ASSERT_TRUE(second.ok()) << second.Log();
  job->ClearOutput();
  auto after = ClientProtocol::Decode(**c, job->Request());
  ASSERT_TRUE(after.ok()) << after.status().ToString() << "\n" << second.Log();
  EXPECT_EQ(job->Output(), expected);
  EXPECT_EQ((*c)->reconnects(), 1u);

  // The new daemon knows this client under its new id, with both regions.
  auto s = ClientProtocol::GetStatus(**c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->requests_served(), 1u);
  const v1::ClientEntry* me = FindClient(*s, (*c)->client_id());
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->name(), "restart");
  EXPECT_EQ(me->regions(), 2u);
  EXPECT_EQ(ClientProtocol::Hello(**c).client_id(), (*c)->client_id());
  // The ids handed out before the restart still work for unregistering.
  EXPECT_TRUE((*c)->UnregisterRegion(job->in_id).ok());
  s = ClientProtocol::GetStatus(**c);
  ASSERT_TRUE(s.ok());
  ASSERT_NE(FindClient(*s, (*c)->client_id()), nullptr);
  EXPECT_EQ(FindClient(*s, (*c)->client_id())->regions(), 1u);
  EXPECT_EQ((*c)->reconnects(), 1u);
}

// The decode is in flight (the daemon's status says so) when the daemon is
// killed, so the outcome is deterministic: liveness finds the daemon gone,
// the library reconnects to the restarted one and sends the decode once
// more, which succeeds and writes the whole output.
TEST(ReconnectTest, DecodeInFlightWhenDaemonDiesIsRetriedOnceOnTheRestartedDaemon) {
  TempDir dir;
  const std::vector<std::string> args = {"--intra-op-threads", "1"};
  auto first = std::make_unique<VaedOnSocket>(dir.socket(), args);
  ASSERT_TRUE(first->ok()) << first->Log();
  auto c = client::Client::Connect(Options(dir.socket(), "in-flight"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  client::ClientOptions observer_options = Options(dir.socket(), "observer");
  observer_options.reconnect_timeout_ms = 0;
  observer_options.heartbeats = false;
  auto observer = client::Client::Connect(observer_options);
  ASSERT_TRUE(observer.ok()) << observer.status().ToString();
  auto job = DemoJob::Create(**c, 2, 32, 32);  // 0.5 to 2 s on one thread
  ASSERT_NE(job, nullptr);
  const uint64_t first_client_id = (*c)->client_id();

  auto decode =
      std::async(std::launch::async, [&] { return ClientProtocol::Decode(**c, job->Request()); });
  bool in_flight = false;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!in_flight && Clock::now() < deadline) {
    auto s = ClientProtocol::GetStatus(**observer);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const v1::ClientEntry* e = FindClient(*s, first_client_id);
    in_flight = e != nullptr && e->in_flight() == 1;
    if (!in_flight) std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(in_flight) << first->Log();
  observer->reset();
  first->Kill();
  ASSERT_NE(decode.wait_for(milliseconds(0)), std::future_status::ready)
      << "the decode finished before the daemon was killed; make it longer";
  VaedOnSocket second(dir.socket(), args);
  ASSERT_TRUE(second.ok()) << second.Log();

  auto r = decode.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << second.Log();
  EXPECT_EQ(r->frames(), 2u);
  EXPECT_EQ((*c)->reconnects(), 1u);
  const std::vector<uint8_t> retried = job->Output();
  // Exactly one decode ran on the new daemon: the retry.
  auto s = ClientProtocol::GetStatus(**c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->requests_served(), 1u);
  EXPECT_EQ(s->requests_failed(), 0u);

  // The retry wrote the whole output: a fresh decode gives the same bytes.
  job->ClearOutput();
  auto again = ClientProtocol::Decode(**c, job->Request());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(job->Output(), retried);
  EXPECT_EQ((*c)->reconnects(), 1u);
}

// Streamed output: once a range was delivered, a retry on the
// restarted daemon would write the delivered frames again, so the decode
// is not retried: it fails at once with kUnavailable saying how far the
// output is final (without waiting for the daemon to come back), the next
// call reconnects, and the new daemon decodes nothing.
TEST(ReconnectTest, StreamedDecodeThatDeliveredARangeIsNotRetriedOnTheRestartedDaemon) {
  TempDir dir;
  const std::vector<std::string> args = {"--intra-op-threads", "1"};
  auto first = std::make_unique<VaedOnSocket>(dir.socket(), args);
  ASSERT_TRUE(first->ok()) << first->Log();
  auto c = client::Client::Connect(Options(dir.socket(), "streamed"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto job = DemoJob::Create(**c, 40, 32, 32);  // 10 frame batches of 4
  ASSERT_NE(job, nullptr);

  std::promise<uint64_t> delivered;
  std::promise<void> killed;
  std::shared_future<void> killed_future = killed.get_future().share();
  int calls = 0;
  client::DecodeRequest request = job->Request();
  request.final_range = [&](const client::FinalRange& r) {
    if (++calls > 1) return;
    delivered.set_value(r.end);
    killed_future.wait();  // the daemon dies before this client reads on
  };
  auto decode =
      std::async(std::launch::async, [&] { return ClientProtocol::Decode(**c, request); });
  std::future<uint64_t> first_end = delivered.get_future();
  ASSERT_EQ(first_end.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << first->Log();
  const uint64_t end = first_end.get();
  first->Kill();
  killed.set_value();
  ASSERT_GT(end, 0u);
  ASSERT_LT(end, 40u);
  // Fails before any daemon is back (within the liveness check, not the
  // 20 s reconnect timeout).
  ASSERT_EQ(decode.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = decode.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("not retried"));
  EXPECT_EQ(r.status().final_frames(), end);
  EXPECT_EQ(calls, 1);
  VaedOnSocket second(dir.socket(), args);
  ASSERT_TRUE(second.ok()) << second.Log();
  auto s = ClientProtocol::GetStatus(**c);  // reconnects
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->requests_served(), 0u) << "the streamed decode ran again";
  EXPECT_EQ((*c)->reconnects(), 1u);
}

TEST(ReconnectTest, DaemonGoneForGoodFailsWithUnavailableWithinTheReconnectTimeout) {
  DaemonProcess daemon({});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  client::ClientOptions options = Options(daemon.socket(), "orphan");
  options.reconnect_timeout_ms = 2000;
  auto c = client::Client::Connect(options);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto job = DemoJob::Create(**c, 1, 4, 4);
  ASSERT_NE(job, nullptr);
  ASSERT_EQ(kill(daemon.pid(), SIGKILL), 0);

  const auto start = Clock::now();
  auto r = ClientProtocol::Decode(**c, job->Request());
  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  RecordProperty("message", r.status().message());
  EXPECT_THAT(r.status().message(), HasSubstr(daemon.socket()));
  EXPECT_THAT(r.status().message(), HasSubstr("2000 ms"));
  // The reconnect budget, plus at most the time liveness takes to find the
  // daemon gone (a send on the dropped connection already fails).
  EXPECT_GE(elapsed.count(), 2000 - 100);
  EXPECT_LT(elapsed.count(), kLivenessMs + 2000 + 1500);
  EXPECT_THAT(r.status().message(), HasSubstr("did not come back"));
  EXPECT_EQ((*c)->reconnects(), 0u);
}

TEST(ReconnectTest, DroppedSilentClientIsReconnectedOnUnknownClient) {
  const std::string cfg = "/tmp/vaed-reconnect-unknown-client.toml";
  {
    std::ofstream f(cfg);
    f << "[server]\nheartbeat_interval_ms = 200\nclient_timeout_ms = 1000\n";
  }
  DaemonProcess daemon({"--config", cfg, "--intra-op-threads", "1"});
  std::remove(cfg.c_str());
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  client::ClientOptions options = Options(daemon.socket(), "silent");
  options.heartbeats = false;
  auto c = client::Client::Connect(options);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto job = DemoJob::Create(**c, 1, 6, 6);
  ASSERT_NE(job, nullptr);
  auto before = ClientProtocol::Decode(**c, job->Request());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const std::vector<uint8_t> expected = job->Output();
  const uint64_t old_id = (*c)->client_id();

  // Wait until the daemon has dropped this silent client.
  const std::string dropped = "client " + std::to_string(old_id) + " ('silent'";
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline && daemon.Log().find(dropped) == std::string::npos) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_THAT(daemon.Log(), HasSubstr(dropped));
  ASSERT_THAT(daemon.Log(), HasSubstr("dropped"));

  job->ClearOutput();
  auto after = ClientProtocol::Decode(**c, job->Request());
  ASSERT_TRUE(after.ok()) << after.status().ToString() << "\n" << daemon.Log();
  EXPECT_EQ(job->Output(), expected);
  EXPECT_EQ((*c)->reconnects(), 1u);
  EXPECT_NE((*c)->client_id(), old_id);
  auto s = ClientProtocol::GetStatus(**c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->clients(), 1u);
  const v1::ClientEntry* me = FindClient(*s, (*c)->client_id());
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->regions(), 2u);
}

// With reconnect off the library behaves as before: the daemon's
// kUnknownClient comes back to the caller.
TEST(ReconnectTest, ReconnectTimeoutZeroReturnsUnknownClient) {
  const std::string cfg = "/tmp/vaed-reconnect-off.toml";
  {
    std::ofstream f(cfg);
    f << "[server]\nheartbeat_interval_ms = 200\nclient_timeout_ms = 600\n";
  }
  DaemonProcess daemon({"--config", cfg});
  std::remove(cfg.c_str());
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  client::ClientOptions options = Options(daemon.socket(), "no-reconnect");
  options.heartbeats = false;
  options.reconnect_timeout_ms = 0;
  auto c = client::Client::Connect(options);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string dropped = "client " + std::to_string((*c)->client_id()) + " ('no-reconnect'";
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline && daemon.Log().find(dropped) == std::string::npos) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  auto s = ClientProtocol::GetStatus(**c);
  EXPECT_EQ(s.status().code(), StatusCode::kUnknownClient) << s.status().ToString();
  EXPECT_EQ((*c)->reconnects(), 0u);
}

}  // namespace
}  // namespace vaed
