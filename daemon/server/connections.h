// The control socket's connections: who may connect, and what the daemon
// remembers of each connection until it is gone.
//
// Admission (at ZeroMQ's connect notice): the peer's SO_PEERCRED
// credentials (peer.h) against server.allowed_uids / allowed_groups
// (access_control.h), then the limits: server.max_connections in all
// (admins get kAdminReserve more, so an operator's vaectl gets in while the
// limit is taken), server.max_connections_per_uid (not for admins) and
// server.max_clients_per_process. A refused connection gets one error
// reply (PERMISSION_DENIED or RESOURCE_EXHAUSTED, request id 0), nothing it
// sends is read, and it is closed once the reply had time to leave; in a
// storm of refusals (kMaxPendingRefusals waiting) it is closed at once
// without a reply. Refusals are counted (RequestHandler) and logged at most
// once a second.
//
// Closing: a connection is for a client. Without one (never said Hello,
// or its client was dropped) for server.client_timeout_ms it is closed
// (4x as long when a client was dropped, so the library hears
// unknown_client and says Hello again first), as is one whose message
// stays incomplete that long. ZeroMQ carries out a close only after what
// is queued to the peer has left; a peer that does not read gets its
// socket shut down after kForceCloseAfter (ForceClose).
//
// Bookkeeping against reuse: descriptor numbers and routing ids outlive
// connections. Each live entry owns its socket by inode; late notices of
// connections already forgotten are recognised (retired routing ids, and a
// second notice naming an owned socket: ZeroMQ numbers the raw
// socket's connections in increasing order, so the earlier-numbered is stale).
//
// When a connection ends, its clients are dropped at once
// (RequestHandler::OnDisconnected): work cancelled, regions unmapped.
//
// Thread-safety: none; the control loop's thread.
#ifndef VAED_DAEMON_SERVER_CONNECTIONS_H_
#define VAED_DAEMON_SERVER_CONNECTIONS_H_

#include <sys/types.h>
#include <zmq.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "daemon/server/access_control.h"
#include "daemon/server/config.h"
#include "daemon/server/peer.h"
#include "daemon/server/request_handler.h"
#include "vaed/framing.h"
#include "vaed/status.h"

namespace vaed::server {

// One connection on the control socket, by its ZeroMQ routing id.
struct Connection {
  using TimePoint = std::chrono::steady_clock::time_point;
  std::optional<PeerCredentials> peer;
  wire::FrameReader reader;
  // The connection's socket as ZeroMQ accepted it (ZMQ_SRCFD of the
  // connect notice) and its inode, so a close can be forced on exactly
  // that socket (ForceClose) even when its peer never reads.
  int fd = -1;
  ino_t inode = 0;
  bool refused = false;  // refused at connect: dropped unread, closed at close_at
  // Refused: closed at this time (after its error reply had time to
  // leave). Closed: when the close is forced, then when the entry is
  // forgotten (ZeroMQ's disconnect notice normally comes first).
  std::optional<TimePoint> close_at;
  bool closed = false;
  bool forced = false;
  bool admin = false;       // root, the daemon's uid or server.admin_uids
  bool had_client = false;  // a client said Hello on it at some point
  // Since when no client is on it (connect, or its client was dropped):
  // a connection is for a client, whatever else it sends.
  std::optional<TimePoint> no_client_since;
  // When the message now being received began (incomplete-message timeout).
  TimePoint message_started{};
};

class Connections {
 public:
  using TimePoint = Connection::TimePoint;

  // Extra connections admin peers may open past server.max_connections.
  static constexpr uint32_t kAdminReserve = 16;
  // Refused connections waiting for their error reply to leave; past this
  // many, a refused connection is closed at once without a reply.
  static constexpr size_t kMaxPendingRefusals = 64;
  // A close ZeroMQ could not carry out this long (its peer does not read,
  // so the close waits behind unsent replies) is forced on the socket.
  static constexpr std::chrono::milliseconds kForceCloseAfter{1000};

  // `options`, `access`, `stream` (the control socket) and `handler` must
  // outlive the table; the control loop owns them all.
  Connections(const ServerOptions& options, const AccessPolicy* access, zmq::socket_t* stream,
              RequestHandler* handler);

  // A connect or disconnect notice (an empty message) of `routing_id`: a
  // known connection closed (its clients are dropped), or a new one is
  // admitted or refused (above). Notices of connections already gone are
  // ignored.
  void OnNotice(const std::string& routing_id, zmq::message_t& notice, TimePoint now);

  // The admitted, open connection `routing_id` whose bytes are read; null
  // when it is unknown, refused or closing (its bytes are dropped).
  Connection* Reading(const std::string& routing_id);

  // Closes refused connections whose reply had time to leave, idle
  // connections without a client, and messages left incomplete, each after
  // its time; forces closes that did not happen; forgets connections whose
  // socket is gone. Call a few times a second.
  void Expire(TimePoint now);

  // Forgets every connection (the listener was unbound: ZeroMQ ended them
  // all without notices) and drops their clients. Returns how many
  // connections there were and how many of them had a client.
  struct Dropped {
    size_t connections = 0;
    size_t with_clients = 0;
  };
  Dropped DropAll();

 private:
  using Table = std::unordered_map<std::string, Connection>;

  // The peer closed its socket or exited: its clients go now, not at their
  // timeout.
  void OnClosed(Table::iterator it);
  // A new connection from its connect notice (credentials, socket, inode),
  // or nullopt when the notice is of a connection already gone. `address`:
  // the peer address ZeroMQ reported.
  std::optional<Connection> Inspect(zmq::message_t& notice, TimePoint now, std::string* address);
  // Makes `routing_id` the owner of socket `inode`; false when it is a
  // stale notice of a socket a later connection owns.
  bool ClaimSocket(const std::string& routing_id, ino_t inode);
  // OK, or why `conn` is refused (credentials, then the limits); sets
  // conn->admin.
  Status Admit(Connection* conn, const std::string& address) const;
  // Counts, logs and answers a refused connection and keeps it until it
  // is closed.
  void Refuse(const std::string& routing_id, Connection conn, const Status& why, TimePoint now);
  // Sends ZeroMQ's close for `routing_id` and marks the entry closed; the
  // entry keeps counting against the limits until the connection is gone.
  void Close(const std::string& routing_id, Connection& conn, TimePoint now);
  // shutdown(2) on the connection's own socket (checked by inode, so a
  // reused descriptor is never touched): ZeroMQ then sees the end of the
  // stream, drops what it could not send and closes the descriptor.
  static void ForceClose(Connection& conn);
  // Closes an open connection whose time without a client or with an
  // incomplete message ran out.
  void ExpireOpen(const std::string& routing_id, Connection& conn, TimePoint now);
  // Forgets `it` before ZeroMQ's notice (which is then ignored).
  Table::iterator Forget(Table::iterator it);
  // Drops `inode`'s owner when it is `routing_id`.
  void ReleaseSocket(ino_t inode, const std::string& routing_id);
  // Routing ids of connections forgotten before ZeroMQ's disconnect notice
  // came (forced closes, a pause): their late notice must not look like a
  // new connection. Oldest first; at most kMaxRetired.
  void Retire(const std::string& routing_id);

  const ServerOptions& options_;
  const AccessPolicy* const access_;
  zmq::socket_t* const stream_;
  RequestHandler* const handler_;

  Table table_;
  // The routing id each live entry's socket (by inode) belongs to.
  std::unordered_map<ino_t, std::string> socket_owner_;
  std::unordered_set<std::string> retired_;
  std::deque<std::string> retired_order_;
  static constexpr size_t kMaxRetired = 1 << 16;
  TimePoint last_refusal_log_{};
  uint64_t refusals_since_log_ = 0;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CONNECTIONS_H_
