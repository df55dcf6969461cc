// The client's own reply types (vaed/replies.h) carry every field of the
// protocol's replies: each leaf field of vaed.v1.DecodeReply, StatusReply,
// HelloReply, ReleaseQuarantineReply, Progress and FinalRange, set alone
// (and then all of them at once, each to a value of its own) survives
// FromProtocol (client/src/reply_conversion.h) and the way back written
// here, field for field. A field the library forgets, or copies into
// another member, comes back different; a field added to the protocol but
// not to the structs is caught too, since the fill below walks the
// descriptor, not a list.
#include "reply_conversion.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vaed/wire.h"

namespace vaed::client {
namespace {

namespace pb = google::protobuf;

// --- the way back, field for field -----------------------------------------

#define VAED_SET(m, r, f) (m)->set_##f((r).f)
#define VAED_ADD_ALL(m, r, f) \
  for (const auto& x : (r).f) (m)->add_##f(x)

void Back(const Timing& r, v1::Timing* m) {
  VAED_SET(m, r, component);
  VAED_SET(m, r, seconds);
}

void Back(const OutputSanity& r, v1::OutputSanity* m) {
  VAED_SET(m, r, nonfinite);
  VAED_SET(m, r, constant);
  VAED_SET(m, r, rms);
  VAED_SET(m, r, peak_abs);
  VAED_SET(m, r, clipped_fraction);
}

void Back(const AudioInfo& r, v1::AudioInfo* m) {
  VAED_ADD_ALL(m, r, latent_shape);
  VAED_ADD_ALL(m, r, output_shape);
  VAED_SET(m, r, output_bytes);
  VAED_SET(m, r, channels);
  VAED_SET(m, r, latent_frames);
  VAED_SET(m, r, samples);
  VAED_SET(m, r, sample_rate_hz);
  VAED_SET(m, r, seconds);
  if (r.sanity) Back(*r.sanity, m->mutable_sanity());
}

void Back(const TilingInfo& r, v1::TilingInfo* m) {
  VAED_SET(m, r, tile_rows);
  VAED_SET(m, r, tile_cols);
  VAED_SET(m, r, windows);
  VAED_SET(m, r, decoder_calls);
  VAED_SET(m, r, max_tiles_per_call);
  VAED_SET(m, r, stacked);
  VAED_SET(m, r, stack_decision);
  VAED_SET(m, r, planned_tiles_per_call);
  VAED_SET(m, r, final_tiles_per_call);
  VAED_ADD_ALL(m, r, fallbacks);
  VAED_SET(m, r, plan_decision);
  VAED_SET(m, r, planned_calls);
  VAED_SET(m, r, eager_calls);
  VAED_SET(m, r, estimated_peak_bytes);
}

void Back(const GroupReport& r, v1::GroupReport* m) {
  VAED_SET(m, r, name);
  VAED_SET(m, r, size);
  VAED_SET(m, r, generation);
  for (const RankReport& k : r.ranks) {
    v1::RankReport* o = m->add_ranks();
    VAED_SET(o, k, rank);
    VAED_SET(o, k, tiles);
    VAED_SET(o, k, decode_seconds);
    VAED_SET(o, k, started_unix);
    VAED_SET(o, k, finished_unix);
  }
  VAED_SET(m, r, imbalance);
  VAED_SET(m, r, fallback);
}

v1::DecodeReply Back(const DecodeReply& r) {
  v1::DecodeReply m;
  VAED_SET(&m, r, model);
  VAED_ADD_ALL(&m, r, latent_shape);
  m.set_latent_dtype(ToProto(r.latent_dtype));
  VAED_ADD_ALL(&m, r, output_shape);
  m.set_output_dtype(ToProto(r.output_dtype));
  VAED_SET(&m, r, output_bytes);
  VAED_SET(&m, r, frames);
  VAED_SET(&m, r, height_px);
  VAED_SET(&m, r, width_px);
  VAED_SET(&m, r, warm);
  for (const Timing& t : r.timings) Back(t, m.add_timings());
  VAED_SET(&m, r, compute_dtype);
  VAED_SET(&m, r, demo_weights);
  VAED_SET(&m, r, planned_only);
  VAED_SET(&m, r, nonfinite_outputs);
  if (r.tiling) Back(*r.tiling, m.mutable_tiling());
  VAED_SET(&m, r, peak_rss_bytes);
  if (r.audio) Back(*r.audio, m.mutable_audio());
  if (r.video_sanity) Back(*r.video_sanity, m.mutable_video_sanity());
  VAED_SET(&m, r, fps);
  VAED_SET(&m, r, video_seconds);
  VAED_SET(&m, r, expected_audio_latent_frames);
  VAED_SET(&m, r, independent_lengths);
  VAED_SET(&m, r, profile);
  VAED_SET(&m, r, compile_decision);
  VAED_SET(&m, r, peak_tensor_bytes);
  VAED_SET(&m, r, memory_budget_bytes);
  VAED_SET(&m, r, stack_decision);
  VAED_ADD_ALL(&m, r, output_changing);
  if (r.group) Back(*r.group, m.mutable_group());
  VAED_SET(&m, r, outputs_ready_event);
  VAED_SET(&m, r, host_copies);
  VAED_SET(&m, r, host_copy_bytes);
  VAED_SET(&m, r, peak_device_bytes);
  m.set_latent_space(static_cast<v1::LatentSpace>(r.latent_space));
  return m;
}

void Back(const PlanCacheInfo& r, v1::PlanCacheInfo* m) {
  VAED_SET(m, r, capacity);
  VAED_ADD_ALL(m, r, buckets);
  for (const PlanCacheInfo::EagerOnly& e : r.eager_only) {
    v1::PlanCacheInfo::EagerOnly* o = m->add_eager_only();
    VAED_SET(o, e, bucket);
    VAED_SET(o, e, reason);
  }
  VAED_SET(m, r, hits);
  VAED_SET(m, r, builds);
  VAED_SET(m, r, build_failures);
  VAED_SET(m, r, evictions);
  VAED_SET(m, r, eager_calls);
  VAED_SET(m, r, plan_bytes);
}

void Back(const ModelInfo& r, v1::ModelInfo* m) {
  VAED_SET(m, r, name);
  VAED_SET(m, r, kind);
  VAED_SET(m, r, weights_path);
  VAED_SET(m, r, weights_sha256);
  VAED_SET(m, r, demo_weights);
  VAED_SET(m, r, resident_bytes);
  VAED_SET(m, r, description);
  VAED_SET(m, r, compute_dtype);
  VAED_ADD_ALL(m, r, capabilities);
  VAED_SET(m, r, audio_weights_path);
  VAED_SET(m, r, audio_weights_sha256);
  VAED_SET(m, r, audio_sample_rate_hz);
  VAED_SET(m, r, audio_latent_rate_hz);
  VAED_SET(m, r, native_fps);
  if (r.plan_cache) Back(*r.plan_cache, m->mutable_plan_cache());
  VAED_SET(m, r, weights_verification);
}

void Back(const QuarantineEntry& r, v1::QuarantineEntry* m) {
  VAED_SET(m, r, uid);
  VAED_SET(m, r, pid);
  VAED_SET(m, r, client_name);
  VAED_SET(m, r, offences);
  VAED_SET(m, r, remaining_ms);
  VAED_SET(m, r, duration_ms);
  VAED_SET(m, r, last_fault);
  VAED_SET(m, r, faults_in_window);
}

void Back(const ClientEntry& r, v1::ClientEntry* m) {
  VAED_SET(m, r, client_id);
  VAED_SET(m, r, name);
  VAED_SET(m, r, uid);
  VAED_SET(m, r, pid);
  VAED_SET(m, r, regions);
  VAED_SET(m, r, region_bytes);
  VAED_SET(m, r, in_flight);
  VAED_SET(m, r, faults_in_window);
  VAED_SET(m, r, idle_seconds);
}

void Back(const GroupStatus& r, v1::GroupStatus* m) {
  VAED_SET(m, r, name);
  VAED_SET(m, r, size);
  VAED_ADD_ALL(m, r, ranks);
  VAED_SET(m, r, generation);
  VAED_SET(m, r, state);
  VAED_SET(m, r, runs);
  VAED_SET(m, r, failures);
  VAED_SET(m, r, last_failure);
  VAED_SET(m, r, last_imbalance);
}

void Back(const ComponentStats& r, v1::ComponentStats* m) {
  VAED_SET(m, r, component);
  VAED_SET(m, r, count);
  VAED_SET(m, r, sum_seconds);
  VAED_SET(m, r, p50_seconds);
  VAED_SET(m, r, p95_seconds);
}

void Back(const OutcomeCount& r, v1::OutcomeCount* m) {
  VAED_SET(m, r, outcome);
  VAED_SET(m, r, count);
}

void Back(const RankStatus& r, v1::RankStatus* m) {
  VAED_SET(m, r, rank);
  VAED_SET(m, r, busy_seconds);
  VAED_SET(m, r, tiles);
  VAED_SET(m, r, last_imbalance);
  VAED_SET(m, r, device);
  VAED_SET(m, r, device_name);
  VAED_SET(m, r, device_uuid);
  VAED_SET(m, r, device_memory_used_bytes);
  VAED_SET(m, r, device_memory_total_bytes);
}

v1::StatusReply Back(const StatusReply& r) {
  v1::StatusReply m;
  VAED_SET(&m, r, daemon_version);
  VAED_SET(&m, r, uptime_seconds);
  VAED_SET(&m, r, healthy);
  for (const ModelInfo& x : r.models) Back(x, m.add_models());
  VAED_SET(&m, r, default_model);
  VAED_SET(&m, r, clients);
  VAED_SET(&m, r, regions);
  VAED_SET(&m, r, requests_served);
  VAED_SET(&m, r, requests_failed);
  VAED_SET(&m, r, protocol_errors);
  VAED_SET(&m, r, queue_depth);
  VAED_SET(&m, r, intra_op_threads);
  VAED_SET(&m, r, socket);
  VAED_SET(&m, r, pid);
  VAED_SET(&m, r, default_profile);
  VAED_ADD_ALL(&m, r, allowed_profiles);
  VAED_SET(&m, r, client_faults);
  VAED_SET(&m, r, quarantine_rejections);
  VAED_SET(&m, r, busy_rejections);
  VAED_SET(&m, r, deadline_exceeded);
  VAED_SET(&m, r, rejected_connections);
  VAED_SET(&m, r, quarantines);
  for (const QuarantineEntry& x : r.quarantined) Back(x, m.add_quarantined());
  for (const ClientEntry& x : r.client_list) Back(x, m.add_client_list());
  VAED_SET(&m, r, health);
  VAED_SET(&m, r, ranks);
  for (const GroupStatus& x : r.groups) Back(x, m.add_groups());
  for (const ComponentStats& x : r.components) Back(x, m.add_components());
  for (const OutcomeCount& x : r.outcomes) Back(x, m.add_outcomes());
  VAED_SET(&m, r, in_flight);
  VAED_SET(&m, r, resident_weight_bytes);
  VAED_SET(&m, r, plan_cache_entries);
  VAED_SET(&m, r, peak_rss_bytes);
  for (const RankStatus& x : r.rank_status) Back(x, m.add_rank_status());
  VAED_SET(&m, r, metrics_url);
  return m;
}

v1::HelloReply Back(const HelloReply& r) {
  v1::HelloReply m;
  VAED_SET(&m, r, client_id);
  VAED_SET(&m, r, protocol_version);
  VAED_SET(&m, r, daemon_version);
  VAED_SET(&m, r, heartbeat_interval_ms);
  VAED_SET(&m, r, client_timeout_ms);
  VAED_SET(&m, r, heartbeat_liveness);
  VAED_SET(&m, r, max_in_flight);
  VAED_ADD_ALL(&m, r, cuda_devices);
  return m;
}

v1::ReleaseQuarantineReply Back(const ReleaseQuarantineReply& r) {
  v1::ReleaseQuarantineReply m;
  for (const QuarantineEntry& x : r.released) Back(x, m.add_released());
  return m;
}

v1::Progress Back(const Progress& r) {
  v1::Progress m;
  VAED_SET(&m, r, stage);
  VAED_SET(&m, r, done);
  VAED_SET(&m, r, total);
  VAED_SET(&m, r, unit);
  VAED_SET(&m, r, fraction);
  VAED_SET(&m, r, elapsed_seconds);
  VAED_SET(&m, r, eta_seconds);
  VAED_SET(&m, r, tiles_done);
  VAED_SET(&m, r, tiles_total);
  return m;
}

v1::FinalRange Back(const FinalRange& r) {
  v1::FinalRange m;
  VAED_SET(&m, r, stage);
  VAED_SET(&m, r, unit);
  VAED_SET(&m, r, begin);
  VAED_SET(&m, r, end);
  VAED_SET(&m, r, total);
  VAED_SET(&m, r, ready_event);
  return m;
}

#undef VAED_SET
#undef VAED_ADD_ALL

// --- filling messages through their descriptors ------------------------------

// A non-default value for one element of `field`, distinct per `seed`. An
// enum takes its last declared value (non-zero, and valid for the
// library's enums: DType's kUInt8, LatentSpace's kDenormalized).
void SetElement(pb::Message* m, const pb::FieldDescriptor* field, int seed) {
  const pb::Reflection* r = m->GetReflection();
  using F = pb::FieldDescriptor;
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case F::CPPTYPE_INT32:
      rep ? r->AddInt32(m, field, seed) : r->SetInt32(m, field, seed);
      break;
    case F::CPPTYPE_INT64:
      rep ? r->AddInt64(m, field, seed) : r->SetInt64(m, field, seed);
      break;
    case F::CPPTYPE_UINT32:
      rep ? r->AddUInt32(m, field, seed) : r->SetUInt32(m, field, seed);
      break;
    case F::CPPTYPE_UINT64:
      rep ? r->AddUInt64(m, field, seed) : r->SetUInt64(m, field, seed);
      break;
    case F::CPPTYPE_DOUBLE:
      rep ? r->AddDouble(m, field, seed + 0.25) : r->SetDouble(m, field, seed + 0.25);
      break;
    case F::CPPTYPE_FLOAT:
      rep ? r->AddFloat(m, field, seed + 0.25f) : r->SetFloat(m, field, seed + 0.25f);
      break;
    case F::CPPTYPE_BOOL:
      rep ? r->AddBool(m, field, true) : r->SetBool(m, field, true);
      break;
    case F::CPPTYPE_STRING: {
      const std::string v = field->name() + "#" + std::to_string(seed);
      rep ? r->AddString(m, field, v) : r->SetString(m, field, v);
      break;
    }
    case F::CPPTYPE_ENUM: {
      const pb::EnumDescriptor* e = field->enum_type();
      const pb::EnumValueDescriptor* v = e->value(e->value_count() - 1);
      rep ? r->AddEnum(m, field, v) : r->SetEnum(m, field, v);
      break;
    }
    case F::CPPTYPE_MESSAGE:
      break;  // handled by the walks below
  }
}

// A field reachable from a reply: the fields on the way, outermost first.
using FieldPath = std::vector<const pb::FieldDescriptor*>;

// Every scalar, string, enum and repeated field under `descriptor`, and
// every message field (set alone, it stands for the sub-message's presence).
void CollectPaths(const pb::Descriptor* descriptor, const FieldPath& prefix,
                  std::vector<FieldPath>* out) {
  for (int i = 0; i < descriptor->field_count(); ++i) {
    FieldPath path = prefix;
    path.push_back(descriptor->field(i));
    out->push_back(path);
    if (path.back()->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      CollectPaths(path.back()->message_type(), path, out);
    }
  }
}

std::string PathName(const FieldPath& path) {
  std::string name;
  for (const pb::FieldDescriptor* f : path) name += (name.empty() ? "" : ".") + f->name();
  return name;
}

// Sets the field `path` names in `root` to values derived from `seed`,
// creating the messages on the way (a repeated one gets one element, and a
// repeated leaf two).
void SetPath(pb::Message* root, const FieldPath& path, int seed) {
  pb::Message* m = root;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const pb::FieldDescriptor* f = path[i];
    const pb::Reflection* r = m->GetReflection();
    if (!f->is_repeated()) {
      m = r->MutableMessage(m, f);
    } else {
      m = r->FieldSize(*m, f) == 0 ? r->AddMessage(m, f) : r->MutableRepeatedMessage(m, f, 0);
    }
  }
  const pb::FieldDescriptor* leaf = path.back();
  if (leaf->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    if (leaf->is_repeated()) {
      m->GetReflection()->AddMessage(m, leaf);
    } else {
      m->GetReflection()->MutableMessage(m, leaf);
    }
    return;
  }
  SetElement(m, leaf, seed);
  if (leaf->is_repeated()) SetElement(m, leaf, seed + 1);
}

// Each field of `Message` alone, then all of them together, through
// FromProtocol and Back: the message comes back equal.
template <typename Message>
void ExpectEveryFieldCarried() {
  std::vector<FieldPath> paths;
  CollectPaths(Message::descriptor(), {}, &paths);
  ASSERT_FALSE(paths.empty());
  Message all;
  int seed = 1;
  for (const FieldPath& path : paths) {
    Message one;
    SetPath(&one, path, 7);
    const Message back = Back(FromProtocol(one));
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(one, back))
        << PathName(path) << " is not carried:\n  sent " << one.ShortDebugString() << "\n  back "
        << back.ShortDebugString();
    SetPath(&all, path, seed += 2);
  }
  const Message back = Back(FromProtocol(all));
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(all, back))
      << "sent " << all.ShortDebugString() << "\nback " << back.ShortDebugString();
}

TEST(ReplyConversionTest, DecodeReplyCarriesEveryField) {
  ExpectEveryFieldCarried<v1::DecodeReply>();
}

TEST(ReplyConversionTest, StatusReplyCarriesEveryField) {
  ExpectEveryFieldCarried<v1::StatusReply>();
}

TEST(ReplyConversionTest, HelloReplyCarriesEveryField) {
  ExpectEveryFieldCarried<v1::HelloReply>();
}

TEST(ReplyConversionTest, ReleaseQuarantineReplyCarriesEveryField) {
  ExpectEveryFieldCarried<v1::ReleaseQuarantineReply>();
}

TEST(ReplyConversionTest, ProgressCarriesEveryField) { ExpectEveryFieldCarried<v1::Progress>(); }

TEST(ReplyConversionTest, FinalRangeCarriesEveryField) {
  ExpectEveryFieldCarried<v1::FinalRange>();
}

// Unset sub-messages stay unset (std::nullopt), so a caller can tell "not
// reported" from "reported as zeros".
TEST(ReplyConversionTest, UnsetPartsAreAbsent) {
  v1::DecodeReply m;
  m.set_frames(3);
  const DecodeReply r = FromProtocol(m);
  EXPECT_EQ(r.frames, 3u);
  EXPECT_FALSE(r.tiling.has_value());
  EXPECT_FALSE(r.audio.has_value());
  EXPECT_FALSE(r.video_sanity.has_value());
  EXPECT_FALSE(r.group.has_value());
  EXPECT_EQ(r.latent_space, LatentSpace::kUnspecified);
}

}  // namespace
}  // namespace vaed::client
