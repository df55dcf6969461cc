#include "decode_request.h"

#include "vaed/wire.h"

namespace vaed::client {

namespace {

// The knobs of `request` beside its tensors.
void FillOptions(const DecodeRequest& request, bool plan_only, v1::Decode* d) {
  d->set_model(request.model);
  d->set_plan_only(plan_only);
  d->set_output_format(static_cast<v1::OutputFormat>(request.format));
  v1::DecodeOptions* o = d->mutable_options();
  o->set_stack_tiling(static_cast<v1::StackTiling>(request.stack_tiling));
  o->set_profile(request.profile);
  o->set_compile(static_cast<v1::Compile>(request.compile));
  o->set_deadline_ms(request.deadline_ms);
  o->set_group_size(request.group_size);
  for (const std::string& f : request.inject_faults) o->add_inject_faults(f);
  if (request.tiling) {
    o->mutable_tiling()->set_tile_latent(request.tiling->tile_latent);
    o->mutable_tiling()->set_overlap_latent(request.tiling->overlap_latent);
  }
  d->set_latent_space(static_cast<v1::LatentSpace>(request.latent_space));
  if (request.fps != 0 || request.independent_lengths) {
    d->mutable_av_sync()->set_fps(request.fps);
    d->mutable_av_sync()->set_independent_lengths(request.independent_lengths);
  }
}

}  // namespace

Status CheckLatentSpaceHonoured(const DecodeRequest& request, const v1::DecodeReply& reply) {
  if (request.latent_space != LatentSpace::kDenormalized ||
      reply.latent_space() == v1::LATENT_SPACE_DENORMALIZED) {
    return Status::Ok();
  }
  return VersionMismatch(
             "latent_space denormalized was not honoured: the daemon (older than this client, "
             "its reply names no latent space) treats the latents as normalized; upgrade vaed, "
             "or send normalized latents")
      .WithField("latent_space");
}

Status BuildDecode(const DecodeRequest& request, bool plan_only, const RegionIdMap& region_id,
                   v1::Decode* d) {
  FillOptions(request, plan_only, d);
  auto fill = [&](const TensorView& view, std::string_view field, v1::TensorRef* out) -> Status {
    if (plan_only) {
      out->set_dtype(ToProto(view.dtype));
      for (int64_t x : view.shape) out->add_shape(x);
      return Status::Ok();
    }
    VAED_ASSIGN_OR_RETURN(uint64_t id, region_id(view.region_id, field));
    TensorRef ref{id, view.offset, 0, view.dtype, view.shape};
    // The byte size is derived here; the daemon checks it again.
    auto bytes = ContiguousBytes(view.dtype, view.shape, "tensor");
    ref.size = bytes.ok() ? *bytes : 0;
    ToProto(ref, out);
    return Status::Ok();
  };
  if (IsSet(request.latent)) {
    VAED_RETURN_IF_ERROR(fill(request.latent, "latent.region_id", d->mutable_latent()));
  }
  if (IsSet(request.audio_latent)) {
    VAED_RETURN_IF_ERROR(
        fill(request.audio_latent, "audio_latent.region_id", d->mutable_audio_latent()));
  }
  if (!plan_only) {
    if (IsSet(request.output)) {
      VAED_RETURN_IF_ERROR(fill(request.output, "output.region_id", d->mutable_output()));
    }
    if (IsSet(request.audio_output)) {
      VAED_RETURN_IF_ERROR(
          fill(request.audio_output, "audio_output.region_id", d->mutable_audio_output()));
    }
  }
  return Status::Ok();
}

}  // namespace vaed::client
