#include "daemon/server/status_builder.h"

#include <unistd.h>

#include <algorithm>
#include <optional>

#include "daemon/server/fault_accounting.h"

namespace vaed::server {

namespace {

void FillPlanCache(const models::PlanCacheSnapshot& cache, v1::PlanCacheInfo* pc) {
  pc->set_capacity(static_cast<uint32_t>(cache.capacity));
  for (const std::string& b : cache.buckets) pc->add_buckets(b);
  for (const auto& [bucket, reason] : cache.eager_only) {
    v1::PlanCacheInfo::EagerOnly* e = pc->add_eager_only();
    e->set_bucket(bucket);
    e->set_reason(reason);
  }
  pc->set_hits(cache.stats.hits);
  pc->set_builds(cache.stats.builds);
  pc->set_build_failures(cache.stats.build_failures);
  pc->set_evictions(cache.stats.evictions);
  pc->set_eager_calls(cache.stats.eager_calls);
  pc->set_plan_bytes(cache.plan_bytes);
}

// The configured models, and what every local rank holds of them.
void FillModels(const models::ModelRegistry& registry, v1::StatusReply* s) {
  for (const models::VaeModel* m : registry.models()) {
    const models::ModelInfo& i = m->info();
    v1::ModelInfo* out = s->add_models();
    out->set_name(i.name);
    out->set_kind(i.kind);
    out->set_weights_path(i.weights_path);
    out->set_weights_sha256(i.weights_sha256);
    out->set_demo_weights(i.demo_weights);
    out->set_resident_bytes(i.resident_bytes);
    out->set_description(i.description);
    out->set_compute_dtype(i.compute_dtype);
    for (const std::string& c : i.caps.Names()) out->add_capabilities(c);
    out->set_audio_weights_path(i.audio_weights_path);
    out->set_audio_weights_sha256(i.audio_weights_sha256);
    out->set_audio_sample_rate_hz(static_cast<uint32_t>(i.audio_sample_rate_hz));
    out->set_audio_latent_rate_hz(i.audio_latent_rate_hz);
    out->set_native_fps(i.native_fps);
    if (const models::WeightsVerification* v = registry.weights_verification(i.name)) {
      out->set_weights_verification(v->state);
    }
    if (std::optional<models::PlanCacheSnapshot> cache = m->plan_cache()) {
      FillPlanCache(*cache, out->mutable_plan_cache());
    }
  }
  s->set_default_model(registry.default_model());
  uint64_t weight_bytes = 0;
  uint32_t plans = 0;
  for (const v1::ModelInfo& m : s->models()) {
    weight_bytes += m.resident_bytes();
    plans += static_cast<uint32_t>(m.plan_cache().buckets_size());
  }
  // Every local rank holds its own copy of the models (s->ranks() is set
  // by JobSink::FillGroups first).
  s->set_resident_weight_bytes(weight_bytes * std::max<uint32_t>(1, s->ranks()));
  s->set_plan_cache_entries(plans * std::max<uint32_t>(1, s->ranks()));
}

void FillOutcomes(const OutcomeRecorder& outcomes, v1::StatusReply* s) {
  for (const auto& [outcome, count] : outcomes.outcomes()) {
    v1::OutcomeCount* o = s->add_outcomes();
    o->set_outcome(outcome);
    o->set_count(count);
  }
  if (outcomes.metrics() != nullptr) {
    for (const ComponentSummary& c : outcomes.metrics()->Components()) {
      v1::ComponentStats* out = s->add_components();
      out->set_component(c.component);
      out->set_count(c.count);
      out->set_sum_seconds(c.sum_seconds);
      out->set_p50_seconds(c.p50_seconds);
      out->set_p95_seconds(c.p95_seconds);
    }
  }
  s->set_metrics_url(outcomes.metrics_url());
}

// Clients, bounded: a status reply must stay a small message.
void FillClientList(const ClientRegistry& clients, const QuarantineBook& quarantine,
                    Clock::time_point now, v1::StatusReply* s) {
  constexpr size_t kMaxListedClients = 256;
  for (const ClientState* c : clients.All()) {
    if (static_cast<size_t>(s->client_list_size()) >= kMaxListedClients) break;
    v1::ClientEntry* e = s->add_client_list();
    e->set_client_id(c->id);
    e->set_name(c->name);
    e->set_uid(c->identity.uid);
    e->set_pid(c->pid);
    e->set_regions(static_cast<uint32_t>(c->regions.size()));
    e->set_region_bytes(c->region_bytes);
    e->set_in_flight(c->in_flight);
    e->set_faults_in_window(quarantine.FaultsInWindow(c->identity, now));
    e->set_idle_seconds(std::chrono::duration<double>(now - c->last_seen).count());
  }
}

}  // namespace

void BuildStatus(const StatusSources& src, Clock::time_point now, v1::StatusReply* s) {
  const DaemonOptions& options = src.options;
  const RequestCounters& counters = src.counters;
  s->set_daemon_version(VAED_VERSION);
  src.sink.FillGroups(s);
  s->set_uptime_seconds(std::chrono::duration<double>(now - src.started).count());
  s->set_healthy(src.health.empty());
  s->set_health(src.health.empty() ? "ok" : src.health);
  FillModels(src.registry, s);
  s->set_peak_rss_bytes(src.outcomes.peak_rss_bytes());
  s->set_in_flight(static_cast<uint32_t>(src.sink.running()));
  FillOutcomes(src.outcomes, s);
  s->set_clients(static_cast<uint32_t>(src.clients.client_count()));
  s->set_regions(static_cast<uint32_t>(src.clients.region_count()));
  s->set_requests_served(src.outcomes.served());
  s->set_requests_failed(src.outcomes.failed());
  s->set_protocol_errors(counters.protocol_errors);
  s->set_queue_depth(static_cast<uint32_t>(src.sink.queue_depth()));
  s->set_intra_op_threads(static_cast<uint32_t>(options.executor.intra_op_threads));
  s->set_socket(options.server.socket);
  s->set_pid(getpid());
  s->set_default_profile(ProfileName(options.profiles.default_profile));
  for (const Profile p : options.profiles.allowed) s->add_allowed_profiles(ProfileName(p));
  s->set_client_faults(src.quarantine.total_faults());
  s->set_quarantine_rejections(counters.quarantine_rejections);
  s->set_busy_rejections(counters.busy_rejections);
  s->set_deadline_exceeded(counters.deadline_exceeded);
  s->set_rejected_connections(counters.rejected_connections);
  s->set_quarantines(src.quarantine.quarantines());
  for (const QuarantineSnapshot& q : src.quarantine.Active(now)) {
    FillQuarantineEntry(q, s->add_quarantined());
  }
  FillClientList(src.clients, src.quarantine, now, s);
}

}  // namespace vaed::server
