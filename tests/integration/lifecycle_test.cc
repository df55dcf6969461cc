// Acceptance: the daemon's life cycle through real processes: a client
// killed mid-request, SIGTERM shutdown, the C ABI, and the command line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/common/daemon_process.h"
#include "tests/common/test_paths.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/vaed_c.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::DaemonProcess;

// Polls the daemon's status until `pred` holds or `timeout` passes.
template <typename Pred>
bool WaitForStatus(client::Client& c, Pred pred, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto s = ClientProtocol::GetStatus(c);
    if (s.ok() && pred(*s)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(LifecycleTest, ClientKilledMidRequestIsDroppedAndDaemonKeepsServing) {
  DaemonProcess daemon({"--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  auto observer = client::Client::Connect({.socket = daemon.socket(), .client_name = "observer"});
  ASSERT_TRUE(observer.ok());

  // The victim: a separate client process whose pid we know.
  const std::string victim = std::string(VAED_BINARY_DIR) + "/tests/integration/victim_client";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    close(pipe_fds[0]);
    execl(victim.c_str(), victim.c_str(), daemon.socket().c_str(), "2", nullptr);
    _exit(127);
  }
  close(pipe_fds[1]);
  FILE* p = fdopen(pipe_fds[0], "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof(line), p), nullptr) << daemon.Log();
  ASSERT_STREQ(line, "sending\n");
  // The victim's decode is queued or running now; kill it without warning.
  ASSERT_TRUE(WaitForStatus(
      **observer, [](const v1::StatusReply& s) { return s.clients() == 2 && s.regions() == 2; },
      std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(wstatus)) << "the victim finished before it was killed";
  fclose(p);
  // A killed client cannot unlink its segments; clean up after it.
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind("vaed-" + std::to_string(pid) + "-", 0) == 0) {
      std::filesystem::remove(e.path());
    }
  }

  // Its regions are unmapped once the daemon sees its connection close.
  EXPECT_TRUE(WaitForStatus(
      **observer, [](const v1::StatusReply& s) { return s.clients() == 1 && s.regions() == 0; },
      std::chrono::seconds(60)))
      << daemon.Log();
  // Whichever the daemon sees first drops it: the connection's close
  // notice, or the expiry sweep finding the process gone (the victim is
  // reaped above, so its pid is free at once; seen on a loaded machine).
  EXPECT_THAT(daemon.Log(), AnyOf(HasSubstr("closed its connection"),
                                  HasSubstr("process " + std::to_string(pid) + " has exited")));

  // And it keeps serving.
  auto in = client::SharedRegion::Create(32 * 2 * 2 * 4);
  auto out = client::SharedRegion::Create(16 * 16 * 3);
  ASSERT_TRUE(in.ok() && out.ok());
  auto in_id = (*observer)->RegisterRegion(**in);
  auto out_id = (*observer)->RegisterRegion(**out);
  auto r =
      ClientProtocol::Decode(**observer, {.model = "",
                                          .latent = {*in_id, 0, DType::kFloat32, {1, 32, 2, 2}},
                                          .output = {*out_id, 0, DType::kUInt8, {1, 16, 16, 3}}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  observer->reset();
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
}

TEST(LifecycleTest, SigtermStopsCleanlyAndRemovesTheSocket) {
  DaemonProcess daemon({});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  const std::string socket = daemon.socket();
  {
    auto c = client::Client::Connect({.socket = socket});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(ClientProtocol::GetStatus(**c).ok());
  }
  EXPECT_EQ(daemon.Terminate(std::chrono::seconds(20)), 0) << daemon.Log();
  EXPECT_FALSE(std::filesystem::exists(socket));
  EXPECT_THAT(daemon.Log(), HasSubstr("stopped"));
}

// The start-up log says how MKL was set up: CNR AUTO, set by vaed before
// any decode, unless MKL_CBWR chooses another; VML initialised.
TEST(LifecycleTest, StartUpLogNamesMklsReproducibleMode) {
  {
    DaemonProcess daemon({});
    ASSERT_TRUE(daemon.ok()) << daemon.Log();
    EXPECT_EQ(daemon.Terminate(std::chrono::seconds(20)), 0) << daemon.Log();
    EXPECT_THAT(daemon.Log(), HasSubstr("MKL numerical reproducibility: AUTO (set by vaed"));
    EXPECT_THAT(daemon.Log(), HasSubstr("VML initialised"));
  }
  DaemonProcess daemon({}, std::chrono::seconds(60),
                       [] { setenv("MKL_CBWR", "COMPATIBLE", 1); });
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  EXPECT_EQ(daemon.Terminate(std::chrono::seconds(20)), 0) << daemon.Log();
  EXPECT_THAT(daemon.Log(), HasSubstr("MKL_CBWR=COMPATIBLE (from the environment)"));
}

TEST(LifecycleTest, DropsSilentClientAfterClientTimeout) {
  const std::string cfg = "/tmp/vaed-lifecycle-timeout.toml";
  {
    std::ofstream f(cfg);
    f << "[server]\nheartbeat_interval_ms = 200\nclient_timeout_ms = 1000\n";
  }
  DaemonProcess daemon({"--config", cfg});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  // No heartbeats, and no reconnect: the drop is visible to the caller.
  auto silent = client::Client::Connect({.socket = daemon.socket(),
                                         .client_name = "silent",
                                         .heartbeats = false,
                                         .reconnect_timeout_ms = 0});
  auto chatty = client::Client::Connect({.socket = daemon.socket(), .client_name = "chatty"});
  ASSERT_TRUE(silent.ok() && chatty.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  // The heartbeating client is kept, the silent one was dropped.
  auto s = ClientProtocol::GetStatus(**chatty);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->clients(), 1u);
  auto dropped = ClientProtocol::GetStatus(**silent);
  EXPECT_EQ(dropped.status().code(), StatusCode::kUnknownClient) << dropped.status().ToString();
  std::remove(cfg.c_str());
}

// Reads every datagram that arrives on `fd` within `timeout`.
std::string ReadNotifications(int fd, std::chrono::milliseconds timeout) {
  std::string all;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      all.append(buf, size_t(n));
      all += '\n';
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return all;
}

// A datagram socket at `path` (replacing what is there) for NOTIFY_SOCKET;
// -1 on error.
int BindNotifySocket(const std::string& path) {
  std::remove(path.c_str());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The sd_notify protocol as systemd speaks it: a datagram socket named by
// NOTIFY_SOCKET, and WATCHDOG_USEC for the watchdog interval.
TEST(LifecycleTest, NotifiesSystemdReadyWatchdogAndStopping) {
  const std::string path = "/tmp/vaed-notify-test.sock";
  const int fd = BindNotifySocket(path);
  ASSERT_GE(fd, 0);
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  setenv("WATCHDOG_USEC", "400000", 1);  // 0.4 s: pings every <= 0.2 s
  DaemonProcess daemon({});
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  const std::string running = ReadNotifications(fd, std::chrono::milliseconds(1500));
  EXPECT_THAT(running, HasSubstr("READY=1"));
  EXPECT_THAT(running, HasSubstr("WATCHDOG=1"));
  EXPECT_THAT(running, ::testing::Not(HasSubstr("STOPPING=1")));
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
  EXPECT_THAT(ReadNotifications(fd, std::chrono::milliseconds(200)), HasSubstr("STOPPING=1"));
  close(fd);
  std::remove(path.c_str());
}

// A sticky device error (CUDA "illegal memory access"; injected here, the
// CPU build has no device) is not recoverable in-process: the daemon says
// so in the reply and in status, stops feeding the watchdog, and exits
// non-zero so that systemd (Restart=on-failure) restarts it.
TEST(LifecycleTest, StickyDeviceErrorMakesTheDaemonUnhealthyAndExitNonZero) {
  const std::string path = "/tmp/vaed-notify-fatal-" + std::to_string(getpid()) + ".sock";
  const int fd = BindNotifySocket(path);
  ASSERT_GE(fd, 0);
  const std::string cfg = "/tmp/vaed-fatal-" + std::to_string(getpid()) + ".toml";
  std::ofstream(cfg) << "[executor]\nallow_fault_injection = true\n";
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  setenv("WATCHDOG_USEC", "200000", 1);  // pings every <= 0.1 s while healthy
  DaemonProcess daemon({"--config", cfg});
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  EXPECT_THAT(ReadNotifications(fd, std::chrono::milliseconds(300)), HasSubstr("WATCHDOG=1"));

  auto c = client::Client::Connect({.socket = daemon.socket(), .client_name = "fatal"});
  ASSERT_TRUE(c.ok());
  auto in = client::SharedRegion::Create(32 * 2 * 2 * 4);
  auto out = client::SharedRegion::Create(16 * 16 * 3);
  ASSERT_TRUE(in.ok() && out.ok());
  auto in_id = (*c)->RegisterRegion(**in);
  auto out_id = (*c)->RegisterRegion(**out);
  ASSERT_TRUE(in_id.ok() && out_id.ok());
  client::DecodeRequest req{.model = "",
                            .latent = {*in_id, 0, DType::kFloat32, {1, 32, 2, 2}},
                            .output = {*out_id, 0, DType::kUInt8, {1, 16, 16, 3}}};
  req.inject_faults = {"device_fatal"};
  auto r = ClientProtocol::Decode(**c, req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("illegal memory access"));
  // Unhealthy at once, and decodes are refused.
  auto status = ClientProtocol::GetStatus(**c);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_FALSE(status->healthy());
  EXPECT_THAT(status->health(), HasSubstr("sticky device error"));
  req.inject_faults.clear();
  auto refused = ClientProtocol::Decode(**c, req);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
  // No watchdog ping after the error; the daemon exits with status 1.
  const std::string after = ReadNotifications(fd, std::chrono::milliseconds(1500));
  EXPECT_THAT(after, HasSubstr("STATUS=unhealthy"));
  const size_t unhealthy_at = after.find("STATUS=unhealthy");
  EXPECT_EQ(after.find("WATCHDOG=1", unhealthy_at), std::string::npos) << after;
  const int wstatus = daemon.Terminate(std::chrono::seconds(5));
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 1) << wstatus << daemon.Log();
  EXPECT_THAT(daemon.Log(), HasSubstr("exiting so that systemd restarts vaed"));
  close(fd);
  std::remove(path.c_str());
  std::remove(cfg.c_str());
}

TEST(CApiTest, DecodesThroughTheCAbi) {
  DaemonProcess daemon({});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  char err[256] = {};
  vaed_client* c = nullptr;
  ASSERT_EQ(vaed_connect(daemon.socket().c_str(), "c-abi", &c, err, sizeof(err)), 0) << err;
  vaed_tensor latent{};
  latent.dtype = VAED_DTYPE_FLOAT32;
  latent.ndim = 4;
  const int64_t shape[4] = {2, 32, 3, 3};
  std::memcpy(latent.shape, shape, sizeof(shape));
  vaed_decode_result plan{};
  ASSERT_EQ(vaed_plan_decode(c, nullptr, &latent, VAED_OUTPUT_UINT8_NHWC, &plan, err,
                             sizeof(err)),
            0)
      << err;
  EXPECT_EQ(plan.output_bytes, 2u * 24 * 24 * 3);

  vaed_region *in = nullptr, *out = nullptr;
  ASSERT_EQ(vaed_region_create(2 * 32 * 3 * 3 * 4, &in, err, sizeof(err)), 0) << err;
  ASSERT_EQ(vaed_region_create(plan.output_bytes, &out, err, sizeof(err)), 0) << err;
  ASSERT_EQ(vaed_register_region(c, in, &latent.region_id, err, sizeof(err)), 0) << err;
  vaed_tensor output{};
  ASSERT_EQ(vaed_register_region(c, out, &output.region_id, err, sizeof(err)), 0) << err;
  output.dtype = VAED_DTYPE_UINT8;
  output.ndim = plan.output_ndim;
  std::memcpy(output.shape, plan.output_shape, sizeof(plan.output_shape));
  vaed_decode_result result{};
  ASSERT_EQ(vaed_decode(c, "demo", &latent, &output, VAED_OUTPUT_UINT8_NHWC, &result, err,
                        sizeof(err)),
            0)
      << err;
  EXPECT_EQ(result.frames, 2u);
  EXPECT_EQ(result.demo_weights, 1);
  ASSERT_GT(result.num_timings, 0);
  bool has_decode = false;
  for (int i = 0; i < result.num_timings; ++i) {
    has_decode |= std::string(result.timings[i].component) == "decode";
  }
  EXPECT_TRUE(has_decode);

  // An error carries its code and message.
  latent.shape[1] = 7;
  EXPECT_EQ(vaed_decode(c, "demo", &latent, &output, VAED_OUTPUT_UINT8_NHWC, &result, err,
                        sizeof(err)),
            static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(err), HasSubstr("latent.shape[1]"));

  vaed_region_free(in);
  vaed_region_free(out);
  vaed_client_free(c);
  EXPECT_EQ(daemon.Terminate(), 0);
}

TEST(CommandLineTest, HelpDescribesTheFlags) {
  testing::RunResult r = testing::RunVaed({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--socket"));
  EXPECT_THAT(r.output, HasSubstr("--taef2-weights"));
}

TEST(CommandLineTest, PrintConfigShowsEmbeddedDefaultsWithOverrides) {
  testing::RunResult r =
      testing::RunVaed({"--print-config", "--intra-op-threads", "3", "--socket", "/tmp/x.sock"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("intra_op_threads = 3"));
  EXPECT_THAT(r.output, HasSubstr("/tmp/x.sock"));
  EXPECT_THAT(r.output, HasSubstr("kind = 'demo'"));
}

TEST(CommandLineTest, RejectsBadConfigNamingTheKey) {
  const std::string cfg = "/tmp/vaed-bad-config.toml";
  {
    std::ofstream f(cfg);
    f << "[executor]\nintra_op_threads = 0\n";
  }
  testing::RunResult r = testing::RunVaed({"--config", cfg});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("executor.intra_op_threads is 0"));
  {
    std::ofstream f(cfg);
    f << "[server]\nsokcet = \"/tmp/a\"\n";
  }
  r = testing::RunVaed({"--config", cfg});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("server.sokcet is not a known key"));
  std::remove(cfg.c_str());
}

// Regression: a socket directory with the wrong mode was reported only
// after the models' weights had loaded (minutes for the full model). The
// weights here are a FIFO: opening it blocks until a writer comes, so a
// daemon that reads weights before checking the socket directory hangs
// until the timeout instead of exiting at once.
TEST(CommandLineTest, RegressionABadSocketDirectoryIsRefusedBeforeAnyWeightFileIsOpened) {
  char dir_template[] = "/tmp/vaed-open-dir-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const std::string fifo = dir + "/weights.safetensors";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto started = std::chrono::steady_clock::now();
  testing::RunResult r = testing::RunVaed(
      {"--socket", dir + "/vaed.sock", "--model", "t=taef2:" + fifo, "--default-model", "t"},
      std::chrono::seconds(30));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(dir));
  EXPECT_LT(seconds, 20.0) << "the daemon waited on the weights before checking the socket";
  std::filesystem::remove_all(dir);
}

TEST(CommandLineTest, ModelFilesAreCheckedBeforeLoadingNamingTheKey) {
  char dir_template[] = "/tmp/vaed-files-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  testing::RunResult missing = testing::RunVaed(
      {"--socket", dir + "/vaed.sock", "--model", "t=taef2:" + dir + "/absent.safetensors"});
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("models.entry[1].weights "));
  EXPECT_THAT(missing.output, HasSubstr("does not exist"));
  testing::RunResult directory =
      testing::RunVaed({"--socket", dir + "/vaed.sock", "--model", "t=taef2:" + dir});
  EXPECT_EQ(directory.exit_code, 1) << directory.output;
  EXPECT_THAT(directory.output, HasSubstr("is not a regular file"));
  std::filesystem::remove_all(dir);
}

// The start-up file check named the C++ members (models.entry[1].weights_path)
// instead of the TOML keys an operator writes (weights, audio_weights, ...).
TEST(CommandLineTest, RegressionAMissingModelFileIsNamedByItsTomlKey) {
  char dir_template[] = "/tmp/vaed-files-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string config = dir + "/vaed.toml";
  std::ofstream(config) << "[[models.entry]]\nname = \"a\"\nkind = \"h3_audio\"\n"
                           "audio_weights = \"" << dir << "/absent.safetensors\"\n";
  testing::RunResult r = testing::RunVaed({"--socket", dir + "/vaed.sock", "--config", config});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("models.entry[0].audio_weights '"));
  EXPECT_THAT(r.output, Not(HasSubstr("audio_weights_path")));
  std::filesystem::remove_all(dir);
}

TEST(CommandLineTest, FailsToStartOnMissingModelWeights) {
  // A private socket directory: /tmp itself (mode 1777) is refused first.
  char dir_template[] = "/tmp/vaed-missing-weights-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  testing::RunResult r = testing::RunVaed(
      {"--socket", dir + "/vaed.sock", "--model", "taef2=taef2:/nonexistent.st"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("/nonexistent.st"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vaed
