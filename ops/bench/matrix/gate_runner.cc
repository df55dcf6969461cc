#include "ops/bench/matrix/gate_runner.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ops/bench/matrix/bench_daemon.h"
#include "ops/bench/matrix/modes.h"
#include "ops/bench/matrix/report_json.h"
#include "ops/bench/release_gate.h"
#include "ops/common/random_latent.h"
#include "ops/common/text_format.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/tensor_ref.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace vaed::bench {
namespace {

using Clock = std::chrono::steady_clock;

// MemTotal of /proc/meminfo in bytes; 0 when it cannot be read.
uint64_t HostMemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return 0;
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

// What the gate needs to know of the daemon it started.
struct DaemonFacts {
  std::vector<std::string> capabilities;  // of model kModelName
  bool audio = false;                     // it decodes audio: requests carry an audio latent
  bool demo_weights = false;
  uint64_t device_total_bytes = 0;  // the smallest CUDA rank device's memory; 0 = no CUDA rank
};

// Errors: GetStatus's; kNotFound when the status lists no kModelName.
Result<DaemonFacts> ReadDaemonFacts(client::Client& c) {
  VAED_ASSIGN_OR_RETURN(const v1::StatusReply status, ClientProtocol::GetStatus(c));
  DaemonFacts f;
  bool found = false;
  for (const v1::ModelInfo& m : status.models()) {
    if (m.name() != kModelName) continue;
    found = true;
    f.capabilities.assign(m.capabilities().begin(), m.capabilities().end());
    f.demo_weights = m.demo_weights();
  }
  if (!found) return NotFound(std::string("the daemon's status lists no model '") + kModelName + "'");
  f.audio = std::find(f.capabilities.begin(), f.capabilities.end(), "audio") != f.capabilities.end();
  for (const v1::RankStatus& r : status.rank_status()) {
    const uint64_t total = r.device_memory_total_bytes();
    if (r.device() != "cuda" || total == 0) continue;
    f.device_total_bytes = f.device_total_bytes == 0 ? total : std::min(f.device_total_bytes, total);
  }
  return f;
}

uint64_t CountDifferingBytes(const uint8_t* a, const uint8_t* b, uint64_t n) {
  uint64_t diff = 0;
  for (uint64_t i = 0; i < n; ++i) diff += a[i] != b[i];
  return diff;
}

// One cell of the gate: the plan (where a memory refusal of an optional
// cell skips it), the shared regions with seeded latents, then every mode
// once, eager first. Records everything in the GateCellResult and prints
// its lines to `out`; the run itself never fails. One use; borrows all
// its arguments for its lifetime. Not thread-safe.
class GateCellRun {
 public:
  GateCellRun(BenchDaemon* daemon, const DaemonFacts& facts, const MemoryLimits& limits,
              const std::vector<const ModeSpec*>& modes, GateCellResult* result, std::ostream& out)
      : daemon_(daemon), facts_(facts), limits_(limits), modes_(modes), result_(result), out_(out) {}

  void Run(uint64_t seed) {
    auto plan = ClientProtocol::PlanDecode(daemon_->client(), Request(*modes_.front()));
    if (!plan.ok()) {
      RecordPlanRefusal(plan.status(), result_);
      out_ << FormatCellLine(*result_) << std::endl;
      return;
    }
    if (Status s = Prepare(*plan, seed); !s.ok()) {
      result_->error = "preparing the cell's regions: " + s.ToString();
      out_ << FormatCellLine(*result_) << std::endl;
    } else {
      for (const ModeSpec* m : modes_) RunMode(*m);
    }
    Release();
  }

 private:
  // The request of mode `m` (before Prepare(): without regions and outputs,
  // which a plan ignores).
  client::DecodeRequest Request(const ModeSpec& m) const {
    const GateShape& shape = result_->shape;
    client::DecodeRequest r;
    r.model = kModelName;
    r.latent = {video_in_id_, 0, DType::kFloat32, shape.latent_shape()};
    if (video_out_) r.output = {video_out_id_, 0, output_dtype_, output_shape_};
    r.format = client::OutputFormat::kUInt8NHWC;
    r.profile = m.profile;
    r.stack_tiling = m.stack_tiling;
    r.compile = m.compile;
    r.fps = kGateFps;
    if (facts_.audio) {
      r.audio_latent = {audio_in_id_, 0, DType::kFloat32, shape.audio_latent_shape()};
      if (audio_out_) r.audio_output = {audio_out_id_, 0, DType::kFloat32, audio_output_shape_};
    }
    return r;
  }

  // Makes, fills and registers one region: `bytes` bytes, `values` copied
  // in when given.
  Status MakeRegion(uint64_t bytes, const std::vector<float>* values,
                    std::unique_ptr<client::SharedRegion>* region, uint64_t* id) {
    VAED_ASSIGN_OR_RETURN(*region, client::SharedRegion::Create(bytes));
    if (values != nullptr) std::memcpy((*region)->data(), values->data(), bytes);
    VAED_ASSIGN_OR_RETURN(*id, daemon_->client().RegisterRegion(**region));
    registered_.push_back(*id);
    return Status::Ok();
  }

  Status Prepare(const v1::DecodeReply& plan, uint64_t seed) {
    const GateShape& shape = result_->shape;
    output_shape_.assign(plan.output_shape().begin(), plan.output_shape().end());
    output_dtype_ = FromProto(plan.output_dtype());
    {
      VAED_ASSIGN_OR_RETURN(const uint64_t count, NumElements(shape.latent_shape(), "latent"));
      const std::vector<float> latent = ops::RandomNormalLatent(count, seed);
      VAED_RETURN_IF_ERROR(MakeRegion(count * sizeof(float), &latent, &video_in_, &video_in_id_));
    }
    VAED_RETURN_IF_ERROR(MakeRegion(plan.output_bytes(), nullptr, &video_out_, &video_out_id_));
    if (!facts_.audio) return Status::Ok();
    if (!plan.has_audio()) {
      return Internal("the plan has no audio part although the request carries an audio latent");
    }
    audio_output_shape_.assign(plan.audio().output_shape().begin(),
                               plan.audio().output_shape().end());
    VAED_ASSIGN_OR_RETURN(const uint64_t count,
                          NumElements(shape.audio_latent_shape(), "audio latent"));
    const std::vector<float> audio = ops::RandomNormalLatent(count, seed + 1);
    VAED_RETURN_IF_ERROR(MakeRegion(count * sizeof(float), &audio, &audio_in_, &audio_in_id_));
    return MakeRegion(plan.audio().output_bytes(), nullptr, &audio_out_, &audio_out_id_);
  }

  // Against eager's first output (or keeps it as the reference when `m` is
  // eager).
  OutputComparison Compare(const ModeSpec& m) {
    OutputComparison c;
    c.video_bytes = video_out_->size();
    c.audio_bytes = audio_out_ ? audio_out_->size() : 0;
    if (m.baseline && !have_reference_) {
      video_reference_.assign(video_out_->data(), video_out_->data() + video_out_->size());
      if (audio_out_) {
        audio_reference_.assign(audio_out_->data(), audio_out_->data() + audio_out_->size());
      }
      have_reference_ = true;
      c.is_reference = true;
      c.reference_available = true;
      return c;
    }
    c.reference_available = have_reference_;
    if (!have_reference_) return c;
    c.video_bytes_differing =
        CountDifferingBytes(video_out_->data(), video_reference_.data(), c.video_bytes);
    if (audio_out_) {
      c.audio_bytes_differing =
          CountDifferingBytes(audio_out_->data(), audio_reference_.data(), c.audio_bytes);
    }
    return c;
  }

  void RunMode(const ModeSpec& m) {
    // A mode that writes nothing must not pass on the previous mode's bytes.
    std::memset(video_out_->data(), 0, video_out_->size());
    if (audio_out_) std::memset(audio_out_->data(), 0, audio_out_->size());
    const auto start = Clock::now();
    auto reply = ClientProtocol::Decode(daemon_->client(), Request(m));
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    if (!reply.ok()) {
      std::string why = reply.status().ToString();
      if (reply.status().code() == StatusCode::kInvalidArgument) {
        why = "unsupported by the model: " + why;  // every gate mode is part of the release
      }
      result_->modes.push_back(FailedMode(m.name, why));
      result_->modes.back().wall_s = wall;
      (void)daemon_->HasExited();
    } else {
      result_->modes.push_back(EvaluateMode(m.name, result_->shape, *reply, Compare(m),
                                            facts_.audio, limits_, wall));
    }
    out_ << FormatModeLine(*result_, result_->modes.back()) << std::endl;
  }

  // Unregisters the regions (while the daemon lives) and frees them.
  void Release() {
    if (!daemon_->HasExited()) {
      for (uint64_t id : registered_) (void)daemon_->client().UnregisterRegion(id);
    }
    registered_.clear();
    video_in_.reset();
    video_out_.reset();
    audio_in_.reset();
    audio_out_.reset();
  }

  BenchDaemon* daemon_;
  const DaemonFacts& facts_;
  const MemoryLimits& limits_;
  const std::vector<const ModeSpec*>& modes_;
  GateCellResult* result_;
  std::ostream& out_;
  std::unique_ptr<client::SharedRegion> video_in_;
  std::unique_ptr<client::SharedRegion> video_out_;
  std::unique_ptr<client::SharedRegion> audio_in_;
  std::unique_ptr<client::SharedRegion> audio_out_;
  uint64_t video_in_id_ = 0;
  uint64_t video_out_id_ = 0;
  uint64_t audio_in_id_ = 0;
  uint64_t audio_out_id_ = 0;
  std::vector<uint64_t> registered_;
  std::vector<int64_t> output_shape_;
  DType output_dtype_ = DType::kUInt8;
  std::vector<int64_t> audio_output_shape_;
  bool have_reference_ = false;
  std::vector<uint8_t> video_reference_;  // eager's output
  std::vector<uint8_t> audio_reference_;
};

// o.modes, eager first.
std::vector<const ModeSpec*> GateModes(const MatrixOptions& o) {
  std::vector<const ModeSpec*> modes;
  for (const std::string& name : o.modes) modes.push_back(FindMode(name));
  std::stable_partition(modes.begin(), modes.end(),
                        [](const ModeSpec* m) { return m->baseline; });
  return modes;
}

void PrintGateHeader(const MatrixOptions& o, const std::vector<const ModeSpec*>& modes,
                     size_t cells, const DaemonFacts& facts, const MemoryLimits& limits,
                     const std::string& version, std::ostream& out) {
  std::vector<std::string> names;
  for (const ModeSpec* m : modes) names.push_back(m->name);
  out << "vaed_bench_matrix --gate " << o.gate << ": " << cells << " cells x " << modes.size()
      << " modes (" << ops::Join(names, ", ") << "), scale 1/" << o.gate_scale << ", "
      << ComputeDtypeName(o.dtypes.front()) << ", " << ops::FormatFixed(kGateFps, 0) << " fps\n"
      << "model     " << ModelKindName(o.model_kind) << ": video "
      << (o.weights.empty() ? "random weights" : o.weights)
      << (facts.audio ? ", audio " + (o.audio_weights.empty() ? std::string("random weights")
                                                              : o.audio_weights)
                      : std::string(", no audio decoder"))
      << (facts.demo_weights ? " (demo weights)" : "") << "\n"
      << "daemon    " << o.vaed_binary << (version.empty() ? "" : " ") << version << ", device "
      << DeviceName(o.device) << ", intra_op_threads " << o.threads << ", memory budget "
      << (o.memory_budget_mib > 0 ? std::to_string(o.memory_budget_mib) + " MiB" : "none")
      << ", host " << Hostname() << " (" << std::thread::hardware_concurrency() << " CPUs, "
      << ops::HumanBytes(limits.host_total_bytes) << ")"
      << (limits.device_total_bytes > 0
              ? ", device memory " + ops::HumanBytes(limits.device_total_bytes)
              : std::string())
      << "\n"
      << "criteria  exact: video and audio bytes equal eager's; a/v: frames and samples by the\n"
      << "          H3 rules; fallback: the reply lists none; memory: peak within the budget,\n"
      << "          else the host's (and the device's) memory. SKIP: refused by the daemon's\n"
      << "          memory limit (cells 'where the limits allow' only)\n";
}

nlohmann::json GateRunToJson(const MatrixOptions& o, const std::vector<const ModeSpec*>& modes,
                             const DaemonFacts& facts, const MemoryLimits& limits,
                             const std::string& version, const std::vector<GateCellResult>& cells,
                             const GateSummary& summary) {
  std::vector<std::string> names;
  for (const ModeSpec* m : modes) names.push_back(m->name);
  nlohmann::json cells_json = nlohmann::json::array();
  for (const GateCellResult& c : cells) cells_json.push_back(GateCellToJson(c));
  return {
      {"gate", o.gate},
      {"verdict", VerdictName(summary.verdict)},
      {"settings",
       {{"scale", o.gate_scale},
        {"fps", kGateFps},
        {"dtype", ComputeDtypeName(o.dtypes.front())},
        {"device", DeviceName(o.device)},
        {"modes", names},
        {"seed", o.seed},
        {"output_format", "uint8_nhwc"},
        {"memory_budget_mib", o.memory_budget_mib}}},
      {"machine",
       {{"hostname", Hostname()},
        {"hardware_concurrency", std::thread::hardware_concurrency()},
        {"threads", o.threads},
        {"host_mem_total_bytes", limits.host_total_bytes},
        {"device_total_bytes", limits.device_total_bytes}}},
      {"daemon", {{"binary", o.vaed_binary}, {"version", version}}},
      {"model",
       {{"kind", ModelKindName(o.model_kind)},
        {"weights", o.weights},
        {"config", o.config},
        {"audio_weights", o.audio_weights},
        {"audio_config", o.audio_config},
        {"capabilities", facts.capabilities},
        {"demo_weights", facts.demo_weights}}},
      {"cells", cells_json},
      {"summary", GateSummaryToJson(summary)},
  };
}

}  // namespace

int RunReleaseGate(const MatrixOptions& o) {
  const std::vector<GateCell>* cells = FindGateCells(o.gate);
  if (cells == nullptr) {
    std::cerr << "vaed_bench_matrix: no gate '" << o.gate << "'\n";
    return 2;
  }
  const ComputeDtype dtype = o.dtypes.front();
  std::vector<std::string> daemon_args;
  if (o.group_ranks > 0) daemon_args = {"--group-ranks", std::to_string(o.group_ranks)};
  spdlog::info("gate {}: starting {} ({} {}) ...", o.gate, o.vaed_binary,
               ModelKindName(o.model_kind), ComputeDtypeName(dtype));
  auto started =
      BenchDaemon::Start(o.vaed_binary, MatrixDaemonConfigToml(o, dtype), daemon_args,
                         std::chrono::seconds(o.start_timeout_s), o.request_timeout_s * 1000);
  if (!started.ok()) {
    std::cout << "FAIL  gate " << o.gate << ": the daemon did not start: "
              << started.status().message() << std::endl;
    return 1;
  }
  std::unique_ptr<BenchDaemon> daemon = std::move(started).value();
  spdlog::info("daemon ready in {} s; log {}", ops::FormatFixed(daemon->cold_start_s(), 3),
               daemon->log_path());
  auto facts = ReadDaemonFacts(daemon->client());
  if (!facts.ok()) {
    std::cout << "FAIL  gate " << o.gate << ": " << facts.status().ToString() << std::endl;
    (void)daemon->Stop(std::chrono::seconds(60));
    return 1;
  }
  const std::string version = ClientProtocol::Hello(daemon->client()).daemon_version();
  const MemoryLimits limits{HostMemTotalBytes(), facts->device_total_bytes};
  const std::vector<const ModeSpec*> modes = GateModes(o);
  PrintGateHeader(o, modes, cells->size(), *facts, limits, version, std::cout);

  std::vector<GateCellResult> results;
  for (size_t i = 0; i < cells->size(); ++i) {
    GateCellResult result;
    result.cell = (*cells)[i];
    result.shape = ShapeOf(result.cell, o.gate_scale);
    spdlog::info("cell {}/{}: {} latent {}{}", i + 1, cells->size(), CellLabel(result.cell),
                 ShapeToString(result.shape.latent_shape()),
                 facts->audio ? " audio " + ShapeToString(result.shape.audio_latent_shape())
                              : std::string());
    if (daemon->HasExited()) {
      result.error = "the daemon exited during an earlier cell (its log: " + daemon->log_path() + ")";
      std::cout << FormatCellLine(result) << std::endl;
    } else {
      GateCellRun(daemon.get(), *facts, limits, modes, &result, std::cout).Run(o.seed + 2 * i);
    }
    results.push_back(std::move(result));
  }

  const GateSummary summary = Summarize(results);
  std::cout << FormatSummary(o.gate, summary) << std::flush;
  int exit_code = GateExitCode(summary);
  if (Status s = daemon->Stop(std::chrono::seconds(60)); !s.ok()) {
    spdlog::error("{}", s.message());
    exit_code = 1;
  }
  if (!o.json_path.empty()) {
    const nlohmann::json doc = GateRunToJson(o, modes, *facts, limits, version, results, summary);
    if (Status s = WriteJsonFile(o.json_path, doc); !s.ok()) {
      std::cerr << "vaed_bench_matrix: " << s.message() << "\n";
      return 1;
    }
    spdlog::info("wrote {}", o.json_path);
  }
  return exit_code;
}

}  // namespace vaed::bench
