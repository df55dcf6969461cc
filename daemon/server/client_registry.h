// The daemon's table of connected clients and the regions each registered.
//
// Identity: a client is created by Hello and named by the client id the
// daemon assigns; every later request must carry that id AND arrive on the
// same ZeroMQ connection (routing id), so one client can never name another
// client's id or regions. Region ids are unique across the daemon's life,
// and lookups are always scoped to the requesting client.
//
// Lifetime: a region mapping is held by shared_ptr; the registry drops its
// reference on UnregisterRegion or when the client goes away, and an
// in-flight decode keeps its own reference until its reply is sent, so a
// mapping is never used after unmap and never outlives the last request
// that needs it.
//
// Thread-safety: none; owned and used by the control-loop thread only.
#ifndef VAED_DAEMON_SERVER_CLIENT_REGISTRY_H_
#define VAED_DAEMON_SERVER_CLIENT_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/server/peer.h"
#include "daemon/server/quarantine.h"
#include "vaed/host_region.h"
#include "vaed/status.h"

namespace vaed::server {

using Clock = std::chrono::steady_clock;

struct ClientState {
  uint64_t id = 0;
  std::string routing_id;  // ZeroMQ routing id of the connection
  std::string name;        // from Hello, for logs
  // The process behind the connection (SO_PEERCRED via ZeroMQ; peer.h):
  // quarantine identity and liveness check. `hello_pid` is what the client
  // claimed, for logs only.
  PeerIdentity identity;
  uint32_t gid = 0;
  int32_t hello_pid = 0;
  int32_t pid = 0;  // = identity.pid
  Clock::time_point last_seen;
  uint32_t in_flight = 0;  // decodes queued or running
  std::map<uint64_t, std::shared_ptr<HostRegion>> regions;
  uint64_t region_bytes = 0;  // sum of the mapped sizes of `regions`
};

// Tells whether a process exists; injectable so tests can simulate a dead
// client. The default uses kill(pid, 0).
using PidAlive = std::function<bool(int32_t pid)>;
bool ProcessExists(int32_t pid);

class ClientRegistry {
 public:
  explicit ClientRegistry(PidAlive pid_alive = ProcessExists)
      : pid_alive_(std::move(pid_alive)) {}

  // Adds a client for a Hello and returns it (never null).
  ClientState* Add(std::string routing_id, std::string name, const PeerCredentials& peer,
                   int32_t hello_pid, Clock::time_point now);

  // The client `client_id` if it exists and was created on `routing_id`.
  // Errors: kUnknownClient "client id N is not known; send Hello first"
  // (also what a restarted daemon answers), kProtocolError when the id
  // belongs to another connection.
  Result<ClientState*> Authenticate(uint64_t client_id, const std::string& routing_id);

  // Adds a region to `client` and returns its new region id.
  uint64_t AddRegion(ClientState* client, std::shared_ptr<HostRegion> region);
  // kNotFound when `client` has no region `region_id`.
  Status RemoveRegion(ClientState* client, uint64_t region_id);
  // A client of another process than `identity` that has segment `name`
  // registered, or null: a segment is never shared between processes.
  const ClientState* RegionNameHolder(const std::string& name,
                                      const PeerIdentity& identity) const;
  // Every client, in id order (status listing, quarantine actions).
  std::vector<ClientState*> All();
  std::vector<const ClientState*> All() const;
  // kNotFound naming `what` ("latent.region_id") when the client has no
  // such region.
  Result<std::shared_ptr<HostRegion>> FindRegion(const ClientState& client, uint64_t region_id,
                                                 std::string_view what) const;

  // Removes a client and drops its region references.
  void Remove(uint64_t client_id);

  // Clients to drop now: those whose pid is gone, and those silent for
  // longer than `timeout` with nothing in flight. Each entry says why.
  struct Expired {
    uint64_t client_id;
    std::string reason;
  };
  std::vector<Expired> FindExpired(Clock::time_point now, std::chrono::milliseconds timeout) const;

  ClientState* Find(uint64_t client_id);
  size_t client_count() const { return clients_.size(); }
  size_t region_count() const;

 private:
  PidAlive pid_alive_;
  std::map<uint64_t, ClientState> clients_;
  uint64_t next_client_id_ = 1;
  uint64_t next_region_id_ = 1;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CLIENT_REGISTRY_H_
