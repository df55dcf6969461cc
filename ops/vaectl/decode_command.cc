#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "ops/common/random_latent.h"
#include "ops/vaectl/commands.h"
#include "ops/vaectl/connect.h"
#include "ops/vaectl/decode_report.h"
#include "vaed/safetensors.h"
#include "vaed/tensor_ref.h"
#include "vaed/wire.h"

namespace vaed::vaectl {
namespace {

// The latent to send: a tensor of a safetensors file (borrowed from its
// mapping) or generated random values.
struct LatentInput {
  std::unique_ptr<SafetensorsFile> file;  // null for a random latent
  std::vector<float> generated;
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
  std::string source;  // for the report
  std::string stem;    // default output name
};

Result<LatentInput> LoadLatent(const DecodeCommandOptions& options) {
  LatentInput in;
  if (!options.random_latent.empty()) {
    VAED_ASSIGN_OR_RETURN(in.shape, ops::ParseShape(options.random_latent));
    VAED_ASSIGN_OR_RETURN(const uint64_t count, NumElements(in.shape, "--random-latent"));
    // Generated before the daemon can plan it: refuse what cannot be a
    // sensible latent instead of dying in the allocator.
    constexpr uint64_t kMaxRandomElements = uint64_t{1} << 28;  // 1 GiB of float32
    if (count > kMaxRandomElements) {
      return InvalidArgument("--random-latent " + options.random_latent + " has " +
                             std::to_string(count) + " elements; at most " +
                             std::to_string(kMaxRandomElements) + " (1 GiB float32) are generated");
    }
    in.generated = ops::RandomNormalLatent(count, options.seed);
    in.dtype = DType::kFloat32;
    in.data = reinterpret_cast<const uint8_t*>(in.generated.data());
    in.bytes = count * sizeof(float);
    in.source = "random(seed=" + std::to_string(options.seed) + ")";
    in.stem = "random_latent";
    return in;
  }
  VAED_ASSIGN_OR_RETURN(in.file, SafetensorsFile::Open(options.latent_file));
  const TensorEntry* entry = in.file->Find(options.key);
  if (entry == nullptr) {
    std::string names;
    for (const auto& n : in.file->names()) names += (names.empty() ? "" : ", ") + n;
    return NotFound(options.latent_file + ": no tensor '" + options.key + "' (tensors: " + names +
                    "); choose one with --key");
  }
  in.dtype = entry->dtype;
  in.shape = entry->shape;
  in.data = entry->data;
  in.bytes = entry->nbytes;
  const std::filesystem::path path(options.latent_file);
  in.source = path.filename().string() + ":" + options.key;
  in.stem = path.stem().string();
  return in;
}

// A region of `bytes` bytes registered with the daemon.
struct RegisteredRegion {
  std::unique_ptr<client::SharedRegion> region;
  uint64_t id = 0;
};

Result<RegisteredRegion> CreateAndRegister(client::Client& client, uint64_t bytes,
                                           const char* what) {
  RegisteredRegion r;
  auto region = client::SharedRegion::Create(bytes);
  if (!region.ok()) {
    return region.status().WithContext(std::string("creating the ") + what + " region");
  }
  r.region = std::move(region).value();
  auto id = client.RegisterRegion(*r.region);
  if (!id.ok()) return id.status().WithContext(std::string("registering the ") + what + " region");
  r.id = *id;
  return r;
}

}  // namespace

int RunDecode(const GlobalOptions& global, const DecodeCommandOptions& options) {
  auto latent = LoadLatent(options);
  if (!latent.ok()) return ReportFailure("decode", latent.status());

  int exit_code = kExitOk;
  auto client = ConnectOrExplain(global, &exit_code);
  if (client == nullptr) return exit_code;

  // Size the output before allocating it: the daemon validates the latent
  // against the model's contract and returns the uint8 NHWC output shape.
  auto plan = client->PlanDecode(options.model, latent->dtype, latent->shape,
                                 client::OutputFormat::kUInt8NHWC);
  if (!plan.ok()) return ReportFailure("decode (plan)", plan.status());
  auto outputs = PlanOutput(options.format, options.out, latent->stem, plan->frames());
  if (!outputs.ok()) return ReportFailure("decode", outputs.status());
  if (Status s = CheckOutputTools(*outputs); !s.ok()) return ReportFailure("decode", s);

  auto in = CreateAndRegister(*client, latent->bytes, "latent");
  if (!in.ok()) return ReportFailure("decode", in.status());
  auto out = CreateAndRegister(*client, plan->output_bytes(), "output");
  if (!out.ok()) return ReportFailure("decode", out.status());
  std::memcpy(in->region->data(), latent->data, latent->bytes);

  client::DecodeRequest request;
  request.model = options.model;
  request.latent = {in->id, 0, latent->dtype, latent->shape};
  request.output = {out->id, 0, FromProto(plan->output_dtype()),
                    std::vector<int64_t>(plan->output_shape().begin(), plan->output_shape().end())};
  request.format = client::OutputFormat::kUInt8NHWC;
  if (options.stack_tiling == "off") request.stack_tiling = client::StackTiling::kOff;
  if (options.stack_tiling == "on") request.stack_tiling = client::StackTiling::kOn;
  if (options.stack_tiling == "auto") request.stack_tiling = client::StackTiling::kAuto;
  const auto start = std::chrono::steady_clock::now();
  auto reply = client->Decode(request);
  const double round_trip =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!reply.ok()) return ReportFailure("decode", reply.status());

  DecodeReport report;
  report.reply = *reply;
  report.latent_source = latent->source;
  report.round_trip_seconds = round_trip;
  report.format = options.format;
  if (reply->output_bytes() > out->region->size()) {
    return ReportFailure(
        "decode",
        Internal("daemon reported " + std::to_string(reply->output_bytes()) +
                 " output bytes, the region holds " + std::to_string(out->region->size())));
  }
  const ops::RgbFrames frames{std::span<const uint8_t>(out->region->data(), reply->output_bytes()),
                              static_cast<int64_t>(reply->frames()),
                              static_cast<int64_t>(reply->height_px()),
                              static_cast<int64_t>(reply->width_px())};
  auto written = WriteOutputs(*outputs, frames, options.fps);
  if (!written.ok()) return ReportFailure("decode", written.status());
  report.outputs = *written;
  if (latent->file != nullptr) {
    report.quality =
        CompareWithFile(frames, *latent->file, options.reference_key, options.original_key);
  }

  if (global.json) {
    if (reply->demo_weights()) {
      std::cerr << "vaectl: WARNING: model '" << reply->model()
                << "' has DEMO weights (deterministic random, not a trained decoder)\n";
    }
    std::cout << DecodeReportToJson(report).dump(2) << "\n";
  } else {
    std::cout << FormatDecodeReport(report);
  }
  return kExitOk;
}

}  // namespace vaed::vaectl
