// The daemon's table of connected clients and the regions each registered.
//
// Identity: a client is created by Hello and named by the client id the
// daemon assigns; every later request must carry that id AND arrive on the
// same ZeroMQ connection (routing id), so one client can never name another
// client's id or regions. Region ids are unique across the daemon's life,
// and lookups are always scoped to the requesting client.
//
// Region lifetime. One rule for every kind of region: it
// lives in RegisteredRegion beside the mapping, not in the mapping type, so
// CUDA IPC regions (cuda_region.h) take the same path with their own
// mapping: a CUDA region is closed (cudaIpcCloseMemHandle) when its last
// reference goes, as a host region is unmapped.
//   - In use: a region that any tensor of a queued or running decode names
//     (latent, output, audio_latent, audio_output) is in use until that
//     decode's reply is sent (AcquireRegions() when the job is queued,
//     ReleaseRegions() as its reply goes out).
//   - Unregister of an idle region drops it; it is answered at once.
//   - Unregister of a region in use marks it *awaiting unregister* and its
//     reply is deferred: ReleaseRegions() drops the region when the last
//     decode using it has ended and hands back the UnregisterRegion's
//     request id, whose reply then goes out right after that decode's
//     reply. The decodes are not cancelled. So an acknowledged
//     UnregisterRegion means vaed never reads or writes that memory again.
//   - While it awaits unregister, decodes naming it are refused at once
//     (FindRegion(): kFailedPrecondition naming the field, "region N is
//     being unregistered"), and so is a second UnregisterRegion of it
//     (kFailedPrecondition naming unregister_region.region_id): the first
//     one's reply is the acknowledgement, and one deferred reply per region
//     keeps what a client can make the daemon hold bounded. It still counts
//     as registered (status, max_regions_per_client, the byte quota, the
//     segment-sharing check) until it is dropped.
//   - Client gone (Goodbye, closed connection, silence, exited process,
//     quarantine, a second Hello on the connection): Remove() drops its
//     regions with it at once, awaiting or not; its decodes are cancelled
//     by the caller (JobSink::CancelClient) and no deferred reply is sent
//     (nobody is there to read it; Goodbye itself is answered at once). A
//     cancelled decode stops before its next tile call or frame batch
//     (executor.h), so the daemon may write into such a region until then.
//
// Mappings: held by shared_ptr. The registry drops its reference when a
// region is dropped (above); a queued or running decode keeps its own
// (engine::DecodeJob) until its job is destroyed, so a mapping is never
// used after unmap. The engine reads and writes a job's regions only
// before it hands the job's result to the server, so the unmap itself may
// come just after the deferred acknowledgement: harmless for host shm (the
// client's memory stays valid; the daemon's view of the segment is only
// unmapped). A CUDA IPC region must be closed before the acknowledgement
// (a worker may cudaFree it then, and CUDA leaves a free under an open
// mapping undefined): Drop() closes it explicitly (CudaRegion::Close()),
// which is safe because the rank waited for its stream before the last
// decode's result was handed over (engine/cuda_region_io.h). A client that
// goes while its decodes run has its CUDA regions closed by the jobs'
// last references instead, after they stop.
//
// Thread-safety: none; owned and used by the control-loop thread only.
#ifndef VAED_DAEMON_SERVER_CLIENT_REGISTRY_H_
#define VAED_DAEMON_SERVER_CLIENT_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/server/cuda_region.h"
#include "daemon/server/peer.h"
#include "daemon/server/quarantine.h"
#include "vaed/host_region.h"
#include "vaed/status.h"

namespace vaed::server {

using Clock = std::chrono::steady_clock;

// One registration (RegisterRegion) of a client, with its lifetime state
// (the rule above).
struct RegisteredRegion {
  // Exactly one of the two is set: a host shm segment or a CUDA allocation.
  std::shared_ptr<HostRegion> mapping;
  std::shared_ptr<CudaRegion> cuda;
  // Bytes registered (the mapped size of either kind).
  uint64_t size() const { return mapping ? mapping->size() : cuda->size(); }
  // Queued or running decodes that name this region (each decode once).
  uint32_t decodes = 0;
  // The request id of the UnregisterRegion waiting for `decodes` to reach
  // 0: set = awaiting unregister.
  std::optional<uint64_t> unregister_request_id;

  bool awaiting_unregister() const { return unregister_request_id.has_value(); }
};

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
  std::map<uint64_t, RegisteredRegion> regions;  // by region id
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
  uint64_t AddRegion(ClientState* client, std::shared_ptr<CudaRegion> region);

  // What an UnregisterRegion became (the lifetime rule above).
  enum class Unregistered {
    kNow,       // the region was idle and is dropped: answer now
    kDeferred,  // in use: awaiting unregister; ReleaseRegions() answers it
  };
  // UnregisterRegion request `request_id` of `client` for `region_id`.
  // Errors: kNotFound when `client` has no region `region_id`;
  // kFailedPrecondition when it is already awaiting unregister.
  Result<Unregistered> Unregister(ClientState* client, uint64_t region_id, uint64_t request_id);
  // A decode of `client` naming the regions `region_ids` (distinct, each
  // this client's: admission checked them) was queued: they are in use.
  void AcquireRegions(ClientState* client, const std::vector<uint64_t>& region_ids);
  // The reply of that decode is going out: the same `region_ids` are
  // released. Regions awaiting unregister that no decode uses any more are
  // dropped; returns the request ids of their UnregisterRegion requests,
  // to be answered (OK) right after the decode's reply. Ids the client no
  // longer has are skipped.
  std::vector<uint64_t> ReleaseRegions(ClientState* client,
                                       const std::vector<uint64_t>& region_ids);
  // A client of another process than `identity` that has segment `name`
  // registered, or null: a segment is never shared between processes.
  const ClientState* RegionNameHolder(const std::string& name,
                                      const PeerIdentity& identity) const;
  // A client of another process than `identity` that has the CUDA IPC
  // handle `handle` (its 64 bytes) registered, or null: one allocation is
  // never lent to vaed by two processes (cuda_region.h, trust model).
  const ClientState* CudaHandleHolder(const std::string& handle,
                                      const PeerIdentity& identity) const;
  // Every client, in id order (status listing, quarantine actions).
  std::vector<ClientState*> All();
  std::vector<const ClientState*> All() const;
  // The client's region `region_id` (either kind), for a decode naming it
  // in field `what` ("latent.region_id"). Errors: kNotFound when the client
  // has no such region; kFailedPrecondition when it is awaiting unregister.
  Result<const RegisteredRegion*> FindRegion(const ClientState& client, uint64_t region_id,
                                             std::string_view what) const;
  // Removes a client and drops its region references, awaiting unregister
  // or not (no deferred reply is owed any more).
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
  // Drops `region` of `client` (the registry's reference to its mapping).
  void Drop(ClientState* client, std::map<uint64_t, RegisteredRegion>::iterator region);

  PidAlive pid_alive_;
  std::map<uint64_t, ClientState> clients_;
  uint64_t next_client_id_ = 1;
  uint64_t next_region_id_ = 1;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_CLIENT_REGISTRY_H_
