// Peer credentials of a control-socket connection.
//
// The kernel records the uid, gid and pid of the process that connected a
// Unix socket (SO_PEERCRED); ZeroMQ reads them when the connection is made
// and attaches them to the connection's messages, the connect notice of the
// raw control socket included (vaed/raw_socket.h) ("Peer-Address" metadata), as
// "<address>:<uid>:<gid>:<pid>" (libzmq 4.3.4, ipc transport). They cannot be forged by the client; the
// pid a client puts in Hello can (and inside a container it is another
// namespace's pid), so the daemon trusts only these.
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_SERVER_PEER_H_
#define VAED_DAEMON_SERVER_PEER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vaed::server {

struct PeerCredentials {
  uint32_t uid = 0;
  uint32_t gid = 0;  // primary gid of the connecting process
  int32_t pid = 0;
};

// Parses the trailing ":<uid>:<gid>:<pid>" of a ZeroMQ IPC peer address,
// e.g. "localhost:1000:1000:4242". nullopt when the address does not end
// in three decimal fields (a transport without SO_PEERCRED), or a field
// does not fit its type.
std::optional<PeerCredentials> ParsePeerAddress(std::string_view address);

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_PEER_H_
