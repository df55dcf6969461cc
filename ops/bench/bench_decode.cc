// vaed_bench_decode: how much does decoding through the vaed daemon cost
// compared with decoding in the caller's own process?
//
// In-process: Taef2Decoder (vaed_models, LibTorch) + ToUint8Nhwc, i.e. what
// a DiT worker would run if it decoded itself, with at::set_num_threads(
// --threads). Through the daemon: the client library against a daemon that
// is already running at --socket (this program starts nothing), with the
// latent and output in registered shared-memory regions, registered once.
// Both halves decode the same latent to uint8 NHWC; each does --warmup
// untimed decodes, then --iterations timed ones. Reported: median and min
// wall seconds per decode, and the ratio daemon / in-process.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/models/postprocess.h"
#include "daemon/models/taef2.h"
#include "ops/common/psnr.h"
#include "ops/common/text_format.h"
#include "vaed/client.h"
#include "vaed/safetensors.h"
#include "vaed/wire.h"

namespace {

using vaed::Result;
using vaed::Status;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string latent_path = VAED_BENCH_DEFAULT_LATENT;
  std::string key = "latent";
  int64_t frames = 0;  // 0 = all frames of the latent
  std::string weights_path = VAED_BENCH_DEFAULT_WEIGHTS;
  int64_t frame_batch = 4;
  int threads = 2;
  int warmup = 1;
  int iterations = 5;
  std::string socket = vaed::client::kDefaultSocket;
  std::string model = "taef2";
  bool skip_in_process = false;
  bool skip_daemon = false;
  bool json = false;
};

// Wall seconds of the timed runs of one path.
struct Runs {
  std::vector<double> seconds;
  double Median() const {
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    const size_t n = s.size();
    return n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  }
  double Min() const { return *std::min_element(seconds.begin(), seconds.end()); }
};

struct Latent {
  torch::Tensor tensor;  // float32 [frames, 32, h, w], contiguous, owned
  std::vector<int64_t> shape;
};

Result<Latent> LoadLatent(const BenchOptions& o) {
  VAED_ASSIGN_OR_RETURN(auto file, vaed::SafetensorsFile::Open(o.latent_path));
  const vaed::TensorEntry* e = file->Find(o.key);
  if (e == nullptr) return vaed::NotFound(o.latent_path + ": no tensor '" + o.key + "'");
  if (e->dtype != vaed::DType::kFloat32 || e->shape.empty()) {
    return vaed::InvalidArgument(o.latent_path + ": tensor '" + o.key +
                                 "' must be float32 with a leading frame dim, is " +
                                 std::string(vaed::DTypeName(e->dtype)) + " " +
                                 vaed::ShapeToString(e->shape));
  }
  Latent latent;
  latent.shape = e->shape;
  if (o.frames > 0) latent.shape[0] = std::min(latent.shape[0], o.frames);
  latent.tensor = torch::empty(latent.shape, torch::kFloat32);
  // The file's data pointer is only 1-byte aligned: copy, do not wrap.
  std::memcpy(latent.tensor.data_ptr(), e->data, latent.tensor.nbytes());
  return latent;
}

struct InProcessResult {
  Runs runs;
  torch::Tensor output_u8;  // uint8 NHWC of the last run
};

Result<InProcessResult> BenchInProcess(const BenchOptions& o, const Latent& latent) {
  vaed::models::Taef2Options options;
  options.name = "taef2";
  options.weights_path = o.weights_path;
  options.frame_batch = o.frame_batch;
  VAED_ASSIGN_OR_RETURN(auto model, vaed::models::Taef2Decoder::Create(options));
  InProcessResult result;
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    vaed::models::ComponentTimings timings;
    const auto start = Clock::now();
    VAED_ASSIGN_OR_RETURN(torch::Tensor raw, model->Decode(latent.tensor, &timings));
    VAED_ASSIGN_OR_RETURN(result.output_u8, vaed::models::ToUint8Nhwc(raw));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (i >= o.warmup) result.runs.seconds.push_back(s);
  }
  return result;
}

struct DaemonResult {
  Runs runs;                        // client-side wall time per Decode()
  std::vector<double> server_decode;  // the reply's "decode" component, when present
  uint32_t intra_op_threads = 0;
  std::string model;
  std::string daemon_version;
  bool demo_weights = false;
  std::vector<uint8_t> output_u8;  // uint8 NHWC of the last run
};

Result<DaemonResult> BenchDaemon(const BenchOptions& o, const Latent& latent) {
  vaed::client::ClientOptions copts;
  copts.socket = o.socket;
  copts.client_name = "vaed_bench_decode";
  VAED_ASSIGN_OR_RETURN(auto client, vaed::client::Client::Connect(copts));
  DaemonResult result;
  VAED_ASSIGN_OR_RETURN(const vaed::v1::StatusReply status, client->GetStatus());
  result.intra_op_threads = status.intra_op_threads();
  result.daemon_version = status.daemon_version();

  VAED_ASSIGN_OR_RETURN(const vaed::v1::DecodeReply plan,
                        client->PlanDecode(o.model, vaed::DType::kFloat32, latent.shape,
                                           vaed::client::OutputFormat::kUInt8NHWC));
  const auto latent_bytes = static_cast<uint64_t>(latent.tensor.nbytes());
  VAED_ASSIGN_OR_RETURN(auto in, vaed::client::SharedRegion::Create(latent_bytes));
  VAED_ASSIGN_OR_RETURN(auto out, vaed::client::SharedRegion::Create(plan.output_bytes()));
  VAED_ASSIGN_OR_RETURN(const uint64_t in_id, client->RegisterRegion(*in));
  VAED_ASSIGN_OR_RETURN(const uint64_t out_id, client->RegisterRegion(*out));
  std::memcpy(in->data(), latent.tensor.data_ptr(), latent_bytes);

  vaed::client::DecodeRequest request;
  request.model = o.model;
  request.latent = {in_id, 0, vaed::DType::kFloat32, latent.shape};
  request.output = {out_id, 0, vaed::FromProto(plan.output_dtype()),
                    std::vector<int64_t>(plan.output_shape().begin(), plan.output_shape().end())};
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    const auto start = Clock::now();
    VAED_ASSIGN_OR_RETURN(const vaed::v1::DecodeReply reply, client->Decode(request));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    result.model = reply.model();
    result.demo_weights = reply.demo_weights();
    if (i < o.warmup) continue;
    result.runs.seconds.push_back(s);
    for (const auto& t : reply.timings()) {
      if (t.component() == "decode") result.server_decode.push_back(t.seconds());
    }
  }
  result.output_u8.assign(out->data(), out->data() + plan.output_bytes());
  return result;
}

nlohmann::json RunsJson(const Runs& r) {
  return {{"median_seconds", r.Median()}, {"min_seconds", r.Min()}, {"runs_seconds", r.seconds}};
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app{
      "vaed_bench_decode: warm TAEF2 decode time in-process vs through a running vaed daemon.\n"
      "The daemon is not started here: run one first, e.g.\n"
      "  vaed --socket /tmp/vaed-bench.sock --taef2-weights " VAED_BENCH_DEFAULT_WEIGHTS "\n"
      "and give the same thread count (--threads here, executor.intra_op_threads there).",
      "vaed_bench_decode"};
  app.add_option("--latent", o.latent_path, "safetensors file with the latent")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  app.add_option("--key", o.key, "latent tensor name")->capture_default_str();
  app.add_option("--frames", o.frames, "decode only the first N latent frames (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--weights", o.weights_path, "TAEF2 decoder weights for the in-process half")
      ->capture_default_str();
  app.add_option("--frame-batch", o.frame_batch, "in-process frames per forward pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--threads", o.threads,
                 "LibTorch intra-op threads in-process (at::set_num_threads); match the "
                 "daemon's executor.intra_op_threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--warmup", o.warmup, "untimed decodes per path")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iterations", o.iterations, "timed decodes per path")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--socket", o.socket, "control socket of the running daemon")
      ->capture_default_str();
  app.add_option("--model", o.model, "daemon model to decode with")->capture_default_str();
  app.add_flag("--skip-in-process", o.skip_in_process, "only time the daemon");
  app.add_flag("--skip-daemon", o.skip_daemon, "only time the in-process decode");
  app.add_flag("--json", o.json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  at::set_num_threads(o.threads);
  auto latent = LoadLatent(o);
  if (!latent.ok()) {
    std::cerr << "vaed_bench_decode: " << latent.status().ToString() << "\n";
    return 1;
  }

  std::optional<InProcessResult> local;
  if (!o.skip_in_process) {
    auto r = BenchInProcess(o, *latent);
    if (!r.ok()) {
      std::cerr << "vaed_bench_decode: in-process: " << r.status().ToString() << "\n";
      return 1;
    }
    local = std::move(r).value();
  }
  std::optional<DaemonResult> daemon;
  if (!o.skip_daemon) {
    auto r = BenchDaemon(o, *latent);
    if (!r.ok()) {
      std::cerr << "vaed_bench_decode: through the daemon at " << o.socket << ": "
                << r.status().ToString() << "\n";
      return r.status().code() == vaed::StatusCode::kUnavailable ? 2 : 1;
    }
    daemon = std::move(r).value();
    if (daemon->intra_op_threads != static_cast<uint32_t>(o.threads)) {
      std::cerr << "vaed_bench_decode: WARNING: the daemon runs " << daemon->intra_op_threads
                << " intra-op threads, this benchmark " << o.threads
                << "; the ratio compares unequal setups\n";
    }
    if (daemon->demo_weights) {
      std::cerr << "vaed_bench_decode: WARNING: daemon model '" << daemon->model
                << "' has DEMO weights\n";
    }
  }

  // Same latent, same decoder: the outputs should agree up to float
  // rounding (README §6: +-1 in a few values when batching differs).
  std::optional<vaed::ops::U8Diff> diff;
  if (local && daemon &&
      static_cast<size_t>(local->output_u8.numel()) == daemon->output_u8.size()) {
    diff = vaed::ops::CompareU8(
        std::span<const uint8_t>(local->output_u8.data_ptr<uint8_t>(), daemon->output_u8.size()),
        daemon->output_u8);
  }

  const double ratio_median =
      local && daemon ? daemon->runs.Median() / local->runs.Median() : 0.0;
  const double ratio_min = local && daemon ? daemon->runs.Min() / local->runs.Min() : 0.0;

  if (o.json) {
    nlohmann::json j = {
        {"latent", o.latent_path},
        {"latent_shape", latent->shape},
        {"threads", o.threads},
        {"frame_batch", o.frame_batch},
        {"warmup", o.warmup},
        {"iterations", o.iterations},
        {"in_process", local ? RunsJson(local->runs) : nlohmann::json(nullptr)},
        {"daemon", nullptr},
        {"ratio_daemon_over_in_process_median", local && daemon ? nlohmann::json(ratio_median) : nlohmann::json(nullptr)},
        {"ratio_daemon_over_in_process_min", local && daemon ? nlohmann::json(ratio_min) : nlohmann::json(nullptr)},
        {"max_abs_diff_daemon_vs_in_process", diff ? nlohmann::json(diff->max_abs_diff) : nlohmann::json(nullptr)},
        {"values_differing_daemon_vs_in_process", diff ? nlohmann::json(diff->values_differing) : nlohmann::json(nullptr)},
    };
    if (daemon) {
      j["daemon"] = RunsJson(daemon->runs);
      j["daemon"]["socket"] = o.socket;
      j["daemon"]["model"] = daemon->model;
      j["daemon"]["daemon_version"] = daemon->daemon_version;
      j["daemon"]["intra_op_threads"] = daemon->intra_op_threads;
      j["daemon"]["server_decode_seconds"] = daemon->server_decode;
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::cout << "latent   " << o.latent_path << " " << vaed::ShapeToString(latent->shape)
            << "\nthreads  " << o.threads << " (in-process)";
  if (daemon) std::cout << ", " << daemon->intra_op_threads << " (daemon)";
  std::cout << "\nruns     " << o.warmup << " warm-up + " << o.iterations << " timed per path\n\n";
  vaed::ops::TextTable table({"path", "median s", "min s", "median ms/frame"},
                             {false, true, true, true});
  const double frames = static_cast<double>(latent->shape[0]);
  auto add = [&](const std::string& name, const Runs& r) {
    table.AddRow({name, vaed::ops::FormatFixed(r.Median(), 4), vaed::ops::FormatFixed(r.Min(), 4),
                  vaed::ops::FormatFixed(r.Median() / frames * 1e3, 1)});
  };
  if (local) add("in-process", local->runs);
  if (daemon) {
    add("daemon (client wall)", daemon->runs);
    if (!daemon->server_decode.empty()) add("daemon \"decode\" component", Runs{daemon->server_decode});
  }
  std::cout << table.Render();
  if (local && daemon) {
    std::cout << "\nratio daemon / in-process: " << vaed::ops::FormatFixed(ratio_median, 3)
              << " (median), " << vaed::ops::FormatFixed(ratio_min, 3) << " (min)\n";
  }
  if (diff) {
    std::cout << "outputs: max |diff| " << diff->max_abs_diff << ", " << diff->values_differing
              << " of " << diff->values << " uint8 values differ\n";
  }
  return 0;
}
