// vaed_bench_decode: how much does decoding through the vaed daemon cost
// compared with decoding in the caller's own process?
//
// In-process: Taef2Decoder (vaed_models, LibTorch) + ToUint8Nhwc, i.e. what
// a DiT worker would run if it decoded itself, with at::set_num_threads(
// --threads). Through the daemon: the client library against a daemon that
// is already running at --socket (this program starts nothing), with the
// latent and output in shared-memory regions registered once. Both paths
// decode the same latent to uint8 NHWC. After --warmup untimed decodes on
// each path, the --iterations timed decodes alternate between the paths so
// that a change in machine load affects both alike. Reported: median and min
// wall seconds per decode, and the ratio daemon / in-process.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/engine/memory_policy.h"
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

// Seconds of the timed runs of one measurement.
struct Runs {
  std::vector<double> seconds;
  double Median() const {
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    const size_t n = s.size();
    return n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  }
  double Min() const { return *std::min_element(seconds.begin(), seconds.end()); }
  nlohmann::json ToJson() const {
    return {{"median_seconds", Median()}, {"min_seconds", Min()}, {"runs_seconds", seconds}};
  }
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
    return vaed::InvalidArgument(
        o.latent_path + ": tensor '" + o.key + "' must be float32 with a leading frame dim, is " +
        std::string(vaed::DTypeName(e->dtype)) + " " + vaed::ShapeToString(e->shape));
  }
  Latent latent;
  latent.shape = e->shape;
  if (o.frames > 0) latent.shape[0] = std::min(latent.shape[0], o.frames);
  latent.tensor = torch::empty(latent.shape, torch::kFloat32);
  // The file's data pointer is only 1-byte aligned: copy, do not wrap.
  std::memcpy(latent.tensor.data_ptr(), e->data, latent.tensor.nbytes());
  return latent;
}

// The decoder linked into this process.
class InProcessPath {
 public:
  static Result<std::unique_ptr<InProcessPath>> Create(const BenchOptions& o,
                                                       const Latent& latent) {
    vaed::models::Taef2Options options;
    options.name = "taef2";
    options.weights_path = o.weights_path;
    options.frame_batch = o.frame_batch;
    VAED_ASSIGN_OR_RETURN(auto model, vaed::models::Taef2Decoder::Create(options));
    return std::unique_ptr<InProcessPath>(new InProcessPath(std::move(model), latent.tensor));
  }

  // One decode to uint8; `timed` records it.
  Status RunOnce(bool timed) {
    vaed::models::ComponentTimings timings;
    const auto start = Clock::now();
    VAED_ASSIGN_OR_RETURN(torch::Tensor raw, model_->Decode(latent_, &timings));
    VAED_ASSIGN_OR_RETURN(output_u8_, vaed::models::ToUint8Nhwc(raw));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (!timed) return Status::Ok();
    wall_.seconds.push_back(s);
    for (const auto& [component, seconds] : timings.entries()) {
      if (component == "taef2.decode_latent") model_decode_.seconds.push_back(seconds);
    }
    return Status::Ok();
  }

  const Runs& wall() const { return wall_; }
  const Runs& model_decode() const { return model_decode_; }
  std::span<const uint8_t> output() const {
    return {output_u8_.data_ptr<uint8_t>(), static_cast<size_t>(output_u8_.numel())};
  }

 private:
  InProcessPath(std::unique_ptr<vaed::models::Taef2Decoder> model, torch::Tensor latent)
      : model_(std::move(model)), latent_(std::move(latent)) {}

  std::unique_ptr<vaed::models::Taef2Decoder> model_;
  torch::Tensor latent_;
  torch::Tensor output_u8_;  // of the last run
  Runs wall_;
  Runs model_decode_;  // the model's "taef2.decode_latent" component
};

// A running daemon, reached with the client library.
class DaemonPath {
 public:
  static Result<std::unique_ptr<DaemonPath>> Create(const BenchOptions& o, const Latent& latent) {
    vaed::client::ClientOptions copts;
    copts.socket = o.socket;
    copts.client_name = "vaed_bench_decode";
    std::unique_ptr<DaemonPath> p(new DaemonPath);
    VAED_ASSIGN_OR_RETURN(p->client_, vaed::client::Client::Connect(copts));
    VAED_ASSIGN_OR_RETURN(p->status_, p->client_->GetStatus());
    VAED_ASSIGN_OR_RETURN(const vaed::v1::DecodeReply plan,
                          p->client_->PlanDecode(o.model, vaed::DType::kFloat32, latent.shape,
                                                 vaed::client::OutputFormat::kUInt8NHWC));
    const auto latent_bytes = static_cast<uint64_t>(latent.tensor.nbytes());
    VAED_ASSIGN_OR_RETURN(p->in_, vaed::client::SharedRegion::Create(latent_bytes));
    VAED_ASSIGN_OR_RETURN(p->out_, vaed::client::SharedRegion::Create(plan.output_bytes()));
    VAED_ASSIGN_OR_RETURN(const uint64_t in_id, p->client_->RegisterRegion(*p->in_));
    VAED_ASSIGN_OR_RETURN(const uint64_t out_id, p->client_->RegisterRegion(*p->out_));
    std::memcpy(p->in_->data(), latent.tensor.data_ptr(), latent_bytes);
    p->output_bytes_ = plan.output_bytes();
    p->request_.model = o.model;
    p->request_.latent = {in_id, 0, vaed::DType::kFloat32, latent.shape};
    p->request_.output = {
        out_id, 0, vaed::FromProto(plan.output_dtype()),
        std::vector<int64_t>(plan.output_shape().begin(), plan.output_shape().end())};
    return p;
  }

  // One Decode() round trip; `timed` records it.
  Status RunOnce(bool timed) {
    const auto start = Clock::now();
    VAED_ASSIGN_OR_RETURN(const vaed::v1::DecodeReply reply, client_->Decode(request_));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    model_ = reply.model();
    demo_weights_ = reply.demo_weights();
    if (!timed) return Status::Ok();
    wall_.seconds.push_back(s);
    for (const auto& t : reply.timings()) {
      if (t.component() == "decode") server_decode_.seconds.push_back(t.seconds());
    }
    return Status::Ok();
  }

  const Runs& wall() const { return wall_; }
  const Runs& server_decode() const { return server_decode_; }
  const vaed::v1::StatusReply& status() const { return status_; }
  const std::string& model() const { return model_; }
  bool demo_weights() const { return demo_weights_; }
  std::span<const uint8_t> output() const { return {out_->data(), output_bytes_}; }

 private:
  DaemonPath() = default;

  std::unique_ptr<vaed::client::Client> client_;
  vaed::v1::StatusReply status_;
  std::unique_ptr<vaed::client::SharedRegion> in_;
  std::unique_ptr<vaed::client::SharedRegion> out_;
  uint64_t output_bytes_ = 0;
  vaed::client::DecodeRequest request_;
  std::string model_;
  bool demo_weights_ = false;
  Runs wall_;           // client-side wall time per Decode()
  Runs server_decode_;  // the reply's "decode" component
};

int Fail(const std::string& what, const Status& s) {
  std::cerr << "vaed_bench_decode: " << what << ": " << s.ToString() << "\n";
  return s.code() == vaed::StatusCode::kUnavailable ? 2 : 1;
}

nlohmann::json OrNull(bool present, const nlohmann::json& value) {
  return present ? value : nlohmann::json(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app{
      "vaed_bench_decode: warm TAEF2 decode time in-process vs through a running vaed daemon.\n"
      "The daemon is not started here: run one first, e.g.\n"
      "  vaed --socket /tmp/vaed-bench/vaed.sock --taef2-weights " VAED_BENCH_DEFAULT_WEIGHTS
      "\n"
      "and give the same thread count (--threads here, executor.intra_op_threads there).\n"
      "Timed decodes alternate between the two paths. Exit status: 0 ok, 1 failure,\n"
      "2 the daemon is not running at --socket.",
      "vaed_bench_decode"};
  app.add_option("--latent", o.latent_path, "safetensors file with the latent")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  app.add_option("--key", o.key, "latent tensor name")->capture_default_str();
  app.add_option("--frames", o.frames, "decode only the first N latent frames (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--weights", o.weights_path, "TAEF2 decoder weights for the in-process path")
      ->capture_default_str();
  app.add_option("--frame-batch", o.frame_batch,
                 "in-process frames per forward pass (match the daemon's models.entry "
                 "frame_batch)")
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
  auto* skip_local = app.add_flag("--skip-in-process", o.skip_in_process, "only time the daemon");
  app.add_flag("--skip-daemon", o.skip_daemon, "only time the in-process decode")
      ->excludes(skip_local);
  app.add_flag("--json", o.json, "print one JSON object");
  bool glibc_default_malloc = false;
  app.add_flag("--glibc-default-malloc", glibc_default_malloc,
               "keep glibc's default allocator policy in-process instead of the daemon's "
               "(daemon/engine/memory_policy.h); shows what a DiT process pays without it");
  CLI11_PARSE(app, argc, argv);
  // The in-process path gets the daemon's allocator policy by default, so
  // the ratio measures the cost of going through the daemon, not malloc.
  if (!glibc_default_malloc) vaed::engine::RetainFreedMemoryForReuse();

  // The model library logs through spdlog's default logger (stdout); keep
  // stdout for the results (--json must be one JSON object).
  spdlog::set_default_logger(spdlog::stderr_color_mt("vaed_bench_decode"));
  at::set_num_threads(o.threads);

  auto latent = LoadLatent(o);
  if (!latent.ok()) return Fail("loading the latent", latent.status());

  std::unique_ptr<InProcessPath> local;
  if (!o.skip_in_process) {
    auto r = InProcessPath::Create(o, *latent);
    if (!r.ok()) return Fail("in-process", r.status());
    local = std::move(r).value();
  }
  std::unique_ptr<DaemonPath> daemon;
  if (!o.skip_daemon) {
    auto r = DaemonPath::Create(o, *latent);
    if (!r.ok()) return Fail("through the daemon at " + o.socket, r.status());
    daemon = std::move(r).value();
    if (daemon->status().intra_op_threads() != static_cast<uint32_t>(o.threads)) {
      std::cerr << "vaed_bench_decode: WARNING: the daemon runs "
                << daemon->status().intra_op_threads() << " intra-op threads, this benchmark "
                << o.threads << "; the ratio compares unequal setups\n";
    }
  }

  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    const bool timed = i >= o.warmup;
    if (local) {
      if (Status s = local->RunOnce(timed); !s.ok()) return Fail("in-process decode", s);
    }
    if (daemon) {
      if (Status s = daemon->RunOnce(timed); !s.ok()) return Fail("daemon decode", s);
    }
  }
  if (daemon && daemon->demo_weights()) {
    std::cerr << "vaed_bench_decode: WARNING: daemon model '" << daemon->model()
              << "' has DEMO weights\n";
  }

  // Same latent, same decoder: the outputs should agree up to float
  // rounding (README §6: +-1 in a few values when batching differs).
  std::optional<vaed::ops::U8Diff> diff;
  if (local && daemon && local->output().size() == daemon->output().size()) {
    diff = vaed::ops::CompareU8(local->output(), daemon->output());
  }
  const bool both = local && daemon;
  const double ratio_median = both ? daemon->wall().Median() / local->wall().Median() : 0.0;
  const double ratio_min = both ? daemon->wall().Min() / local->wall().Min() : 0.0;

  if (o.json) {
    nlohmann::json j = {
        {"latent", o.latent_path},
        {"latent_shape", latent->shape},
        {"threads", o.threads},
        {"frame_batch", o.frame_batch},
        {"warmup", o.warmup},
        {"iterations", o.iterations},
        {"in_process", nullptr},
        {"daemon", nullptr},
        {"ratio_daemon_over_in_process_median", OrNull(both, ratio_median)},
        {"ratio_daemon_over_in_process_min", OrNull(both, ratio_min)},
        {"max_abs_diff_daemon_vs_in_process",
         OrNull(diff.has_value(), diff ? diff->max_abs_diff : 0)},
        {"values_differing_daemon_vs_in_process",
         OrNull(diff.has_value(), diff ? diff->values_differing : 0)},
    };
    if (local) {
      j["in_process"] = local->wall().ToJson();
      j["in_process"]["model_decode"] = local->model_decode().ToJson();
    }
    if (daemon) {
      j["daemon"] = daemon->wall().ToJson();
      j["daemon"]["server_decode"] =
          OrNull(!daemon->server_decode().seconds.empty(), daemon->server_decode().ToJson());
      j["daemon"]["socket"] = o.socket;
      j["daemon"]["model"] = daemon->model();
      j["daemon"]["daemon_version"] = daemon->status().daemon_version();
      j["daemon"]["intra_op_threads"] = daemon->status().intra_op_threads();
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::cout << "latent   " << o.latent_path << " " << vaed::ShapeToString(latent->shape)
            << "\nthreads  " << o.threads << " (in-process)";
  if (daemon) std::cout << ", " << daemon->status().intra_op_threads() << " (daemon)";
  std::cout << "\nruns     " << o.warmup << " warm-up + " << o.iterations
            << " timed per path, alternating\n\n";
  vaed::ops::TextTable table({"path", "median s", "min s", "median ms/frame"},
                             {false, true, true, true});
  const double frames = static_cast<double>(latent->shape[0]);
  auto add = [&](const std::string& name, const Runs& r) {
    if (r.seconds.empty()) return;
    table.AddRow({name, vaed::ops::FormatFixed(r.Median(), 4), vaed::ops::FormatFixed(r.Min(), 4),
                  vaed::ops::FormatFixed(r.Median() / frames * 1e3, 1)});
  };
  if (local) {
    add("in-process (decode + uint8)", local->wall());
    add("  of which taef2.decode_latent", local->model_decode());
  }
  if (daemon) {
    add("daemon (client round trip)", daemon->wall());
    add("  of which server \"decode\"", daemon->server_decode());
  }
  std::cout << table.Render();
  if (both) {
    std::cout << "\nratio daemon / in-process: " << vaed::ops::FormatFixed(ratio_median, 3)
              << " (median), " << vaed::ops::FormatFixed(ratio_min, 3) << " (min)\n";
  }
  if (diff) {
    std::cout << "outputs: max |diff| " << diff->max_abs_diff << ", " << diff->values_differing
              << " of " << diff->values << " uint8 values differ\n";
  }
  return 0;
}
