// vaed_client._core: the pybind11 binding of the C++ client library
// (client/include/vaed/client.h). It links neither LibTorch nor Python's
// numpy C API: tensors cross as (region id, byte offset, dtype name, shape),
// regions expose the buffer protocol, and replies become plain dicts.
//
// Errors: every failing call raises the exception that
// vaed_client.errors.from_status() builds for the C++ Status (code name,
// message, retry_after_ms, and for a streamed decode final_frames /
// final_samples), so Python sees ValidationError, Quarantined, Busy,
// DaemonUnavailable, ... with the daemon's message.
//
// The GIL is released while a call talks to the daemon, so other Python
// threads run during a decode; the C++ Client serializes calls on its one
// socket.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/cuda_buffer.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"
#include "vaed/v1/vaed.pb.h"

namespace py = pybind11;

namespace vaed::python {
namespace {

namespace pb = google::protobuf;
using client::ClientProtocol;

// A failed Status on its way to Python; the translator below turns it into
// the vaed_client.errors class for its code.
class StatusException : public std::exception {
 public:
  explicit StatusException(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusException(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) throw StatusException(result.status());
  return std::move(*result);
}

py::object FieldValue(const pb::Message& message, const pb::FieldDescriptor* field, int index);

// A protobuf message as a dict keyed by proto field names. Scalars keep
// their Python type (int64/uint64 stay ints, not the strings of proto3
// JSON); enums are their value names (e.g. "DTYPE_UINT8"); repeated fields
// are lists; unset message fields and unset oneof members are left out,
// scalar fields are always present (proto3 defaults).
py::dict MessageToDict(const pb::Message& message) {
  py::dict out;
  const pb::Descriptor* descriptor = message.GetDescriptor();
  const pb::Reflection* reflection = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const pb::FieldDescriptor* field = descriptor->field(i);
    py::str key(field->name());
    if (field->is_repeated()) {
      py::list values;
      const int n = reflection->FieldSize(message, field);
      for (int k = 0; k < n; ++k) values.append(FieldValue(message, field, k));
      out[key] = std::move(values);
    } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE ||
               field->containing_oneof() != nullptr) {
      if (reflection->HasField(message, field)) out[key] = FieldValue(message, field, -1);
    } else {
      out[key] = FieldValue(message, field, -1);
    }
  }
  return out;
}

// Element `index` of a repeated scalar field, or the singular value when
// index < 0, read through the Reflection getter pair for its C++ type.
template <typename T>
T Scalar(const pb::Message& message, const pb::FieldDescriptor* field, int index,
         T (pb::Reflection::*get)(const pb::Message&, const pb::FieldDescriptor*) const,
         T (pb::Reflection::*get_repeated)(const pb::Message&, const pb::FieldDescriptor*, int)
             const) {
  const pb::Reflection* r = message.GetReflection();
  return index >= 0 ? (r->*get_repeated)(message, field, index) : (r->*get)(message, field);
}

// One value of `field` (element `index` of a repeated field, or the
// singular value when index < 0).
py::object FieldValue(const pb::Message& message, const pb::FieldDescriptor* field, int index) {
  using R = pb::Reflection;
  const auto& m = message;
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return py::int_(Scalar(m, field, index, &R::GetInt32, &R::GetRepeatedInt32));
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return py::int_(Scalar(m, field, index, &R::GetInt64, &R::GetRepeatedInt64));
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return py::int_(Scalar(m, field, index, &R::GetUInt32, &R::GetRepeatedUInt32));
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return py::int_(Scalar(m, field, index, &R::GetUInt64, &R::GetRepeatedUInt64));
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return py::float_(Scalar(m, field, index, &R::GetDouble, &R::GetRepeatedDouble));
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return py::float_(Scalar(m, field, index, &R::GetFloat, &R::GetRepeatedFloat));
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return py::bool_(Scalar(m, field, index, &R::GetBool, &R::GetRepeatedBool));
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      return py::str(Scalar(m, field, index, &R::GetEnum, &R::GetRepeatedEnum)->name());
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      const std::string s = Scalar(m, field, index, &R::GetString, &R::GetRepeatedString);
      if (field->type() == pb::FieldDescriptor::TYPE_BYTES) return py::bytes(s);
      return py::str(s);
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      if (index >= 0) return MessageToDict(m.GetReflection()->GetRepeatedMessage(m, field, index));
      return MessageToDict(m.GetReflection()->GetMessage(m, field));
  }
  return py::none();
}

// "float32" / "float16" / "bfloat16" / "uint8" -> DType; raises
// ValidationError naming `field` otherwise.
DType ParseDTypeField(const std::string& name, const char* field) {
  Result<DType> dtype = ParseDType(name);
  if (!dtype.ok() || *dtype == DType::kUnknown) {
    throw StatusException(InvalidArgument(std::string(field) + ".dtype '" + name +
                                          "' is not one of float32, float16, bfloat16, uint8"));
  }
  return *dtype;
}

// A tensor argument from Python: (region_id, offset_bytes, dtype, shape),
// or None for "not sent".
using TensorArg = std::optional<std::tuple<uint64_t, uint64_t, std::string, std::vector<int64_t>>>;

client::TensorView ToView(const TensorArg& arg, const char* field) {
  if (!arg) return {};
  const auto& [region_id, offset, dtype, shape] = *arg;
  return {region_id, offset, ParseDTypeField(dtype, field), shape};
}

// The decode knobs shared by plan() and decode(), as Python keyword
// arguments with the C++ defaults.
struct DecodeArgs {
  std::string model;
  TensorArg latent, output, audio_latent, audio_output;
  int format = 1;
  int stack_tiling = 0;
  int compile = 0;
  double fps = 0;
  bool independent_lengths = false;
  // 1 normalized, 2 denormalized (client::LatentSpace).
  int latent_space = 1;
  std::string profile;
  uint32_t deadline_ms = 0;
  uint32_t group_size = 0;
  std::vector<std::string> inject_faults;
  std::optional<std::pair<uint32_t, uint32_t>> tiling;
  // GPU: the caller's CUstream value (DecodeRequest::cuda_stream); 0 = the
  // legacy default stream. Used only for requests naming CUDA regions.
  uintptr_t cuda_stream = 0;
  // Called with a dict per Progress message (DecodeOptions.progress); None
  // = no progress. Runs on the thread that called decode(), which takes
  // the GIL again for it. A Python exception it raises is reported through
  // sys.unraisablehook and the decode goes on; any other C++ exception
  // (out of memory building the dict) is kept by the C++ client and
  // rethrown by Decode() once the decode is over, so Python sees it then.
  py::object progress = py::none();
  // Streamed output (DecodeOptions.stream_output): called with a dict
  // {stage, unit, begin, end, total} per FinalRange (DecodeRequest::
  // final_range; the CUDA ready event is waited on by the C++ client, not
  // passed). None = no streaming. Same thread, GIL and exception rules as
  // `progress`.
  py::object final_range = py::none();

  client::DecodeRequest ToRequest() const {
    if (format < 1 || format > 3) {
      throw StatusException(InvalidArgument("format " + std::to_string(format) +
                                            " is not 1 (uint8 NHWC), 2 (float32 NCHW) or 3 "
                                            "(float32 NCHW in [0, 1])"));
    }
    if (stack_tiling < 0 || stack_tiling > 3 || compile < 0 || compile > 3) {
      throw StatusException(InvalidArgument(
          "stack_tiling and compile must be 0 (default), 1 (off), 2 (on) or 3 (auto)"));
    }
    if (latent_space < 1 || latent_space > 2) {
      throw StatusException(InvalidArgument("latent_space " + std::to_string(latent_space) +
                                            " is not 1 (normalized) or 2 (denormalized)"));
    }
    client::DecodeRequest request;
    request.model = model;
    request.latent = ToView(latent, "video_latent");
    request.output = ToView(output, "output");
    request.audio_latent = ToView(audio_latent, "audio_latent");
    request.audio_output = ToView(audio_output, "audio_output");
    request.format = static_cast<client::OutputFormat>(format);
    request.stack_tiling = static_cast<client::StackTiling>(stack_tiling);
    request.compile = static_cast<client::Compile>(compile);
    request.fps = fps;
    request.independent_lengths = independent_lengths;
    request.latent_space = static_cast<client::LatentSpace>(latent_space);
    request.profile = profile;
    request.deadline_ms = deadline_ms;
    request.group_size = group_size;
    request.inject_faults = inject_faults;
    if (tiling) request.tiling = client::DecodeRequest::Tiling{tiling->first, tiling->second};
    request.cuda_stream = reinterpret_cast<void*>(cuda_stream);
    if (!progress.is_none()) {
      // Copied (and later released) with the GIL held: ToRequest() and the
      // request's destruction happen outside the released sections.
      request.progress = [callback = progress](const client::Progress& p) {
        py::gil_scoped_acquire gil;
        try {
          // The keys and order of vaed.v1.Progress's fields, as MessageToDict
          // gives them for the other replies.
          py::dict fields;
          fields["stage"] = p.stage;
          fields["done"] = p.done;
          fields["total"] = p.total;
          fields["unit"] = p.unit;
          fields["fraction"] = p.fraction;
          fields["elapsed_seconds"] = p.elapsed_seconds;
          fields["eta_seconds"] = p.eta_seconds;
          fields["tiles_done"] = p.tiles_done;
          fields["tiles_total"] = p.tiles_total;
          callback(std::move(fields));
        } catch (py::error_already_set& e) {
          // The decode goes on; Python reports the callback's exception.
          e.discard_as_unraisable("vaed_client progress callback");
        }
      };
    }
    if (!final_range.is_none()) {
      // Copied and released with the GIL held, as `progress` above.
      request.final_range = [callback = final_range](const client::FinalRange& r) {
        py::gil_scoped_acquire gil;
        try {
          py::dict range;
          range["stage"] = r.stage;
          range["unit"] = r.unit;
          range["begin"] = r.begin;
          range["end"] = r.end;
          range["total"] = r.total;
          callback(std::move(range));
        } catch (py::error_already_set& e) {
          // The decode goes on; Python reports the callback's exception.
          e.discard_as_unraisable("vaed_client final_range callback");
        }
      };
    }
    return request;
  }
};

DecodeArgs MakeArgs(std::string model, TensorArg latent, TensorArg output, TensorArg audio_latent,
                    TensorArg audio_output, int format, int stack_tiling, int compile, double fps,
                    bool independent_lengths, int latent_space, std::string profile,
                    uint32_t deadline_ms, uint32_t group_size,
                    std::vector<std::string> inject_faults,
                    std::optional<std::pair<uint32_t, uint32_t>> tiling, py::object progress,
                    uintptr_t cuda_stream, py::object final_range) {
  if (!progress.is_none() && !PyCallable_Check(progress.ptr())) {
    throw StatusException(InvalidArgument("progress must be callable or None"));
  }
  if (!final_range.is_none() && !PyCallable_Check(final_range.ptr())) {
    throw StatusException(InvalidArgument("final_range must be callable or None"));
  }
  return {std::move(model),
          std::move(latent),
          std::move(output),
          std::move(audio_latent),
          std::move(audio_output),
          format,
          stack_tiling,
          compile,
          fps,
          independent_lengths,
          latent_space,
          std::move(profile),
          deadline_ms,
          group_size,
          std::move(inject_faults),
          tiling,
          cuda_stream,
          std::move(progress),
          std::move(final_range)};
}

// --- DLPack (dlpack.h, v0.8 "dltensor" capsules; the ABI is stable since v0.2) ---
struct DLDevice {
  int32_t device_type;  // kDLCPU 1, kDLCUDA 2, kDLCUDAHost 3, kDLCUDAManaged 13
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // elements; NULL = C-contiguous
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// What a "dltensor" capsule describes, without consuming it (the capsule
// keeps owning the tensor; its destructor releases it): data (the address
// of the first element, byte_offset applied), device (type, id), dtype
// (code, bits, lanes), shape, strides (elements, or None).
py::dict DlpackTensorInfo(const py::capsule& capsule) {
  if (std::string_view(capsule.name() ? capsule.name() : "") != "dltensor") {
    throw StatusException(InvalidArgument(
        std::string("a DLPack capsule must be named 'dltensor' (unconsumed), got '") +
        (capsule.name() ? capsule.name() : "") + "'"));
  }
  const auto* managed = capsule.get_pointer<DLManagedTensor>();
  if (managed == nullptr) throw StatusException(InvalidArgument("an empty DLPack capsule"));
  const DLTensor& t = managed->dl_tensor;
  if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) {
    throw StatusException(InvalidArgument("a DLPack tensor without a shape"));
  }
  py::dict info;
  info["data"] = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  info["device"] = py::make_tuple(t.device.device_type, t.device.device_id);
  info["dtype"] = py::make_tuple(t.dtype.code, t.dtype.bits, t.dtype.lanes);
  info["shape"] = std::vector<int64_t>(t.shape, t.shape + t.ndim);
  if (t.strides == nullptr) {
    info["strides"] = py::none();
  } else {
    info["strides"] = std::vector<int64_t>(t.strides, t.strides + t.ndim);
  }
  return info;
}

// A POSIX shm segment this process owns (SharedRegion), with the buffer
// protocol: a writable 1-D uint8 buffer of `nbytes` bytes. numpy views of
// it keep the Region (and so the mapping) alive.
class Region {
 public:
  explicit Region(uint64_t nbytes, const std::string& name) {
    region_ = ValueOrThrow(name.empty() ? client::SharedRegion::Create(nbytes)
                                        : client::SharedRegion::Create(name, nbytes));
  }
  client::SharedRegion& get() { return *region_; }
  uint64_t nbytes() const { return region_->size(); }
  const std::string& name() const { return region_->name(); }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(region_->data()); }
  py::buffer_info Buffer() {
    return py::buffer_info(region_->data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                           {static_cast<py::ssize_t>(region_->size())}, {1}, /*readonly=*/false);
  }

 private:
  std::unique_ptr<client::SharedRegion> region_;
};

// Runs `call` (a client call returning Result<Message>) without the GIL
// and returns its reply as a dict, or raises its error.
template <typename Call>
py::dict ReplyDict(Call&& call) {
  auto reply = [&] {
    py::gil_scoped_release release;
    return call();
  }();
  return MessageToDict(ValueOrThrow(std::move(reply)));
}

class PyClient {
 public:
  PyClient(const std::string& socket, const std::string& client_name, int connect_timeout_ms,
           int request_timeout_ms, int reconnect_timeout_ms, int wait_heartbeat_interval_ms,
           bool heartbeats) {
    client::ClientOptions options;
    options.socket = socket;
    options.client_name = client_name;
    options.connect_timeout_ms = connect_timeout_ms;
    options.request_timeout_ms = request_timeout_ms;
    options.reconnect_timeout_ms = reconnect_timeout_ms;
    options.wait_heartbeat_interval_ms = wait_heartbeat_interval_ms;
    options.heartbeats = heartbeats;
    Result<std::unique_ptr<client::Client>> c = [&] {
      py::gil_scoped_release release;
      return client::Client::Connect(options);
    }();
    client_ = ValueOrThrow(std::move(c));
  }

  // Closes the connection (Goodbye); later calls raise DaemonUnavailable.
  void Close() {
    std::unique_ptr<client::Client> c = std::move(client_);
    py::gil_scoped_release release;
    c.reset();
  }

  client::Client& get() {
    if (!client_) throw StatusException(Unavailable("this vaed_client.Client is closed"));
    return *client_;
  }

  uint64_t RegisterRegion(Region& region) {
    client::Client& c = get();
    py::gil_scoped_release release;
    return ValueOrThrow(c.RegisterRegion(region.get()));
  }
  // Client::RegisterCudaRegion: {region_id, offset_bytes, size_bytes,
  // device_uuid}. `device_ptr` is a device address in this process.
  py::dict RegisterCudaRegion(uintptr_t device_ptr, uint64_t nbytes) {
    client::Client& c = get();
    Result<client::CudaRegion> region = [&] {
      py::gil_scoped_release release;
      return c.RegisterCudaRegion(reinterpret_cast<const void*>(device_ptr), nbytes);
    }();
    const client::CudaRegion r = ValueOrThrow(std::move(region));
    py::dict out;
    out["region_id"] = r.region_id;
    out["offset_bytes"] = r.offset_bytes;
    out["size_bytes"] = r.size_bytes;
    out["device_uuid"] = r.device_uuid;
    return out;
  }
  void UnregisterRegion(uint64_t id) {
    client::Client& c = get();
    py::gil_scoped_release release;
    ThrowIfError(c.UnregisterRegion(id));
  }
  py::dict Plan(const DecodeArgs& args) {
    const client::DecodeRequest request = args.ToRequest();
    client::Client& c = get();
    return ReplyDict([&] { return ClientProtocol::PlanDecode(c, request); });
  }
  py::dict Decode(const DecodeArgs& args) {
    const client::DecodeRequest request = args.ToRequest();
    client::Client& c = get();
    return ReplyDict([&] { return ClientProtocol::Decode(c, request); });
  }
  // Benchmark helper: `iterations` Decode calls from a C++ loop (no Python
  // between them); per call, (wall seconds, the reply's "decode" seconds).
  std::vector<std::pair<double, double>> TimeDecodes(const DecodeArgs& args, int iterations) {
    const client::DecodeRequest request = args.ToRequest();
    client::Client& c = get();
    std::vector<std::pair<double, double>> seconds;
    py::gil_scoped_release release;
    for (int i = 0; i < iterations; ++i) {
      const auto start = std::chrono::steady_clock::now();
      Result<v1::DecodeReply> reply = ClientProtocol::Decode(c, request);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ThrowIfError(reply.status());
      double daemon = 0;
      for (const v1::Timing& t : reply->timings()) {
        if (t.component() == "decode") daemon = t.seconds();
      }
      seconds.emplace_back(wall, daemon);
    }
    return seconds;
  }
  py::dict GetStatus() {
    client::Client& c = get();
    return ReplyDict([&] { return ClientProtocol::GetStatus(c); });
  }
  py::dict ReleaseQuarantine(const std::string& who) {
    client::Client& c = get();
    return ReplyDict([&] { return ClientProtocol::ReleaseQuarantine(c, who); });
  }

 private:
  std::unique_ptr<client::Client> client_;
};

}  // namespace
}  // namespace vaed::python

PYBIND11_MODULE(_core, m) {
  using namespace vaed::python;
  m.doc() =
      "Binding of the vaed C++ client library (vaed/client.h). Use the vaed_client package, "
      "not this module: it manages regions and builds numpy views.";

  // Status -> vaed_client.errors.from_status(code, code_name, message,
  // retry_after_ms, final_frames, final_samples), raised as its own class.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusException& e) {
      const vaed::Status& s = e.status();
      py::object errors = py::module_::import("vaed_client.errors");
      py::object exc = errors.attr("from_status")(
          static_cast<int>(s.code()), std::string(vaed::StatusCodeName(s.code())), s.message(),
          s.retry_after_ms(), s.final_frames(), s.final_samples());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });

  py::class_<Region>(m, "Region", py::buffer_protocol())
      .def(py::init<uint64_t, const std::string&>(), py::arg("nbytes"), py::arg("name") = "")
      .def_property_readonly("nbytes", &Region::nbytes)
      .def_property_readonly("name", &Region::name)
      .def_property_readonly("address", &Region::address)
      .def_buffer(&Region::Buffer);

  // vaed/cuda_buffer.h: device memory the library allocates
  // (Client.alloc_latent(device="cuda:N") wraps it with
  // __cuda_array_interface__). Freed when the object is collected.
  py::class_<vaed::client::CudaBuffer>(m, "CudaBuffer")
      .def_static(
          "allocate",
          [](int device_ordinal, uint64_t nbytes) {
            vaed::Result<vaed::client::CudaBuffer> buffer = [&] {
              py::gil_scoped_release release;
              return vaed::client::CudaBuffer::Allocate(device_ordinal, nbytes);
            }();
            return ValueOrThrow(std::move(buffer));
          },
          py::arg("device_ordinal"), py::arg("nbytes"))
      .def_property_readonly(
          "ptr",
          [](const vaed::client::CudaBuffer& b) { return reinterpret_cast<uintptr_t>(b.data()); })
      .def_property_readonly("nbytes", &vaed::client::CudaBuffer::size)
      .def_property_readonly("device_ordinal", &vaed::client::CudaBuffer::device_ordinal)
      .def_property_readonly("device_uuid", &vaed::client::CudaBuffer::device_uuid);

  py::class_<DecodeArgs>(m, "DecodeArgs")
      .def(py::init(&MakeArgs), py::kw_only(), py::arg("model") = "",
           py::arg("latent") = py::none(), py::arg("output") = py::none(),
           py::arg("audio_latent") = py::none(), py::arg("audio_output") = py::none(),
           py::arg("format") = 1, py::arg("stack_tiling") = 0, py::arg("compile") = 0,
           py::arg("fps") = 0.0, py::arg("independent_lengths") = false,
           py::arg("latent_space") = 1, py::arg("profile") = "", py::arg("deadline_ms") = 0,
           py::arg("group_size") = 0, py::arg("inject_faults") = std::vector<std::string>{},
           py::arg("tiling") = py::none(), py::arg("progress") = py::none(),
           py::arg("cuda_stream") = 0, py::arg("final_range") = py::none());

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, const std::string&, int, int, int, int, bool>(),
           py::kw_only(), py::arg("socket"), py::arg("client_name"), py::arg("connect_timeout_ms"),
           py::arg("request_timeout_ms"), py::arg("reconnect_timeout_ms"),
           py::arg("wait_heartbeat_interval_ms"), py::arg("heartbeats"))
      .def("close", &PyClient::Close)
      .def_property_readonly("client_id", [](PyClient& c) { return c.get().client_id(); })
      .def_property_readonly("reconnects", [](PyClient& c) { return c.get().reconnects(); })
      .def("hello", [](PyClient& c) { return MessageToDict(ClientProtocol::Hello(c.get())); })
      .def("register_region", &PyClient::RegisterRegion, py::arg("region"))
      .def("register_cuda_region", &PyClient::RegisterCudaRegion, py::arg("device_ptr"),
           py::arg("nbytes"))
      .def("unregister_region", &PyClient::UnregisterRegion, py::arg("region_id"))
      .def("plan", &PyClient::Plan, py::arg("args"))
      .def("decode", &PyClient::Decode, py::arg("args"))
      .def("time_decodes", &PyClient::TimeDecodes, py::arg("args"), py::arg("iterations"))
      .def("status", &PyClient::GetStatus)
      .def("release_quarantine", &PyClient::ReleaseQuarantine, py::arg("client"));

  m.def("dlpack_tensor_info", &DlpackTensorInfo, py::arg("capsule"));
  m.attr("DEFAULT_SOCKET") = vaed::client::kDefaultSocket;
}
