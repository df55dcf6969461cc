// The C ABI (vaed/vaed_c.h) over the C++ client. Every entry point that
// returns a vaed_status runs its body through CApiCall(), which catches
// whatever the body throws and reports it as a status and message: no C++
// exception crosses into a C caller.
#include <algorithm>
#include <cstring>
#include <memory>

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

void FillResult(const vaed::v1::DecodeReply& r, vaed_decode_result* out) {
  if (!out) return;
  std::memset(out, 0, sizeof(*out));
  out->output_ndim = std::min(r.output_shape_size(), VAED_MAX_DIMS);
  for (int i = 0; i < out->output_ndim; ++i) out->output_shape[i] = r.output_shape(i);
  out->output_dtype = r.output_dtype();
  out->output_bytes = r.output_bytes();
  out->frames = r.frames();
  out->height_px = r.height_px();
  out->width_px = r.width_px();
  out->warm = r.warm() ? 1 : 0;
  out->demo_weights = r.demo_weights() ? 1 : 0;
  out->num_timings = std::min(r.timings_size(), VAED_MAX_TIMINGS);
  for (int i = 0; i < out->num_timings; ++i) {
    std::strncpy(out->timings[i].component, r.timings(i).component().c_str(),
                 sizeof(out->timings[i].component) - 1);
    out->timings[i].seconds = r.timings(i).seconds();
  }
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

}  // namespace

extern "C" {

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
    if (!client || !region || !region_id) {
      return Fail(vaed::InvalidArgument("client, region and region_id must not be NULL"), err,
                  err_len);
    }
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
    if (!client || !out) {
      return Fail(vaed::InvalidArgument("client and out must not be NULL"), err, err_len);
    }
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
