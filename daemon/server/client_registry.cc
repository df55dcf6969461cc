#include "daemon/server/client_registry.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>

namespace vaed::server {

bool ProcessExists(int32_t pid) {
  if (pid <= 0) return true;  // unknown pid: rely on the silence timeout
  // EPERM means the process exists but belongs to another user.
  return kill(pid, 0) == 0 || errno == EPERM;
}

ClientState* ClientRegistry::Add(std::string routing_id, std::string name,
                                 const PeerCredentials& peer, int32_t hello_pid,
                                 Clock::time_point now) {
  const uint64_t id = next_client_id_++;
  ClientState& c = clients_[id];
  c.id = id;
  c.routing_id = std::move(routing_id);
  c.name = std::move(name);
  c.identity = {peer.uid, peer.pid};
  c.gid = peer.gid;
  c.hello_pid = hello_pid;
  c.pid = peer.pid;
  c.last_seen = now;
  return &c;
}

Result<ClientState*> ClientRegistry::Authenticate(uint64_t client_id,
                                                  const std::string& routing_id) {
  auto it = clients_.find(client_id);
  if (it == clients_.end()) {
    return UnknownClient("client id " + std::to_string(client_id) +
                         " is not known (never said Hello, was dropped after "
                         "client_timeout_ms without heartbeats, or the daemon restarted); "
                         "send Hello first");
  }
  if (it->second.routing_id != routing_id) {
    return ProtocolError("client id " + std::to_string(client_id) +
                         " belongs to another connection");
  }
  return &it->second;
}

uint64_t ClientRegistry::AddRegion(ClientState* client, std::shared_ptr<HostRegion> region) {
  const uint64_t id = next_region_id_++;
  client->region_bytes += region->size();
  client->regions.emplace(id, RegisteredRegion{.mapping = std::move(region), .cuda = nullptr, .decodes = 0, .unregister_request_id = {}});
  return id;
}

uint64_t ClientRegistry::AddRegion(ClientState* client, std::shared_ptr<CudaRegion> region) {
  const uint64_t id = next_region_id_++;
  client->region_bytes += region->size();
  client->regions.emplace(id, RegisteredRegion{.mapping = nullptr, .cuda = std::move(region), .decodes = 0, .unregister_request_id = {}});
  return id;
}

Result<ClientRegistry::Unregistered> ClientRegistry::Unregister(ClientState* client,
                                                                uint64_t region_id,
                                                                uint64_t request_id) {
  auto it = client->regions.find(region_id);
  if (it == client->regions.end()) {
    return NotFound("unregister_region.region_id " + std::to_string(region_id) +
                    " is not a region registered by this client");
  }
  RegisteredRegion& region = it->second;
  if (region.awaiting_unregister()) {
    return FailedPrecondition(
        "unregister_region.region_id " + std::to_string(region_id) + ": region " +
        std::to_string(region_id) + " is being unregistered already (request " +
        std::to_string(*region.unregister_request_id) +
        "), which is answered once the decodes using it have ended");
  }
  if (region.decodes > 0) {
    region.unregister_request_id = request_id;
    return Unregistered::kDeferred;
  }
  Drop(client, it);
  return Unregistered::kNow;
}

void ClientRegistry::AcquireRegions(ClientState* client,
                                    const std::vector<uint64_t>& region_ids) {
  for (uint64_t id : region_ids) {
    if (auto it = client->regions.find(id); it != client->regions.end()) ++it->second.decodes;
  }
}

std::vector<uint64_t> ClientRegistry::ReleaseRegions(ClientState* client,
                                                     const std::vector<uint64_t>& region_ids) {
  std::vector<uint64_t> answered;
  for (uint64_t id : region_ids) {
    auto it = client->regions.find(id);
    if (it == client->regions.end()) continue;
    RegisteredRegion& region = it->second;
    if (region.decodes > 0) --region.decodes;
    if (region.decodes == 0 && region.awaiting_unregister()) {
      answered.push_back(*region.unregister_request_id);
      Drop(client, it);
    }
  }
  return answered;
}

void ClientRegistry::Drop(ClientState* client,
                          std::map<uint64_t, RegisteredRegion>::iterator region) {
  client->region_bytes -= std::min(client->region_bytes, region->second.size());
  // A CUDA region no decode uses is closed now, before the caller
  // acknowledges the UnregisterRegion (cuda_region.h: Close()).
  if (region->second.cuda && region->second.decodes == 0) region->second.cuda->Close();
  client->regions.erase(region);
}

const ClientState* ClientRegistry::RegionNameHolder(const std::string& name,
                                                    const PeerIdentity& identity) const {
  for (const auto& [id, c] : clients_) {
    if (c.identity == identity) continue;
    for (const auto& [rid, region] : c.regions) {
      if (region.mapping && region.mapping->name() == name) return &c;
    }
  }
  return nullptr;
}

const ClientState* ClientRegistry::CudaHandleHolder(const std::string& handle,
                                                    const PeerIdentity& identity) const {
  for (const auto& [id, c] : clients_) {
    if (c.identity == identity) continue;
    for (const auto& [rid, region] : c.regions) {
      if (region.cuda && region.cuda->handle() == handle) return &c;
    }
  }
  return nullptr;
}

std::vector<ClientState*> ClientRegistry::All() {
  std::vector<ClientState*> out;
  for (auto& [id, c] : clients_) out.push_back(&c);
  return out;
}

std::vector<const ClientState*> ClientRegistry::All() const {
  std::vector<const ClientState*> out;
  for (const auto& [id, c] : clients_) out.push_back(&c);
  return out;
}

Result<const RegisteredRegion*> ClientRegistry::FindRegion(const ClientState& client,
                                                           uint64_t region_id,
                                                           std::string_view what) const {
  auto it = client.regions.find(region_id);
  if (it == client.regions.end()) {
    return NotFound(std::string(what) + " " + std::to_string(region_id) +
                    " is not a region registered by this client (RegisterRegion first)");
  }
  if (it->second.awaiting_unregister()) {
    return FailedPrecondition(std::string(what) + " " + std::to_string(region_id) +
                              ": region " + std::to_string(region_id) +
                              " is being unregistered (its UnregisterRegion waits for the "
                              "decodes already using it); a new decode may not name it");
  }
  return &it->second;
}

void ClientRegistry::Remove(uint64_t client_id) { clients_.erase(client_id); }

std::vector<ClientRegistry::Expired> ClientRegistry::FindExpired(
    Clock::time_point now, std::chrono::milliseconds timeout) const {
  std::vector<Expired> out;
  for (const auto& [id, c] : clients_) {
    if (!pid_alive_(c.pid)) {
      out.push_back({id, "process " + std::to_string(c.pid) + " has exited"});
    } else if (c.in_flight == 0 && now - c.last_seen > timeout) {
      out.push_back({id, "no message for more than " + std::to_string(timeout.count()) + " ms"});
    }
  }
  return out;
}

ClientState* ClientRegistry::Find(uint64_t client_id) {
  auto it = clients_.find(client_id);
  return it == clients_.end() ? nullptr : &it->second;
}

size_t ClientRegistry::region_count() const {
  size_t n = 0;
  for (const auto& [id, c] : clients_) n += c.regions.size();
  return n;
}

}  // namespace vaed::server
