// `vaectl top`: polls GetStatus every --interval and redraws a frame from
// top_view.h. Stops on SIGINT, SIGTERM, 'q' typed on a terminal stdin, or
// after --iterations frames. A daemon that goes away is shown in the frame
// and polled again on the next refresh.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ops/common/text_format.h"
#include "ops/vaectl/commands.h"
#include "ops/vaectl/top_view.h"

namespace vaed::vaectl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kClearScreen = "\x1b[H\x1b[2J";
constexpr std::string_view kHideCursor = "\x1b[?25l";
constexpr std::string_view kShowCursor = "\x1b[?25h";

// Written by the signal handler only: the write end of StopSignals' pipe.
volatile sig_atomic_t g_stop_pipe_write = -1;

void OnStopSignal(int /*signo*/) {
  const int fd = g_stop_pipe_write;
  if (fd >= 0) {
    const char byte = 's';
    const ssize_t n = ::write(fd, &byte, 1);  // async-signal-safe; a full pipe is fine
    (void)n;
  }
}

// SIGINT and SIGTERM make fd() readable (a self-pipe, so that the wait
// between frames, a poll() on it, ends at once). The previous handlers are
// restored by the destructor. One instance at a time.
class StopSignals {
 public:
  StopSignals() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
      fds_[0] = fds_[1] = -1;
      return;
    }
    g_stop_pipe_write = fds_[1];
    struct sigaction action {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: a blocked poll() returns EINTR
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    if (fds_[0] < 0) return;
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_stop_pipe_write = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool ok() const { return fds_[0] >= 0; }
  int fd() const { return fds_[0]; }
  // Whether a stop signal has arrived (does not block). Stays true.
  bool Stopped() {
    char byte;
    if (::read(fds_[0], &byte, 1) == 1) stopped_ = true;
    return stopped_;
  }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  bool stopped_ = false;
};

// When stdin is a terminal: non-canonical, no-echo input so that a single
// 'q' is read without Enter (signals from the keyboard stay on); restored
// by the destructor. Otherwise inactive.
class KeyInput {
 public:
  KeyInput() {
    if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~KeyInput() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  KeyInput(const KeyInput&) = delete;
  KeyInput& operator=(const KeyInput&) = delete;

  bool active() const { return active_; }
  // Reads what was typed; true when it holds 'q' or 'Q'.
  bool QuitRequested() const {
    char buf[64];
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == 'q' || buf[i] == 'Q') return true;
    }
    return false;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

// Hides the cursor while frames are redrawn in place; shows it again.
class HiddenCursor {
 public:
  explicit HiddenCursor(bool enable) : enabled_(enable) {
    if (enabled_) std::cout << kHideCursor << std::flush;
  }
  ~HiddenCursor() {
    if (enabled_) std::cout << kShowCursor << std::flush;
  }
  HiddenCursor(const HiddenCursor&) = delete;
  HiddenCursor& operator=(const HiddenCursor&) = delete;

 private:
  bool enabled_;
};

struct TerminalSize {
  int columns = 0;  // 0: unknown (not a terminal); lines are not clipped
  int rows = 0;
};

TerminalSize StdoutSize() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0) return {};
  return {ws.ws_col, ws.ws_row};
}

// Keeps at most `rows` lines of `frame`.
std::string KeepLines(const std::string& frame, int rows) {
  if (rows <= 0) return frame;
  size_t pos = 0;
  for (int i = 0; i < rows; ++i) {
    pos = frame.find('\n', pos);
    if (pos == std::string::npos) return frame;
    ++pos;
  }
  return frame.substr(0, pos);
}

std::string LocalClock() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  localtime_r(&t, &local);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &local);
  return buf;
}

// The daemon's status over a connection kept between refreshes. A failed
// call drops the connection; the next call connects afresh, so a restarted
// daemon is picked up and a dead one costs one quick failure per refresh.
class StatusPoller {
 public:
  explicit StatusPoller(const GlobalOptions& global) : global_(global) {}

  Result<client::StatusReply> Poll() {
    Result<client::StatusReply> status = PollOnce();
    // Without heartbeats the daemon forgets a client idle for longer than
    // its server.client_timeout_ms (an --interval that long): say Hello
    // again at once rather than show one frame as unavailable.
    if (!status.ok() && status.status().code() == StatusCode::kUnknownClient) status = PollOnce();
    return status;
  }

 private:
  Result<client::StatusReply> PollOnce() {
    if (client_ == nullptr) {
      client::ClientOptions options;
      options.socket = global_.socket;
      options.client_name = "vaectl-top";
      options.connect_timeout_ms = global_.connect_timeout_ms;
      options.heartbeats = false;
      // Reconnecting is this loop's job: a call must fail quickly rather
      // than spend reconnect_timeout_ms on a daemon that is gone, and the
      // frame must not wait out a 10-minute decode timeout.
      options.reconnect_timeout_ms = 0;
      options.request_timeout_ms = global_.connect_timeout_ms;
      auto connected = client::Client::Connect(options);
      if (!connected.ok()) return connected.status();
      client_ = std::move(connected).value();
    }
    Result<client::StatusReply> status = client_->GetStatus();
    if (!status.ok()) client_.reset();
    return status;
  }

  const GlobalOptions& global_;
  std::unique_ptr<client::Client> client_;
};

// "connection refused" rather than "UNAVAILABLE: vaed is not running: ...".
std::string Explain(const Status& status) {
  if (status.code() != StatusCode::kUnavailable) return status.ToString();
  constexpr std::string_view kPrefix = "vaed is not running: ";
  std::string reason = status.message();
  if (reason.starts_with(kPrefix)) reason.erase(0, kPrefix.size());
  return reason;
}

enum class WaitResult { kTimeout, kStop };

// Waits until `deadline`, or less when a stop signal arrives or 'q' is
// typed (while *watch_keys; cleared when stdin hangs up, after which only
// the timer and signals count).
WaitResult WaitUntil(Clock::time_point deadline, StopSignals& signals, const KeyInput& keys,
                     bool* watch_keys) {
  for (;;) {
    if (signals.Stopped()) return WaitResult::kStop;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return WaitResult::kTimeout;
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    const int n = ::poll(fds, *watch_keys ? 2 : 1, static_cast<int>(left.count()) + 1);
    if (n < 0 && errno != EINTR) return WaitResult::kTimeout;  // cannot wait: refresh now
    if (n <= 0 || !*watch_keys) continue;
    if ((fds[1].revents & POLLIN) != 0 && keys.QuitRequested()) return WaitResult::kStop;
    if ((fds[1].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) *watch_keys = false;
  }
}

}  // namespace

int RunTop(const GlobalOptions& global, const TopCommandOptions& options) {
  if (global.json) {
    std::cerr << "vaectl top: --json is not supported; for scripts use `vaectl status --json` "
                 "(one snapshot) or `vaectl top --no-clear`\n";
    return kExitFailure;
  }
  if (!(options.interval_seconds > 0) || !std::isfinite(options.interval_seconds)) {
    std::cerr << "vaectl top: --interval must be a number of seconds > 0, not "
              << options.interval_seconds << "\n";
    return kExitFailure;
  }
  if (options.iterations < 0) {
    std::cerr << "vaectl top: --iterations must be >= 0 (0 = until q or Ctrl-C)\n";
    return kExitFailure;
  }
  StopSignals signals;
  if (!signals.ok()) {
    std::cerr << "vaectl top: cannot create a pipe for signal handling\n";
    return kExitFailure;
  }
  const KeyInput keys;
  const bool redraw = !options.no_clear;
  const HiddenCursor cursor(redraw && ::isatty(STDOUT_FILENO));
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.interval_seconds));

  bool watch_keys = keys.active();
  StatusPoller poller(global);
  std::optional<client::StatusReply> previous;
  Clock::time_point previous_at;
  int exit_code = kExitOk;
  Clock::time_point tick = Clock::now();
  for (int64_t frame_no = 1;; ++frame_no) {
    Result<client::StatusReply> status = poller.Poll();
    // A signal during the call may have cut it short: no frame from that.
    if (signals.Stopped()) break;
    const Clock::time_point polled_at = Clock::now();
    const TerminalSize size = StdoutSize();
    std::string frame;
    if (status.ok()) {
      double between = 0;
      if (previous.has_value()) {
        // The daemon's own clock times its snapshots without our round
        // trips; wall time is the fallback (another process answered).
        between = status->uptime_seconds - previous->uptime_seconds;
        if (!(between > 0) || status->pid != previous->pid) {
          between = std::chrono::duration<double>(polled_at - previous_at).count();
        }
      }
      frame = RenderTop(*status, previous ? &*previous : nullptr, between, size.columns);
      previous = std::move(status).value();
      previous_at = polled_at;
      exit_code = kExitOk;
    } else {
      frame = RenderTopUnavailable(global.socket, Explain(status.status()), size.columns);
      exit_code = kExitUnavailable;
    }
    std::string footer = LocalClock() + "  every " + ops::HumanDuration(options.interval_seconds);
    if (options.iterations > 0) {
      footer += "  frame " + std::to_string(frame_no) + " of " + std::to_string(options.iterations);
    }
    footer += keys.active() ? "  q or Ctrl-C to quit" : "  Ctrl-C to quit";
    footer = ClipLines(footer, size.columns);
    if (redraw) {
      // The frame, a blank line and the footer fill at most the screen, the
      // cursor staying on the footer's line, so that nothing scrolls away.
      std::cout << kClearScreen << KeepLines(frame, size.rows > 2 ? size.rows - 2 : 0) << "\n"
                << footer;
    } else {
      std::cout << frame << "\n" << footer << "\n\n";
    }
    std::cout << std::flush;

    if (options.iterations > 0 && frame_no >= options.iterations) break;
    tick += interval;
    // A slow poll (connect timeout) must not make the next ones burst.
    if (tick < Clock::now()) tick = Clock::now();
    if (WaitUntil(tick, signals, keys, &watch_keys) == WaitResult::kStop) break;
  }
  if (redraw) std::cout << "\n" << std::flush;  // the shell's prompt below the footer
  return exit_code;
}

}  // namespace vaed::vaectl
