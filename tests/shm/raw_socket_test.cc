// The control channel's socket (vaed/raw_socket.h) against the real
// libzmq: the contract the daemon and the client library rely on (notices,
// raw bytes, closing, EAGAIN / EHOSTUNREACH). The regression of the part
// ZMQ_STREAM leaked is in tests/regressions/raw_socket_regressions_test.cc.
#include "vaed/raw_socket.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace vaed::wire {
namespace {

std::string SocketPath(const char* name) {
  return "/tmp/vaed-raw-socket-" + std::to_string(getpid()) + "-" + name;
}

// A peer without ZeroMQ: one AF_UNIX stream connection.
int ConnectPeer(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads what arrives within `timeout_ms`; "" at end of stream or timeout.
std::string ReadPeer(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return "";
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof(buf));
  return n > 0 ? std::string(buf, size_t(n)) : "";
}

class RawSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_.set(zmq::sockopt::linger, 0);
    std::remove(path_.c_str());
    socket_.bind("ipc://" + path_);
    peer_ = ConnectPeer(path_);
    ASSERT_GE(peer_, 0);
    // The connect notice: a routing id, then an empty part.
    zmq::message_t id, notice;
    ASSERT_TRUE(socket_.recv(id, zmq::recv_flags::none));
    ASSERT_TRUE(socket_.recv(notice, zmq::recv_flags::none));
    ASSERT_EQ(notice.size(), 0u);
    ASSERT_NE(notice.gets("Peer-Address"), nullptr);
    ASSERT_GE(zmq_msg_get(notice.handle(), ZMQ_SRCFD), 0);
    id_ = id.to_string();
  }
  void TearDown() override {
    if (peer_ >= 0) close(peer_);
    std::remove(path_.c_str());
  }

  const std::string path_ = SocketPath(
      ::testing::UnitTest::GetInstance()->current_test_info()->name());
  zmq::context_t context_{1};
  zmq::socket_t socket_ = OpenRawSocket(context_);
  int peer_ = -1;
  std::string id_;
};

TEST_F(RawSocketTest, MovesRawBytesBothWaysAndAnEmptyPartClosesTheConnection) {
  ASSERT_TRUE(socket_.send(zmq::buffer(id_), zmq::send_flags::sndmore));
  ASSERT_TRUE(socket_.send(zmq::str_buffer("reply bytes"), zmq::send_flags::none));
  EXPECT_EQ(ReadPeer(peer_, 2000), "reply bytes");

  ASSERT_EQ(write(peer_, "request", 7), 7);
  zmq::message_t id, chunk;
  ASSERT_TRUE(socket_.recv(id, zmq::recv_flags::none));
  ASSERT_TRUE(socket_.recv(chunk, zmq::recv_flags::none));
  EXPECT_EQ(id.to_string(), id_);
  EXPECT_EQ(chunk.to_string(), "request");

  ASSERT_TRUE(socket_.send(zmq::buffer(id_), zmq::send_flags::sndmore));
  ASSERT_TRUE(socket_.send(zmq::message_t(), zmq::send_flags::none));
  // The socket finishes the close when its owner next uses it (ZeroMQ's
  // commands are handled on the owner's thread), as the daemon's loop does.
  pollfd p{peer_, POLLIN, 0};
  for (int i = 0; i < 200 && poll(&p, 1, 0) == 0; ++i) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(10));
  }
  ASSERT_EQ(poll(&p, 1, 0), 1) << "the connection stayed open";
  char byte;
  EXPECT_EQ(read(peer_, &byte, 1), 0) << "the empty part did not close the connection";
}

TEST_F(RawSocketTest, APeerThatClosesGetsADisconnectNoticeAndItsIdBecomesUnreachable) {
  close(peer_);
  peer_ = -1;
  zmq::message_t id, notice;
  ASSERT_TRUE(socket_.recv(id, zmq::recv_flags::none));
  ASSERT_TRUE(socket_.recv(notice, zmq::recv_flags::none));
  EXPECT_EQ(id.to_string(), id_);
  EXPECT_EQ(notice.size(), 0u);
  // Once the connection is gone its routing id no longer routes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int error = 0;
  while (error == 0 && std::chrono::steady_clock::now() < deadline) {
    try {
      if (socket_.send(zmq::buffer(id_), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        socket_.send(zmq::str_buffer("late"), zmq::send_flags::dontwait);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const zmq::error_t& e) {
      error = e.num();
    }
  }
  EXPECT_EQ(error, EHOSTUNREACH);
}

TEST_F(RawSocketTest, AFullQueueRefusesTheRoutingIdPartWithEagain) {
  // The peer reads nothing: the queue fills up to ZMQ_SNDHWM messages.
  const std::string block(64 * 1024, 'x');
  bool refused = false;
  for (int i = 0; i < 100000 && !refused; ++i) {
    if (!socket_.send(zmq::buffer(id_), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      refused = true;
      break;
    }
    socket_.send(zmq::buffer(block), zmq::send_flags::dontwait);
  }
  EXPECT_TRUE(refused) << "the queue of a peer that does not read never filled";
}

}  // namespace
}  // namespace vaed::wire
