#include "daemon/server/connections.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <utility>

#include "daemon/server/stream_send.h"
#include "vaed/wire.h"

namespace vaed::server {

Connections::Connections(const ServerOptions& options, const AccessPolicy* access,
                         zmq::socket_t* stream, RequestHandler* handler)
    : options_(options), access_(access), stream_(stream), handler_(handler) {}

void Connections::OnNotice(const std::string& routing_id, zmq::message_t& notice, TimePoint now) {
  if (retired_.erase(routing_id) > 0) return;  // the late notice of a forgotten one
  if (auto it = table_.find(routing_id); it != table_.end()) {
    OnClosed(it);
    return;
  }
  std::string address;
  std::optional<Connection> conn = Inspect(notice, now, &address);
  if (!conn || !ClaimSocket(routing_id, conn->inode)) return;
  if (Status admit = Admit(&*conn, address); !admit.ok()) {
    Refuse(routing_id, std::move(*conn), admit, now);
    return;
  }
  table_.emplace(routing_id, std::move(*conn));
}

void Connections::OnClosed(Table::iterator it) {
  const std::string routing_id = it->first;
  const bool refused = it->second.refused;
  ReleaseSocket(it->second.inode, routing_id);
  table_.erase(it);
  if (!refused) handler_->OnDisconnected(routing_id);
}

std::optional<Connection> Connections::Inspect(zmq::message_t& notice, TimePoint now,
                                               std::string* address) {
  Connection conn{.peer = std::nullopt,
                  .reader = wire::FrameReader(options_.max_message_bytes),
                  .fd = -1,
                  .inode = 0,
                  .refused = false,
                  .close_at = std::nullopt,
                  .closed = false,
                  .forced = false,
                  .admin = false,
                  .had_client = false,
                  .no_client_since = now,
                  .message_started = now};
  try {
    // Set by ZeroMQ from SO_PEERCRED: "<addr>:<uid>:<gid>:<pid>" on IPC.
    if (const char* a = notice.gets("Peer-Address")) *address = a;
  } catch (const zmq::error_t&) {
    // No such property: no credentials.
  }
  conn.peer = ParsePeerAddress(*address);
  conn.fd = zmq_msg_get(notice.handle(), ZMQ_SRCFD);
  struct stat st{};
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (conn.fd < 0 || fstat(conn.fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
      getsockopt(conn.fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
      (conn.peer && cred.pid != conn.peer->pid)) {
    // Not a live connection: the disconnect notice of one already
    // forgotten (its descriptor is closed or belongs to another peer now).
    spdlog::debug("control socket: ignoring the notice of a connection already closed");
    return std::nullopt;
  }
  conn.inode = st.st_ino;
  return conn;
}

bool Connections::ClaimSocket(const std::string& routing_id, ino_t inode) {
  // Descriptor numbers are reused at once, so a late notice (of a
  // connection already gone unnoticed, e.g. in a pause) can name the socket
  // of a newer connection. ZeroMQ numbers the raw socket's connections in
  // increasing order (5-byte ids): of two notices naming one socket, the
  // later-numbered is that socket's own, the other a stale one.
  auto later = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a > b;
  };
  if (auto o = socket_owner_.find(inode); o != socket_owner_.end()) {
    if (!later(routing_id, o->second)) {
      Retire(routing_id);
      return false;  // stale
    }
    Retire(o->second);
    table_.erase(o->second);  // the stale entry admitted before
    socket_owner_.erase(o);
  }
  socket_owner_[inode] = routing_id;
  return true;
}

Status Connections::Admit(Connection* conn, const std::string& address) const {
  if (!conn->peer) {
    return PermissionDenied("peer address '" + address.substr(0, 64) +
                            "' carries no credentials (SO_PEERCRED)");
  }
  const PeerCredentials& peer = *conn->peer;
  VAED_RETURN_IF_ERROR(access_->Admit(peer));
  conn->admin = access_->IsAdmin(peer);
  // Admitted connections count until they are gone, closing ones too: the
  // descriptor is held until then.
  size_t of_process = 0, of_uid = 0, open = 0;
  for (const auto& [id, c] : table_) {
    if (c.refused) continue;
    ++open;
    if (c.peer && c.peer->pid == peer.pid) ++of_process;
    if (c.peer && c.peer->uid == peer.uid) ++of_uid;
  }
  const size_t limit = options_.max_connections + (conn->admin ? kAdminReserve : 0);
  if (open >= limit) {
    return ResourceExhausted("vaed has " + std::to_string(open) +
                             " connections open (server.max_connections = " +
                             std::to_string(options_.max_connections) + ")");
  }
  if (!conn->admin && of_uid >= options_.max_connections_per_uid) {
    return ResourceExhausted("uid " + std::to_string(peer.uid) + " already has " +
                             std::to_string(of_uid) +
                             " connections (server.max_connections_per_uid = " +
                             std::to_string(options_.max_connections_per_uid) +
                             "); close one first");
  }
  if (of_process >= options_.max_clients_per_process) {
    return ResourceExhausted("process " + std::to_string(peer.pid) + " already has " +
                             std::to_string(of_process) +
                             " connections (server.max_clients_per_process = " +
                             std::to_string(options_.max_clients_per_process) +
                             "); close one first");
  }
  return Status::Ok();
}

void Connections::Refuse(const std::string& routing_id, Connection conn, const Status& why,
                         TimePoint now) {
  handler_->CountRejectedConnection();
  // At most one line a second: a storm of refused peers must not flood the
  // journal.
  ++refusals_since_log_;
  if (now - last_refusal_log_ >= std::chrono::seconds(1)) {
    spdlog::warn("access: refused a connection: {}{}", why.message(),
                 refusals_since_log_ > 1
                     ? " (" + std::to_string(refusals_since_log_) + " refused since the last line)"
                     : std::string());
    last_refusal_log_ = now;
    refusals_since_log_ = 0;
  }
  conn.refused = true;
  size_t pending_refusals = 0;
  for (const auto& [id, c] : table_) {
    if (c.refused) ++pending_refusals;
  }
  if (pending_refusals >= kMaxPendingRefusals) {
    // A storm: no reply, the descriptor goes at once.
    auto [it, inserted] = table_.emplace(routing_id, std::move(conn));
    Close(routing_id, it->second, now);
    ForceClose(it->second);
    return;
  }
  // One error reply (request id 0), then the connection is closed once the
  // reply had time to leave (closing drops what is still queued).
  v1::Reply reply;
  *reply.mutable_error() = ToProtoError(why);
  (void)SendFramed(*stream_, routing_id, reply.SerializeAsString());
  conn.close_at = now + std::chrono::milliseconds(200);
  table_.emplace(routing_id, std::move(conn));
}

Connection* Connections::Reading(const std::string& routing_id) {
  auto it = table_.find(routing_id);
  if (it == table_.end() || it->second.refused || it->second.closed) return nullptr;
  return &it->second;
}

void Connections::Close(const std::string& routing_id, Connection& conn, TimePoint now) {
  SendClose(*stream_, routing_id);
  conn.closed = true;
  conn.close_at = now + kForceCloseAfter;
}

void Connections::ForceClose(Connection& conn) {
  conn.forced = true;
  struct stat st{};
  if (conn.fd >= 0 && fstat(conn.fd, &st) == 0 && st.st_ino == conn.inode) {
    (void)shutdown(conn.fd, SHUT_RDWR);
  }
}

void Connections::Expire(TimePoint now) {
  for (auto it = table_.begin(); it != table_.end();) {
    Connection& conn = it->second;
    struct stat st{};
    if (fstat(conn.fd, &st) != 0 || st.st_ino != conn.inode) {
      // Its socket is gone and ZeroMQ said nothing (connections ended by a
      // pause, or notices still queued): forget it now.
      if (!conn.refused && !conn.closed) handler_->OnDisconnected(it->first);
      it = Forget(it);
      continue;
    }
    if (conn.closed) {
      if (now >= *conn.close_at && !conn.forced) {
        // The peer does not read, so ZeroMQ's close waits behind replies.
        ForceClose(conn);
        conn.close_at = now + std::chrono::seconds(5);
      } else if (now >= *conn.close_at) {
        it = Forget(it);  // no disconnect notice came (yet)
        continue;
      }
    } else if (conn.refused) {
      if (now >= *conn.close_at) Close(it->first, conn, now);
    } else {
      ExpireOpen(it->first, conn, now);
    }
    ++it;
  }
}

void Connections::ExpireOpen(const std::string& routing_id, Connection& conn, TimePoint now) {
  const auto timeout = std::chrono::milliseconds(options_.client_timeout_ms);
  if (!conn.reader.at_boundary() && now - conn.message_started > timeout) {
    spdlog::info("closing a connection of {}: a message stayed incomplete for {} ms "
                 "(server.client_timeout_ms)",
                 conn.peer ? "pid " + std::to_string(conn.peer->pid) : std::string("?"),
                 timeout.count());
    handler_->OnDisconnected(routing_id);
    Close(routing_id, conn, now);
  } else if (handler_->HasClientOn(routing_id)) {
    conn.had_client = true;
    conn.no_client_since.reset();
  } else if (!conn.no_client_since) {
    conn.no_client_since = now;  // its client was dropped
  } else if (now - *conn.no_client_since > (conn.had_client ? 4 * timeout : timeout)) {
    // A connection is for a client: without one for client_timeout_ms it
    // is closed, whatever it sends meanwhile. A client the daemon dropped:
    // its connection stays 4x as long, so the library hears
    // kUnknownClient (and says Hello again) first.
    spdlog::debug("closing a connection without a client");
    Close(routing_id, conn, now);
  }
}

Connections::Dropped Connections::DropAll() {
  Dropped dropped;
  dropped.connections = table_.size();
  for (const auto& [id, c] : table_) {
    Retire(id);
    if (c.refused || c.closed) continue;
    if (handler_->HasClientOn(id)) ++dropped.with_clients;
    handler_->OnDisconnected(id);
  }
  table_.clear();
  socket_owner_.clear();
  return dropped;
}

Connections::Table::iterator Connections::Forget(Table::iterator it) {
  Retire(it->first);
  ReleaseSocket(it->second.inode, it->first);
  return table_.erase(it);
}

void Connections::ReleaseSocket(ino_t inode, const std::string& routing_id) {
  if (auto o = socket_owner_.find(inode); o != socket_owner_.end() && o->second == routing_id) {
    socket_owner_.erase(o);
  }
}

void Connections::Retire(const std::string& routing_id) {
  if (!retired_.insert(routing_id).second) return;
  retired_order_.push_back(routing_id);
  while (retired_order_.size() > kMaxRetired) {
    retired_.erase(retired_order_.front());
    retired_order_.pop_front();
  }
}

}  // namespace vaed::server
