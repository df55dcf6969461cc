// `vaectl top` end to end: the built vaectl under a pseudo-terminal
// (forkpty) against the built daemon with the demo model, as an operator
// would run it.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tests/common/daemon_process.h"
#include "tests/common/test_paths.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kClear = "\x1b[H\x1b[2J";

// The daemon for these tests: demo model only, its Prometheus endpoint on a
// free port so parallel tests never collide on 9464.
std::vector<std::string> DaemonArgs() {
  return {"--intra-op-threads", "1", "--metrics-address", "127.0.0.1:0"};
}

size_t Count(const std::string& text, std::string_view what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

// What the last frame drew: the text after the last clear-screen.
std::string LastFrame(const std::string& screen) {
  const size_t pos = screen.rfind(kClear);
  return pos == std::string::npos ? screen : screen.substr(pos + kClear.size());
}

std::vector<std::string> Row(const std::string& frame, const std::string& first) {
  return vaed::ops_test::TableRow(frame, first);
}

// vaectl running with a pseudo-terminal (120 x 50) as its stdin, stdout and
// stderr. Killed by the destructor if still running.
class PtyVaectl {
 public:
  explicit PtyVaectl(const std::vector<std::string>& args) {
    winsize size{};
    size.ws_col = 120;
    size.ws_row = 50;
    std::vector<std::string> all = {VAECTL_PATH};
    all.insert(all.end(), args.begin(), args.end());
    pid_ = forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~PtyVaectl() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }

  bool started() const { return pid_ > 0 && master_ >= 0; }
  const std::string& screen() const { return screen_; }
  int master() const { return master_; }

  // Reads the terminal until `text` has appeared `times` times in all
  // output so far, or `timeout` passed, or vaectl closed the terminal.
  bool ReadUntil(std::string_view text, size_t times, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Count(screen_, text) < times) {
      if (!ReadSome(deadline)) return Count(screen_, text) >= times;
    }
    return true;
  }

  void Type(const std::string& keys) {
    const ssize_t n = write(master_, keys.data(), keys.size());
    (void)n;
  }
  void Signal(int signo) { kill(pid_, signo); }

  // Reads until vaectl exits (or `timeout`: then it is killed and
  // std::nullopt returned); its exit status otherwise.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (ReadSome(deadline)) {
    }
    int status = 0;
    while (Clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ReadSome(Clock::now() + std::chrono::milliseconds(100));
        if (!WIFEXITED(status)) return -WTERMSIG(status);
        return WEXITSTATUS(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  // Whether the child is still running.
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }

 private:
  // One read; false at end of output (EIO: the terminal's slave side is
  // closed) or at the deadline.
  bool ReadSome(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{master_, POLLIN, 0};
    const int n = poll(&fd, 1, static_cast<int>(left.count()));
    if (n <= 0) return n < 0 && errno == EINTR;
    char buf[4096];
    const ssize_t got = read(master_, buf, sizeof(buf));
    if (got <= 0) return false;
    screen_.append(buf, static_cast<size_t>(got));
    return true;
  }

  pid_t pid_ = -1;
  int master_ = -1;
  std::string screen_;
};

class VaectlTopTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new vaed::testing::DaemonProcess(DaemonArgs());
    if (!daemon_->ok()) return;
    // Two decodes before any frame: outcome ok 2, component decode 2.
    for (int i = 0; i < 2; ++i) {
      const auto r = vaed::ops_test::RunCommand(
          std::string(VAECTL_PATH) + " --socket '" + daemon_->socket() +
          "' decode --random-latent 1,32,8,8 --model demo --format none 2>&1");
      decodes_ok_ = decodes_ok_ && r.exit_code == 0;
      if (r.exit_code != 0) decode_log_ += r.out;
    }
  }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr && daemon_->ok()) {
      EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    }
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(daemon_->ok()) << "vaed did not start; its log:\n" << daemon_->Log();
    ASSERT_TRUE(decodes_ok_) << decode_log_;
  }

  static std::vector<std::string> Top(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", daemon_->socket(), "top"});
    return args;
  }

  static inline vaed::testing::DaemonProcess* daemon_ = nullptr;
  static inline bool decodes_ok_ = true;
  static inline std::string decode_log_;
};

TEST_F(VaectlTopTest, ScreenShowsHeaderRatesComponentsAndOutcomes) {
  PtyVaectl top(Top({"--iterations", "2", "--interval", "0.2"}));
  ASSERT_TRUE(top.started());
  const std::optional<int> exit_code = top.Wait(std::chrono::seconds(30));
  ASSERT_TRUE(exit_code.has_value()) << top.screen();
  EXPECT_EQ(*exit_code, 0) << top.screen();
  const std::string& screen = top.screen();
  EXPECT_EQ(Count(screen, kClear), 2u) << screen;  // redrawn in place, twice

  const std::string frame = LastFrame(screen);
  EXPECT_THAT(frame, HasSubstr("pid " + std::to_string(daemon_->pid()) + "  up "));
  EXPECT_THAT(frame, HasSubstr("  healthy  " + daemon_->socket()));
  // The second frame has a baseline: live rates, no requests since.
  EXPECT_THAT(frame, HasSubstr("requests/s  0.00 (last "));
  EXPECT_THAT(Row(frame, "outcomes"), ::testing::ElementsAre("outcomes", "ok 2")) << frame;
  EXPECT_THAT(Row(frame, "component"),
              ::testing::ElementsAre("component", "count", "new", "p50", "p95", "mean", "recent"))
      << frame;
  const std::vector<std::string> decode = Row(frame, "decode");
  ASSERT_EQ(decode.size(), 7u) << frame;
  EXPECT_EQ(decode[1], "2");  // count
  EXPECT_EQ(decode[2], "0");  // new since the first frame
  EXPECT_THAT(frame, HasSubstr("metrics     http://127.0.0.1:"));
  EXPECT_THAT(frame, HasSubstr("frame 2 of 2"));
  // The first frame's rates are averages since start.
  EXPECT_THAT(screen, HasSubstr("(since start)"));
  EXPECT_THAT(screen, HasSubstr("\x1b[?25h"));  // the cursor is shown again
}

TEST_F(VaectlTopTest, QuitsOnQAndRestoresTheTerminal) {
  PtyVaectl top(Top({"--interval", "0.2"}));
  ASSERT_TRUE(top.started());
  ASSERT_TRUE(top.ReadUntil("requests/s", 2, std::chrono::seconds(20))) << top.screen();
  top.Type("q");
  const std::optional<int> exit_code = top.Wait(std::chrono::seconds(5));
  ASSERT_TRUE(exit_code.has_value()) << "q did not stop vaectl top:\n" << top.screen();
  EXPECT_EQ(*exit_code, 0);
  termios modes{};
  ASSERT_EQ(tcgetattr(top.master(), &modes), 0);
  EXPECT_NE(modes.c_lflag & ICANON, 0u) << "canonical mode not restored";
  EXPECT_NE(modes.c_lflag & ECHO, 0u) << "echo not restored";
}

TEST_F(VaectlTopTest, StopsCleanlyOnSigintAndSigterm) {
  for (int signo : {SIGINT, SIGTERM}) {
    PtyVaectl top(Top({"--interval", "5"}));
    ASSERT_TRUE(top.started());
    ASSERT_TRUE(top.ReadUntil("requests/s", 1, std::chrono::seconds(20))) << top.screen();
    top.Signal(signo);
    // Well before the next refresh: the wait between frames ends at once.
    const std::optional<int> exit_code = top.Wait(std::chrono::seconds(3));
    ASSERT_TRUE(exit_code.has_value()) << "signal " << signo << " did not stop vaectl top";
    EXPECT_EQ(*exit_code, 0) << "signal " << signo;
  }
}

TEST_F(VaectlTopTest, NoClearAppendsPlainFramesToAPipe) {
  const auto r =
      vaed::ops_test::RunCommand(std::string(VAECTL_PATH) + " --socket '" + daemon_->socket() +
                                 "' top --iterations 2 --interval 0.1 --no-clear </dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Count(r.out, "requests/s"), 2u) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b[")));  // no escape sequences in a log
  EXPECT_THAT(r.out, HasSubstr("Ctrl-C to quit"));
  EXPECT_THAT(r.out, Not(HasSubstr("q or Ctrl-C")));  // stdin is not a terminal
}

// A daemon that goes away is shown, not fatal: top keeps polling.
TEST(VaectlTopWithoutDaemonTest, ShowsDaemonUnavailableAndKeepsRetrying) {
  PtyVaectl top(
      {"--socket", "/nonexistent/vaed-top.sock", "top", "--iterations", "3", "--interval", "0.1"});
  ASSERT_TRUE(top.started());
  const std::optional<int> exit_code = top.Wait(std::chrono::seconds(20));
  ASSERT_TRUE(exit_code.has_value()) << top.screen();
  EXPECT_EQ(*exit_code, 2);  // the last refresh found no daemon
  EXPECT_EQ(Count(top.screen(), "daemon unavailable: "), 3u) << top.screen();
  EXPECT_THAT(LastFrame(top.screen()), HasSubstr("vaed at /nonexistent/vaed-top.sock"));
  EXPECT_THAT(LastFrame(top.screen()), HasSubstr("frame 3 of 3"));
}

TEST(VaectlTopWithoutDaemonTest, DaemonThatStopsIsShownAsUnavailable) {
  vaed::testing::DaemonProcess daemon(DaemonArgs());
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  PtyVaectl top({"--socket", daemon.socket(), "top", "--interval", "0.2"});
  ASSERT_TRUE(top.started());
  ASSERT_TRUE(top.ReadUntil("requests/s", 1, std::chrono::seconds(20))) << top.screen();
  ASSERT_EQ(daemon.Terminate(), 0) << daemon.Log();
  ASSERT_TRUE(top.ReadUntil("daemon unavailable: ", 2, std::chrono::seconds(20))) << top.screen();
  EXPECT_TRUE(top.Running());
  top.Signal(SIGINT);
  const std::optional<int> exit_code = top.Wait(std::chrono::seconds(5));
  ASSERT_TRUE(exit_code.has_value());
  EXPECT_EQ(*exit_code, 2);
}

TEST(VaectlTopCliTest, RefusesBadIntervalsAndJson) {
  auto run = [](const std::string& args) {
    return vaed::ops_test::RunCommand(std::string(VAECTL_PATH) +
                                      " --socket /nonexistent/x.sock top " + args +
                                      " </dev/null 2>&1");
  };
  for (const char* bad : {"--interval 0 --iterations 1", "--interval -1 --iterations 1",
                          "--interval nan --iterations 1", "--iterations -1"}) {
    const auto r = run(bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_THAT(r.out, Not(HasSubstr("daemon unavailable"))) << bad;  // refused before polling
  }
  const auto json = run("--json --iterations 1");
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_THAT(json.out, HasSubstr("vaectl status --json"));
}

}  // namespace
