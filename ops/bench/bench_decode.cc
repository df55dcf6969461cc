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
#include "daemon/models/mkl_reproducibility.h"
#include "daemon/models/postprocess.h"
#include "daemon/models/safetensors.h"
#include "daemon/models/taef2.h"
#include "ops/bench/bench_cli.h"
#include "ops/common/psnr.h"
#include "ops/common/sample_stats.h"
#include "ops/common/text_format.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

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
  std::string socket;  // resolved by Client::SocketPath after parsing
  std::string model = "taef2";
  bool skip_in_process = false;
  bool skip_daemon = false;
  bool json = false;
};

// Seconds of the timed runs of one measurement.
struct Runs {
  std::vector<double> seconds;
  double Median() const { return vaed::ops::Median(seconds); }
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
    VAED_ASSIGN_OR_RETURN(p->status_, ClientProtocol::GetStatus(*p->client_));
    VAED_ASSIGN_OR_RETURN(
        const vaed::v1::DecodeReply plan,
        ClientProtocol::PlanDecode(*p->client_, o.model, vaed::DType::kFloat32, latent.shape,
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
    VAED_ASSIGN_OR_RETURN(const vaed::v1::DecodeReply reply,
                          ClientProtocol::Decode(*client_, request_));
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

// Declares every option; `glibc_default_malloc` is the one flag that is
// not a BenchOptions field (it acts before anything is measured).
void DefineOptions(CLI::App& app, BenchOptions* o, bool* glibc_default_malloc) {
  app.add_option("--latent", o->latent_path, "safetensors file with the latent")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  app.add_option("--key", o->key, "latent tensor name")->capture_default_str();
  app.add_option("--frames", o->frames, "decode only the first N latent frames (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--weights", o->weights_path, "TAEF2 decoder weights for the in-process path")
      ->capture_default_str();
  vaed::bench::AddRangeOption(app, "--frame-batch", &o->frame_batch,
                              "in-process frames per forward pass (match the daemon's "
                              "models.entry frame_batch)",
                              1, 4096);
  vaed::bench::AddRangeOption(app, "--threads", &o->threads,
                              "LibTorch intra-op threads in-process (at::set_num_threads); match "
                              "the daemon's executor.intra_op_threads",
                              1, 256);
  app.add_option("--warmup", o->warmup, "untimed decodes per path")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  vaed::bench::AddRangeOption(app, "--iterations", &o->iterations, "timed decodes per path", 1,
                              1000);
  app.add_option("--socket", o->socket,
                 "control socket of the running daemon (default: $VAED_SOCKET when set, else " +
                     std::string(vaed::client::kDefaultSocket) + ")");
  app.add_option("--model", o->model, "daemon model to decode with")->capture_default_str();
  auto* skip_local = app.add_flag("--skip-in-process", o->skip_in_process, "only time the daemon");
  app.add_flag("--skip-daemon", o->skip_daemon, "only time the in-process decode")
      ->excludes(skip_local);
  app.add_flag("--json", o->json, "print one JSON object");
  app.add_flag("--glibc-default-malloc", *glibc_default_malloc,
               "keep glibc's default allocator policy in-process instead of the daemon's "
               "(daemon/engine/memory_policy.h); shows what a DiT process pays without it");
}

// The two paths of one run (either may be absent) and how they compare.
struct Measurement {
  std::unique_ptr<InProcessPath> local;
  std::unique_ptr<DaemonPath> daemon;
  // Same latent, same decoder: the outputs should agree up to float
  // rounding (README §6: +-1 in a few values when batching differs).
  std::optional<vaed::ops::U8Diff> diff;
  bool both = false;
  double ratio_median = 0;  // daemon / in-process wall seconds
  double ratio_min = 0;
};

// Creates the paths --skip-* leave, then runs --warmup untimed and
// --iterations timed decodes, alternating between them. On failure prints
// why and returns the exit code (Fail()).
std::optional<int> Measure(const BenchOptions& o, const Latent& latent, Measurement* m) {
  if (!o.skip_in_process) {
    auto r = InProcessPath::Create(o, latent);
    if (!r.ok()) return Fail("in-process", r.status());
    m->local = std::move(r).value();
  }
  if (!o.skip_daemon) {
    auto r = DaemonPath::Create(o, latent);
    if (!r.ok()) return Fail("through the daemon at " + o.socket, r.status());
    m->daemon = std::move(r).value();
    if (m->daemon->status().intra_op_threads() != static_cast<uint32_t>(o.threads)) {
      std::cerr << "vaed_bench_decode: WARNING: the daemon runs "
                << m->daemon->status().intra_op_threads() << " intra-op threads, this benchmark "
                << o.threads << "; the ratio compares unequal setups\n";
    }
  }
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    const bool timed = i >= o.warmup;
    if (m->local) {
      if (Status s = m->local->RunOnce(timed); !s.ok()) return Fail("in-process decode", s);
    }
    if (m->daemon) {
      if (Status s = m->daemon->RunOnce(timed); !s.ok()) return Fail("daemon decode", s);
    }
  }
  if (m->daemon && m->daemon->demo_weights()) {
    std::cerr << "vaed_bench_decode: WARNING: daemon model '" << m->daemon->model()
              << "' has DEMO weights\n";
  }
  if (m->local && m->daemon && m->local->output().size() == m->daemon->output().size()) {
    m->diff = vaed::ops::CompareU8(m->local->output(), m->daemon->output());
  }
  m->both = m->local && m->daemon;
  if (m->both) {
    m->ratio_median = m->daemon->wall().Median() / m->local->wall().Median();
    m->ratio_min = m->daemon->wall().Min() / m->local->wall().Min();
  }
  return std::nullopt;
}

// --json: the settings, each path's runs (null when skipped), the ratios
// and the output comparison (null when not made).
nlohmann::json MeasurementToJson(const BenchOptions& o, const Latent& latent,
                                 const Measurement& m) {
  nlohmann::json j = {
      {"latent", o.latent_path},
      {"latent_shape", latent.shape},
      {"threads", o.threads},
      {"frame_batch", o.frame_batch},
      {"warmup", o.warmup},
      {"iterations", o.iterations},
      {"in_process", nullptr},
      {"daemon", nullptr},
      {"ratio_daemon_over_in_process_median", OrNull(m.both, m.ratio_median)},
      {"ratio_daemon_over_in_process_min", OrNull(m.both, m.ratio_min)},
      {"max_abs_diff_daemon_vs_in_process",
       OrNull(m.diff.has_value(), m.diff ? m.diff->max_abs_diff : 0)},
      {"values_differing_daemon_vs_in_process",
       OrNull(m.diff.has_value(), m.diff ? m.diff->values_differing : 0)},
  };
  if (m.local) {
    j["in_process"] = m.local->wall().ToJson();
    j["in_process"]["model_decode"] = m.local->model_decode().ToJson();
  }
  if (m.daemon) {
    const DaemonPath& d = *m.daemon;
    j["daemon"] = d.wall().ToJson();
    j["daemon"]["server_decode"] =
        OrNull(!d.server_decode().seconds.empty(), d.server_decode().ToJson());
    j["daemon"]["socket"] = o.socket;
    j["daemon"]["model"] = d.model();
    j["daemon"]["daemon_version"] = d.status().daemon_version();
    j["daemon"]["intra_op_threads"] = d.status().intra_op_threads();
  }
  return j;
}

// The human-readable report: settings, the table of both paths, the ratio
// and the output comparison.
void PrintMeasurement(const BenchOptions& o, const Latent& latent, const Measurement& m) {
  std::cout << "latent   " << o.latent_path << " " << vaed::ShapeToString(latent.shape)
            << "\nthreads  " << o.threads << " (in-process)";
  if (m.daemon) std::cout << ", " << m.daemon->status().intra_op_threads() << " (daemon)";
  std::cout << "\nruns     " << o.warmup << " warm-up + " << o.iterations
            << " timed per path, alternating\n\n";
  vaed::ops::TextTable table({"path", "median s", "min s", "median ms/frame"},
                             {false, true, true, true});
  const double frames = static_cast<double>(latent.shape[0]);
  auto add = [&](const std::string& name, const Runs& r) {
    if (r.seconds.empty()) return;
    table.AddRow({name, vaed::ops::FormatFixed(r.Median(), 4), vaed::ops::FormatFixed(r.Min(), 4),
                  vaed::ops::FormatFixed(r.Median() / frames * 1e3, 1)});
  };
  if (m.local) {
    add("in-process (decode + uint8)", m.local->wall());
    add("  of which taef2.decode_latent", m.local->model_decode());
  }
  if (m.daemon) {
    add("daemon (client round trip)", m.daemon->wall());
    add("  of which server \"decode\"", m.daemon->server_decode());
  }
  std::cout << table.Render();
  if (m.both) {
    std::cout << "\nratio daemon / in-process: " << vaed::ops::FormatFixed(m.ratio_median, 3)
              << " (median), " << vaed::ops::FormatFixed(m.ratio_min, 3) << " (min)\n";
  }
  if (m.diff) {
    std::cout << "outputs: max |diff| " << m.diff->max_abs_diff << ", " << m.diff->values_differing
              << " of " << m.diff->values << " uint8 values differ\n";
  }
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
  bool glibc_default_malloc = false;
  DefineOptions(app, &o, &glibc_default_malloc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // --help 0; a usage error is a failure (2: no daemon)
  }
  o.socket = vaed::client::Client::SocketPath(o.socket);
  // The in-process path gets the daemon's allocator policy by default, so
  // the ratio measures the cost of going through the daemon, not malloc.
  if (!glibc_default_malloc) vaed::engine::RetainFreedMemoryForReuse();
  // And the daemon's numerics (MKL's CNR mode, VML initialised) before any LibTorch work.
  if (const auto mkl = vaed::models::SetUpMklForReproducibleDecodes(); !mkl.reproducible()) {
    std::cerr << "vaed_bench_decode: " << mkl.Describe() << "\n";
  }

  // The model library logs through spdlog's default logger (stdout); keep
  // stdout for the results (--json must be one JSON object).
  spdlog::set_default_logger(spdlog::stderr_color_mt("vaed_bench_decode"));
  at::set_num_threads(o.threads);

  auto latent = LoadLatent(o);
  if (!latent.ok()) return Fail("loading the latent", latent.status());
  Measurement m;
  if (std::optional<int> exit_code = Measure(o, *latent, &m)) return *exit_code;
  if (o.json) {
    std::cout << MeasurementToJson(o, *latent, m).dump(2) << "\n";
  } else {
    PrintMeasurement(o, *latent, m);
  }
  return 0;
}
