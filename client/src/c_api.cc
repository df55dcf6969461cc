// The C ABI (vaed/vaed_c.h) over the C++ client. Every entry point that
// returns a vaed_status runs its body through CApiCall(), which catches
// whatever the body throws and reports it as a status and message: no C++
// exception crosses into a C caller.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "exception_status.h"
#include "fault_points.h"
#include "vaed/client.h"
#include "vaed/vaed_c.h"

struct vaed_client {
  std::unique_ptr<vaed::client::Client> impl;
};
struct vaed_region {
  std::unique_ptr<vaed::client::SharedRegion> impl;
};

namespace {

vaed_status Fail(const vaed::Status& s, char* err, size_t err_len) {
  if (err && err_len > 0) {
    const std::string m = s.ToString();
    const size_t n = std::min(m.size(), err_len - 1);
    std::memcpy(err, m.data(), n);
    err[n] = '\0';
  }
  return static_cast<vaed_status>(s.code());
}

// Runs the body of C ABI function `function` (its name, for messages and
// the fault point of the same name). What the body throws becomes
// kResourceExhausted (out of memory) or kInternal, written into `err`
// without allocating.
template <typename Body>
vaed_status CApiCall(const char* function, char* err, size_t err_len, Body&& body) noexcept {
  try {
    vaed::client::internal::FaultPoint(function);
    return body();
  } catch (...) {
    return vaed::client::WriteCurrentException(function, err, err_len);
  }
}

vaed::Status CheckTensor(const vaed_tensor* t, const char* what) {
  if (!t) return vaed::InvalidArgument(std::string(what) + " is NULL");
  if (t->ndim < 1 || t->ndim > VAED_MAX_DIMS) {
    return vaed::InvalidArgument(std::string(what) + ".ndim is " + std::to_string(t->ndim) +
                                 "; must be 1.." + std::to_string(VAED_MAX_DIMS));
  }
  return vaed::Status::Ok();
}

vaed::client::TensorView ToView(const vaed_tensor& t) {
  return {t.region_id, t.offset, static_cast<vaed::DType>(t.dtype),
          std::vector<int64_t>(t.shape, t.shape + t.ndim)};
}

// The first VAED_MAX_DIMS dimensions of `from`; returns how many.
int32_t CopyShape(const std::vector<int64_t>& from, int64_t (&to)[VAED_MAX_DIMS]) {
  const int n = std::min(static_cast<int>(from.size()), VAED_MAX_DIMS);
  for (int i = 0; i < n; ++i) to[i] = from[i];
  return n;
}

// The fields vaed_decode_result (frozen) and vaed_reply share, by name:
// output geometry, warm/demo flags and the timings.
template <typename Out>
void FillCommon(const vaed::client::DecodeReply& r, Out* out) {
  out->output_ndim = CopyShape(r.output_shape, out->output_shape);
  out->output_dtype = static_cast<int32_t>(r.output_dtype);
  out->output_bytes = r.output_bytes;
  out->frames = r.frames;
  out->height_px = r.height_px;
  out->width_px = r.width_px;
  out->warm = r.warm ? 1 : 0;
  out->demo_weights = r.demo_weights ? 1 : 0;
  out->num_timings = std::min(static_cast<int>(r.timings.size()), VAED_MAX_TIMINGS);
  for (int i = 0; i < out->num_timings; ++i) {
    const std::string& name = r.timings[i].component;
    const size_t n = std::min(name.size(), sizeof(out->timings[i].component) - 1);
    std::memcpy(out->timings[i].component, name.data(), n);
    out->timings[i].component[n] = '\0';
    out->timings[i].seconds = r.timings[i].seconds;
  }
}

void FillResult(const vaed::client::DecodeReply& r, vaed_decode_result* out) {
  if (!out) return;
  std::memset(out, 0, sizeof(*out));
  FillCommon(r, out);
}

// The body of vaed_decode and vaed_decode_on_stream.
vaed_status Decode(vaed_client* client, const char* model, const vaed_tensor* latent,
                   const vaed_tensor* output, int32_t output_format, void* cuda_stream,
                   vaed_decode_result* result, char* err, size_t err_len) {
  if (!client) return Fail(vaed::InvalidArgument("client is NULL"), err, err_len);
  if (auto s = CheckTensor(latent, "latent"); !s.ok()) return Fail(s, err, err_len);
  if (auto s = CheckTensor(output, "output"); !s.ok()) return Fail(s, err, err_len);
  vaed::client::DecodeRequest req;
  req.model = model ? model : "";
  req.latent = ToView(*latent);
  req.output = ToView(*output);
  req.format = static_cast<vaed::client::OutputFormat>(output_format);
  req.cuda_stream = cuda_stream;
  auto r = client->impl->Decode(req);
  if (!r.ok()) return Fail(r.status(), err, err_len);
  FillResult(*r, result);
  return 0;
}

// --- growing structs (vaed_request, vaed_reply, vaed_progress, vaed_final_range) ---

// The first published size of each growing struct: the end of its last
// field in the first version of vaed_c.h. Fields appended later are beyond
// these; callers built against that first header pass exactly these sizes
// (or more, with tail padding).
constexpr size_t kRequestSizeV1 = offsetof(vaed_request, cuda_stream) + sizeof(void*);
constexpr size_t kReplySizeV1 =
    offsetof(vaed_reply, timings) + sizeof(vaed_timing) * VAED_MAX_TIMINGS;
static_assert(kRequestSizeV1 <= sizeof(vaed_request));
static_assert(kReplySizeV1 <= sizeof(vaed_reply));
static_assert(offsetof(vaed_request, struct_size) == 0 && offsetof(vaed_reply, struct_size) == 0 &&
              offsetof(vaed_progress, struct_size) == 0 &&
              offsetof(vaed_final_range, struct_size) == 0);
// Appended fields lie past the first published size, so ReadRequest()
// leaves them at their zero defaults for callers built against an older
// header (final_range: streamed output).
static_assert(offsetof(vaed_request, final_range) >= kRequestSizeV1);
static_assert(offsetof(vaed_request, latent_space) >= kRequestSizeV1);

vaed::Status BadSize(const char* what, uint32_t size, size_t min) {
  return vaed::InvalidArgument(std::string(what) + "->struct_size is " + std::to_string(size) +
                               "; must be at least " + std::to_string(min) +
                               " (initialise it with VAED_" +
                               (std::strcmp(what, "request") == 0 ? "REQUEST" : "REPLY") +
                               "_INIT or vaed_" + what + "_init)");
}

// Copies the caller's request into a zeroed vaed_request of this library's
// layout: the fields within request->struct_size; the rest keep their
// zero defaults. Bytes past this library's layout must be zero.
vaed::Status ReadRequest(const vaed_request* in, vaed_request* out) {
  if (!in) return vaed::InvalidArgument("request is NULL");
  const uint32_t size = in->struct_size;
  if (size < kRequestSizeV1) return BadSize("request", size, kRequestSizeV1);
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out, in, std::min<size_t>(size, sizeof(*out)));
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(*out); i < size; ++i) {
    if (bytes[i] != 0) {
      return vaed::InvalidArgument(
          "request sets fields this library version does not know (struct_size " +
          std::to_string(size) + ", this library's vaed_request has " +
          std::to_string(sizeof(*out)) + " bytes; byte " + std::to_string(i) +
          " is not zero): use a libvaed_client.so.0 at least as new as vaed_c.h");
    }
  }
  return vaed::Status::Ok();
}

vaed::Status CheckReplySize(const vaed_reply* reply) {
  if (reply && reply->struct_size < kReplySizeV1) {
    return BadSize("reply", reply->struct_size, kReplySizeV1);
  }
  return vaed::Status::Ok();
}

// Writes `full` into the caller's reply, within its struct_size (which it
// keeps); bytes this library does not know are zeroed.
void WriteReply(const vaed_reply& full, vaed_reply* out) {
  if (!out) return;
  const uint32_t size = out->struct_size;
  const size_t known = std::min<size_t>(size, sizeof(full));
  std::memcpy(out, &full, known);
  if (size > known) std::memset(reinterpret_cast<unsigned char*>(out) + known, 0, size - known);
  out->struct_size = size;
}

template <size_t N>
void CopyString(const std::string& from, char (&to)[N]) {
  const size_t n = std::min(from.size(), N - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

void FillReply(const vaed::client::DecodeReply& r, vaed_reply* out) {
  std::memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  FillCommon(r, out);
  out->planned_only = r.planned_only ? 1 : 0;
  out->independent_lengths = r.independent_lengths ? 1 : 0;
  out->nonfinite_outputs = r.nonfinite_outputs;
  out->fps = r.fps;
  out->video_seconds = r.video_seconds;
  out->expected_audio_latent_frames = r.expected_audio_latent_frames;
  if (r.audio) {
    const vaed::client::AudioInfo& a = *r.audio;
    const vaed::client::OutputSanity sanity = a.sanity.value_or(vaed::client::OutputSanity{});
    out->has_audio = 1;
    out->audio_output_ndim = CopyShape(a.output_shape, out->audio_output_shape);
    out->audio_output_bytes = a.output_bytes;
    out->audio_channels = a.channels;
    out->audio_sample_rate_hz = a.sample_rate_hz;
    out->audio_latent_frames = a.latent_frames;
    out->audio_samples = a.samples;
    out->audio_seconds = a.seconds;
    out->audio_nonfinite = sanity.nonfinite;
    out->audio_constant = sanity.constant ? 1 : 0;
    out->audio_rms = sanity.rms;
    out->audio_peak_abs = sanity.peak_abs;
    out->audio_clipped_fraction = sanity.clipped_fraction;
  }
  CopyString(r.model, out->model);
  CopyString(r.profile, out->profile);
  CopyString(r.compile_decision, out->compile_decision);
  const vaed::client::TilingInfo tiling = r.tiling.value_or(vaed::client::TilingInfo{});
  CopyString(r.tiling && !tiling.stack_decision.empty() ? tiling.stack_decision : r.stack_decision,
             out->stack_decision);
  out->tile_rows = tiling.tile_rows;
  out->tile_cols = tiling.tile_cols;
  out->windows = tiling.windows;
  out->decoder_calls = tiling.decoder_calls;
  const vaed::client::GroupReport group = r.group.value_or(vaed::client::GroupReport{});
  out->group_size = group.size;
  out->group_ranks = static_cast<uint32_t>(group.ranks.size());
  out->group_imbalance = group.imbalance;
  CopyString(group.name, out->group_name);
  CopyString(group.fallback, out->group_fallback);
  out->peak_rss_bytes = r.peak_rss_bytes;
  out->peak_device_bytes = r.peak_device_bytes;
  out->host_copy_bytes = r.host_copy_bytes;
  out->host_copies = r.host_copies;
}

vaed::Status CheckEnum(const char* field, int32_t value, int32_t max, const char* names) {
  if (value >= 0 && value <= max) return vaed::Status::Ok();
  return vaed::InvalidArgument(std::string("request->") + field + " is " + std::to_string(value) +
                               "; must be " + names);
}

// The C request as a vaed::client::DecodeRequest: checks what the daemon
// cannot name the C way (NULL pointers, enum ranges, ndim) and, for a
// decode (`decode` true), that every latent comes with its output.
vaed::Status ToDecodeRequest(const vaed_request& c, bool decode, vaed::client::DecodeRequest* req) {
  if (!c.latent && !c.audio_latent) {
    return vaed::InvalidArgument(
        "request->latent and request->audio_latent are both NULL: nothing to decode");
  }
  if (decode) {
    if (c.latent && !c.output) {
      return vaed::InvalidArgument("request->output is NULL but request->latent is set");
    }
    if (!c.latent && c.output) {
      return vaed::InvalidArgument("request->output is set but request->latent is NULL");
    }
    if (c.audio_latent && !c.audio_output) {
      return vaed::InvalidArgument(
          "request->audio_output is NULL but request->audio_latent is set");
    }
    if (!c.audio_latent && c.audio_output) {
      return vaed::InvalidArgument(
          "request->audio_output is set but request->audio_latent is NULL");
    }
  }
  VAED_RETURN_IF_ERROR(CheckEnum("output_format", c.output_format, VAED_OUTPUT_FLOAT32_NCHW_UNIT,
                                 "0 (default: VAED_OUTPUT_UINT8_NHWC) or a VAED_OUTPUT_* value"));
  VAED_RETURN_IF_ERROR(CheckEnum("stack_tiling", c.stack_tiling, VAED_STACK_TILING_AUTO,
                                 "a VAED_STACK_TILING_* value (0..3)"));
  VAED_RETURN_IF_ERROR(
      CheckEnum("compile", c.compile, VAED_COMPILE_AUTO, "a VAED_COMPILE_* value (0..3)"));
  VAED_RETURN_IF_ERROR(CheckEnum("latent_space", c.latent_space, VAED_LATENT_SPACE_DENORMALIZED,
                                 "0 (default: normalized) or a VAED_LATENT_SPACE_* value"));
  if (c.reserved0 != 0) return vaed::InvalidArgument("request->reserved0 must be 0");
  if (c.reserved1 != 0) return vaed::InvalidArgument("request->reserved1 must be 0");
  if (std::isnan(c.fps)) return vaed::InvalidArgument("request->fps is NaN");
  struct Named {
    const vaed_tensor* tensor;
    const char* name;
    vaed::client::TensorView* view;
  };
  const Named tensors[] = {
      {c.latent, "request->latent", &req->latent},
      {decode ? c.output : nullptr, "request->output", &req->output},
      {c.audio_latent, "request->audio_latent", &req->audio_latent},
      {decode ? c.audio_output : nullptr, "request->audio_output", &req->audio_output}};
  for (const Named& t : tensors) {
    if (!t.tensor) continue;
    VAED_RETURN_IF_ERROR(CheckTensor(t.tensor, t.name));
    *t.view = ToView(*t.tensor);
  }
  req->model = c.model ? c.model : "";
  req->format = static_cast<vaed::client::OutputFormat>(
      c.output_format == 0 ? VAED_OUTPUT_UINT8_NHWC : c.output_format);
  req->stack_tiling = static_cast<vaed::client::StackTiling>(c.stack_tiling);
  req->compile = static_cast<vaed::client::Compile>(c.compile);
  req->profile = c.profile ? c.profile : "";
  req->group_size = c.group_size;
  req->deadline_ms = c.deadline_ms;
  req->fps = c.fps;
  req->independent_lengths = c.independent_lengths != 0;
  req->latent_space = c.latent_space == VAED_LATENT_SPACE_DENORMALIZED
                          ? vaed::client::LatentSpace::kDenormalized
                          : vaed::client::LatentSpace::kNormalized;
  req->cuda_stream = c.cuda_stream;
  if (decode && c.progress) {
    req->progress = [fn = c.progress,
                     user = c.progress_user_data](const vaed::client::Progress& p) {
      vaed_progress e;
      std::memset(&e, 0, sizeof(e));
      e.struct_size = sizeof(e);
      e.done = p.done;
      e.total = p.total;
      e.tiles_done = p.tiles_done;
      e.tiles_total = p.tiles_total;
      CopyString(p.stage, e.stage);
      CopyString(p.unit, e.unit);
      e.fraction = p.fraction;
      e.elapsed_seconds = p.elapsed_seconds;
      e.eta_seconds = p.eta_seconds;
      fn(&e, user);
    };
  }
  if (decode && c.final_range) {
    req->final_range = [fn = c.final_range,
                        user = c.final_range_user_data](const vaed::client::FinalRange& r) {
      vaed_final_range e;
      std::memset(&e, 0, sizeof(e));
      e.struct_size = sizeof(e);
      // Valid during the call only (vaed_c.h): `r` outlives it.
      e.stage = r.stage.c_str();
      e.unit = r.unit.c_str();
      e.begin = r.begin;
      e.end = r.end;
      e.total = r.total;
      fn(&e, user);
    };
  }
  return vaed::Status::Ok();
}

// The body of vaed_plan_decode_ex (decode false) and vaed_decode_ex.
vaed_status RunRequest(vaed_client* client, const vaed_request* request, vaed_reply* reply,
                       bool decode, char* err, size_t err_len) {
  if (!client) return Fail(vaed::InvalidArgument("client is NULL"), err, err_len);
  if (!decode && !reply) return Fail(vaed::InvalidArgument("reply is NULL"), err, err_len);
  vaed_request c;
  if (auto s = ReadRequest(request, &c); !s.ok()) return Fail(s, err, err_len);
  if (auto s = CheckReplySize(reply); !s.ok()) return Fail(s, err, err_len);
  vaed::client::DecodeRequest req;
  if (auto s = ToDecodeRequest(c, decode, &req); !s.ok()) return Fail(s, err, err_len);
  auto r = decode ? client->impl->Decode(req) : client->impl->PlanDecode(req);
  if (!r.ok()) return Fail(r.status(), err, err_len);
  if (reply) {
    auto full = std::make_unique<vaed_reply>();
    FillReply(*r, full.get());
    WriteReply(*full, reply);
  }
  return 0;
}

}  // namespace

extern "C" {

const char* vaed_status_name(vaed_status status) VAED_C_NOEXCEPT {
  // StatusCodeName returns string literals (NUL-terminated, static).
  return vaed::StatusCodeName(static_cast<vaed::StatusCode>(status)).data();
}

vaed_status vaed_plan_decode_ex(vaed_client* client, const vaed_request* request, vaed_reply* reply,
                                char* err, size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_plan_decode_ex", err, err_len, [&]() -> vaed_status {
    return RunRequest(client, request, reply, /*decode=*/false, err, err_len);
  });
}

vaed_status vaed_decode_ex(vaed_client* client, const vaed_request* request, vaed_reply* reply,
                           char* err, size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_decode_ex", err, err_len, [&]() -> vaed_status {
    return RunRequest(client, request, reply, /*decode=*/true, err, err_len);
  });
}

vaed_status vaed_connect(const char* socket, const char* client_name, vaed_client** out, char* err,
                         size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_connect", err, err_len, [&]() -> vaed_status {
    if (!out) return Fail(vaed::InvalidArgument("out is NULL"), err, err_len);
    vaed::client::ClientOptions options;
    if (socket && *socket) options.socket = socket;
    if (client_name && *client_name) options.client_name = client_name;
    auto c = vaed::client::Client::Connect(options);
    if (!c.ok()) return Fail(c.status(), err, err_len);
    *out = new vaed_client{std::move(c).value()};
    return 0;
  });
}

void vaed_client_free(vaed_client* client) VAED_C_NOEXCEPT { delete client; }

vaed_status vaed_region_create(uint64_t bytes, vaed_region** out, char* err,
                               size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_region_create", err, err_len, [&]() -> vaed_status {
    if (!out) return Fail(vaed::InvalidArgument("out is NULL"), err, err_len);
    auto r = vaed::client::SharedRegion::Create(bytes);
    if (!r.ok()) return Fail(r.status(), err, err_len);
    *out = new vaed_region{std::move(r).value()};
    return 0;
  });
}

void* vaed_region_data(vaed_region* region) VAED_C_NOEXCEPT {
  return region ? region->impl->data() : nullptr;
}
uint64_t vaed_region_size(const vaed_region* region) VAED_C_NOEXCEPT {
  return region ? region->impl->size() : 0;
}
void vaed_region_free(vaed_region* region) VAED_C_NOEXCEPT { delete region; }

vaed_status vaed_register_region(vaed_client* client, const vaed_region* region,
                                 uint64_t* region_id, char* err, size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_register_region", err, err_len, [&]() -> vaed_status {
    if (!client) return Fail(vaed::InvalidArgument("client is NULL"), err, err_len);
    if (!region) return Fail(vaed::InvalidArgument("region is NULL"), err, err_len);
    if (!region_id) return Fail(vaed::InvalidArgument("region_id is NULL"), err, err_len);
    auto id = client->impl->RegisterRegion(*region->impl);
    if (!id.ok()) return Fail(id.status(), err, err_len);
    *region_id = *id;
    return 0;
  });
}

vaed_status vaed_plan_decode(vaed_client* client, const char* model, const vaed_tensor* latent,
                             int32_t output_format, vaed_decode_result* result, char* err,
                             size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_plan_decode", err, err_len, [&]() -> vaed_status {
    if (!client) return Fail(vaed::InvalidArgument("client is NULL"), err, err_len);
    if (auto s = CheckTensor(latent, "latent"); !s.ok()) return Fail(s, err, err_len);
    auto r = client->impl->PlanDecode(model ? model : "", static_cast<vaed::DType>(latent->dtype),
                                      ToView(*latent).shape,
                                      static_cast<vaed::client::OutputFormat>(output_format));
    if (!r.ok()) return Fail(r.status(), err, err_len);
    FillResult(*r, result);
    return 0;
  });
}

vaed_status vaed_decode(vaed_client* client, const char* model, const vaed_tensor* latent,
                        const vaed_tensor* output, int32_t output_format,
                        vaed_decode_result* result, char* err, size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_decode", err, err_len, [&]() -> vaed_status {
    return Decode(client, model, latent, output, output_format, nullptr, result, err, err_len);
  });
}

vaed_status vaed_decode_on_stream(vaed_client* client, const char* model, const vaed_tensor* latent,
                                  const vaed_tensor* output, int32_t output_format,
                                  void* cuda_stream, vaed_decode_result* result, char* err,
                                  size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_decode_on_stream", err, err_len, [&]() -> vaed_status {
    return Decode(client, model, latent, output, output_format, cuda_stream, result, err, err_len);
  });
}

vaed_status vaed_unregister_region(vaed_client* client, uint64_t region_id, char* err,
                                   size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_unregister_region", err, err_len, [&]() -> vaed_status {
    if (!client) return Fail(vaed::InvalidArgument("client is NULL"), err, err_len);
    if (auto s = client->impl->UnregisterRegion(region_id); !s.ok()) return Fail(s, err, err_len);
    return 0;
  });
}

vaed_status vaed_register_cuda_region(vaed_client* client, const void* device_ptr, uint64_t bytes,
                                      vaed_cuda_region* out, char* err,
                                      size_t err_len) VAED_C_NOEXCEPT {
  return CApiCall("vaed_register_cuda_region", err, err_len, [&]() -> vaed_status {
    if (!client) return Fail(vaed::InvalidArgument("client is NULL"), err, err_len);
    if (!out) return Fail(vaed::InvalidArgument("out is NULL"), err, err_len);
    auto r = client->impl->RegisterCudaRegion(device_ptr, bytes);
    if (!r.ok()) return Fail(r.status(), err, err_len);
    std::memset(out, 0, sizeof(*out));
    out->region_id = r->region_id;
    out->offset_bytes = r->offset_bytes;
    out->size_bytes = r->size_bytes;
    std::strncpy(out->device_uuid, r->device_uuid.c_str(), sizeof(out->device_uuid) - 1);
    return 0;
  });
}

}  // extern "C"
