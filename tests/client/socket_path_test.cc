// One rule for the daemon's socket in every client (a
// regression: vaectl ignored $VAED_SOCKET while the Python client honoured it):
// an explicit path, else $VAED_SOCKET when set and non-empty, else
// /run/vaed/vaed.sock. Client::SocketPath holds the rule; Connect and the C
// ABI's vaed_connect apply it (vaectl's side: tests/ops/vaectl_cli_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/vaed_c.h"

namespace vaed {
namespace {

using client::Client;
using testing::DaemonProcess;
using ::testing::HasSubstr;

// Sets (or, with nullopt, unsets) $VAED_SOCKET for the scope.
class ScopedSocketVariable {
 public:
  explicit ScopedSocketVariable(std::optional<std::string> value) {
    if (const char* old = std::getenv("VAED_SOCKET")) saved_ = old;
    if (value) {
      setenv("VAED_SOCKET", value->c_str(), 1);
    } else {
      unsetenv("VAED_SOCKET");
    }
  }
  ~ScopedSocketVariable() {
    if (saved_) {
      setenv("VAED_SOCKET", saved_->c_str(), 1);
    } else {
      unsetenv("VAED_SOCKET");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(SocketPathTest, ExplicitThenEnvironmentThenDefault) {
  {
    ScopedSocketVariable env("/tmp/from-env.sock");
    EXPECT_EQ(Client::SocketPath("/tmp/explicit.sock"), "/tmp/explicit.sock");
    EXPECT_EQ(Client::SocketPath(""), "/tmp/from-env.sock");
  }
  {
    ScopedSocketVariable empty(std::string{});
    EXPECT_EQ(Client::SocketPath(""), client::kDefaultSocket);
  }
  {
    ScopedSocketVariable unset(std::nullopt);
    EXPECT_EQ(Client::SocketPath(""), "/run/vaed/vaed.sock");
  }
}

TEST(SocketPathTest, ConnectWithNoSocketNamesTheEnvironmentsPath) {
  ScopedSocketVariable env("/nonexistent/vaed-env.sock");
  auto c = Client::Connect({.client_name = "socket-path-test"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/vaed-env.sock"));
}

TEST(SocketPathTest, CppAndCClientsConnectThroughTheEnvironment) {
  DaemonProcess daemon({});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();
  ScopedSocketVariable env(daemon.socket());

  auto c = Client::Connect({.client_name = "socket-path-test"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->GetStatus().ok());

  vaed_client* cc = nullptr;
  char err[512] = {0};
  ASSERT_EQ(vaed_connect(nullptr, "socket-path-test-c", &cc, err, sizeof(err)), 0) << err;
  vaed_client_free(cc);
  ASSERT_EQ(vaed_connect("", "socket-path-test-c", &cc, err, sizeof(err)), 0) << err;
  vaed_client_free(cc);
  // An explicit path still wins over the environment.
  EXPECT_NE(vaed_connect("/nonexistent/explicit.sock", "socket-path-test-c", &cc, err,
                         sizeof(err)),
            0);
  EXPECT_THAT(std::string(err), HasSubstr("/nonexistent/explicit.sock"));
}

}  // namespace
}  // namespace vaed
