// A TCP port on the loopback interface that was free a moment ago (tests
// that start a TCPStore). Another process may take it before the caller
// binds; tests accept that small race.
#ifndef VAED_TESTS_COMMON_FREE_PORT_H_
#define VAED_TESTS_COMMON_FREE_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace vaed::testing {

// Binds port 0, reads the port the kernel chose, closes. 0 on failure.
inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

}  // namespace vaed::testing

#endif  // VAED_TESTS_COMMON_FREE_PORT_H_
