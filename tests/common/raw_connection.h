// Test helper shared by the hostile-input and regression tests: a
// connection to the daemon's control socket without the client library, so
// a test can put on the wire exactly the bytes a hostile peer would send.
#ifndef VAED_TESTS_COMMON_RAW_CONNECTION_H_
#define VAED_TESTS_COMMON_RAW_CONNECTION_H_

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "vaed/framing.h"
#include "vaed/wire.h"

namespace vaed::testing {

// One AF_UNIX stream connection to `path`, closed by the destructor.
// Not copyable; not thread-safe (one test thread uses it).
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Whether the connect succeeded.
  bool ok() const { return fd_ >= 0; }

  // Sends all of `bytes`; false when the daemon closed the connection.
  bool Write(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      // MSG_NOSIGNAL: a connection the daemon closed fails the write (EPIPE)
      // instead of killing the test with SIGPIPE.
      const ssize_t n = send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  }

  // The next framed reply within `timeout_ms`; nullopt on timeout or when
  // the daemon closed the connection (`closed` says which).
  std::optional<v1::Reply> Read(int timeout_ms, bool* closed = nullptr) {
    using Clock = std::chrono::steady_clock;
    if (closed) *closed = false;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (std::optional<wire::Frame> f = reader_.Next()) {
        v1::Reply r;
        if (f->oversized_bytes > 0 || !r.ParseFromString(f->payload)) return std::nullopt;
        return r;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, int(left.count())) <= 0) return std::nullopt;
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof(buf));
      if (n <= 0) {
        if (closed) *closed = true;
        return std::nullopt;
      }
      reader_.Append(std::string_view(buf, size_t(n)));
    }
  }

 private:
  int fd_ = -1;
  wire::FrameReader reader_{1 << 20};
};

}  // namespace vaed::testing

#endif  // VAED_TESTS_COMMON_RAW_CONNECTION_H_
