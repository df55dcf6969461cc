// vaed: the per-node VAE decode daemon. See README.md and
// ../shared/DESIGN.md for what it serves and how.
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/headeronly/version.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "daemon/engine/cuda_devices.h"
#include "daemon/engine/memory_policy.h"
#include "daemon/engine/rank_devices.h"
#include "daemon/engine/request_memory.h"
#include "daemon/engine/runtime_facts.h"
#include "daemon/engine/torch_cuda.h"
#include "daemon/models/mkl_reproducibility.h"
#include "daemon/models/model_registry.h"
#include "daemon/models/tensor_memory.h"
#include "daemon/server/command_line.h"
#include "daemon/server/control_loop.h"
#include "daemon/server/logging.h"
#include "daemon/server/startup_checks.h"

namespace {

// Written by the signal handler, polled by the control loop: a stop request
// goes through what the loop blocks on. A handler (not a blocked-signal
// signalfd) because libraries may start threads before main() whose signal
// mask we cannot set; the handler runs on whichever thread gets the signal.
int g_stop_fd = -1;

void OnStopSignal(int) {
  const uint64_t one = 1;
  // write(2) is async-signal-safe; a full counter only means "already asked".
  ssize_t n = write(g_stop_fd, &one, sizeof(one));
  (void)n;
}

int InstallStopHandlers() {
  g_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g_stop_fd < 0) return -1;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &sa, nullptr) != 0 || sigaction(SIGINT, &sa, nullptr) != 0) return -1;
  return g_stop_fd;
}

// Every local rank's models: one registry per rank (ranks never share a
// model instance), rank 0's first.
struct RankModels {
  std::vector<std::unique_ptr<vaed::models::ModelRegistry>> registries;
  std::vector<vaed::models::ModelRegistry*> Registries() const {
    std::vector<vaed::models::ModelRegistry*> out;
    for (const auto& r : registries) out.push_back(r.get());
    return out;
  }
};

// Resolves the ranks' devices (executor.device/devices; before anything
// slow) into facts->rank_devices, then loads each rank's models.
vaed::Result<RankModels> LoadRanks(const vaed::server::DaemonOptions& options,
                                   vaed::engine::RuntimeFacts* facts) {
  VAED_ASSIGN_OR_RETURN(facts->rank_devices,
                        vaed::engine::ResolveRankDevices(options.executor.device,
                                                         options.executor.devices,
                                                         options.group.ranks));
  const bool cuda = std::any_of(facts->rank_devices.begin(), facts->rank_devices.end(),
                               [](const vaed::engine::RankDevice& d) { return d.is_cuda; });
  if (cuda) {
    // float32 stays exact float32 on the devices (before any model math).
    VAED_RETURN_IF_ERROR(vaed::engine::UseExactFloat32().WithContext("CUDA ranks"));
    VAED_RETURN_IF_ERROR(vaed::engine::UseCudaEventTimings().WithContext("CUDA ranks"));
  }
  // The weights once for all ranks, before any model loads.
  auto verified = vaed::models::ModelRegistry::VerifyAll(options.models.entries);
  if (!verified.ok()) return verified.status().WithContext("loading models");
  RankModels ranks;
  for (size_t r = 0; r < facts->rank_devices.size(); ++r) {
    const vaed::engine::RankDevice& device = facts->rank_devices[r];
    spdlog::info("rank {}: {}", r, device.Describe());
    auto registry = vaed::models::ModelRegistry::Create(options.models.entries,
                                                        options.models.default_model,
                                                        device.TorchDevice(), &*verified);
    if (!registry.ok()) {
      return registry.status().WithContext(r == 0 ? std::string("loading models")
                                                  : "loading models for rank " + std::to_string(r));
    }
    ranks.registries.push_back(std::move(registry).value());
  }
  return ranks;
}

// GPU ranks' devices for the request limit (request_memory.h): each one's
// total memory (0 when unreadable) and the weights its models hold there.
// Empty for CPU ranks.
std::vector<vaed::engine::RankDeviceMemory> CudaRankMemory(
    const std::vector<vaed::engine::RankDevice>& rank_devices, const RankModels& ranks) {
  std::vector<vaed::engine::RankDeviceMemory> out;
  for (size_t r = 0; r < rank_devices.size(); ++r) {
    const vaed::engine::RankDevice& device = rank_devices[r];
    if (!device.is_cuda) continue;
    vaed::engine::RankDeviceMemory m{.name = device.Describe()};
    vaed::Result<vaed::engine::DeviceMemory> memory =
        vaed::engine::CudaDeviceMemory(device.cuda.ordinal);
    if (memory.ok()) {
      m.total_bytes = memory->total_bytes;
    } else {
      spdlog::warn("rank {} on {}: reading its device memory: {}; requests are not refused on "
                   "memory",
                   r, device.Describe(), memory.status().ToString());
    }
    for (const vaed::models::VaeModel* model : ranks.registries[r]->models()) {
      m.resident_bytes += model->info().resident_bytes;
    }
    out.push_back(std::move(m));
  }
  return out;
}

// Descriptors: one per connection and per registered region, plus
// LibTorch's, ZeroMQ's and the communicators' own. libzmq aborts the
// process when accept() hits EMFILE, so the limit must cover the caps:
// admitted connections (admin peers have kAdminReserve = 16 more), regions,
// and 512 for the rest (refused connections waiting to close are at most
// 64 of them). False (logged) when the hard limit is too low.
bool RaiseOpenFilesLimit(const vaed::server::ServerOptions& server) {
  const rlim_t needed = rlim_t{server.max_connections} + 16 + rlim_t{server.max_regions} + 512;
  struct rlimit lim {};
  // Twice that where the hard limit allows: the control loop stops
  // listening a quarter below the limit (connection storms, descriptor_guard.h).
  const rlim_t wanted = std::max(2 * needed, rlim_t{65536});
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < wanted) {
    lim.rlim_cur = std::min(lim.rlim_max, wanted);
    (void)setrlimit(RLIMIT_NOFILE, &lim);
    (void)getrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < needed) {
    spdlog::critical("open files limit is {} (hard {}); vaed needs {} for "
                     "server.max_connections = {} and server.max_regions = {} (+528). Raise "
                     "LimitNOFILE (systemd) / ulimit -n, or lower those limits",
                     lim.rlim_cur, lim.rlim_max, needed, server.max_connections,
                     server.max_regions);
    return false;
  }
  spdlog::info("open files limit: {}", lim.rlim_cur);
  return true;
}

// profiles.default = student needs a model with a student decoder, else
// every request would fail.
vaed::Status CheckStudentDefault(const vaed::server::DaemonOptions& options,
                                 const vaed::models::ModelRegistry& registry) {
  if (options.profiles.default_profile != vaed::server::Profile::kStudent) {
    return vaed::Status::Ok();
  }
  for (const vaed::models::VaeModel* m : registry.models()) {
    if (m->info().caps.student) return vaed::Status::Ok();
  }
  return vaed::FailedPrecondition("profiles.default is 'student' but no configured model has a "
                                  "student decoder artifact; every request would fail");
}

// The tensor memory budget, started after loading: the weights are what the
// operator configured; the budget bounds what the warm-up (compiled plans
// included) and requests add on top. Returns the budget in bytes (0 = none)
// and the bytes the weights hold.
vaed::Result<std::pair<uint64_t, uint64_t>> StartTensorBudget(
    const vaed::engine::ExecutorOptions& executor) {
  const uint64_t budget = executor.memory_budget_mib << 20;
  const uint64_t resident = vaed::models::LiveTensorBytes();
  if (budget > 0 && resident >= budget) {
    return vaed::FailedPrecondition(
        "executor.memory_budget_mib = " + std::to_string(executor.memory_budget_mib) +
        " MiB is below the " + std::to_string(resident >> 20) +
        " MiB that the weights already hold; raise it or set 0 (no budget)");
  }
  vaed::models::SetTensorMemoryBudget(budget);
  spdlog::info("tensor memory: {} MiB resident after loading; budget {}", resident >> 20,
               budget > 0 ? std::to_string(executor.memory_budget_mib) + " MiB"
                          : std::string("none"));
  return std::make_pair(budget, resident);
}

// What one request may hold at its peak (request_memory.h): the GPU ranks'
// device memory, else the host's and the budget.
vaed::engine::RequestMemory RequestMemoryLimit(
    const std::vector<vaed::engine::RankDevice>& rank_devices, const RankModels& ranks,
    uint64_t budget, uint64_t resident) {
  const std::vector<vaed::engine::RankDeviceMemory> devices = CudaRankMemory(rank_devices, ranks);
  const vaed::engine::RequestMemory limit =
      devices.empty()
          ? vaed::engine::RequestMemoryOf(budget, resident, vaed::engine::HostMemoryTotalBytes())
          : vaed::engine::DeviceRequestMemory(devices);
  if (limit.known) {
    spdlog::info("a request may use up to {} MiB ({})", limit.bytes >> 20, limit.source);
  }
  return limit;
}

// Process-wide set-up before any thread starts: MKL's reproducible mode
// (MKL refuses a CNR change after its first computation; VML's first call
// starts threads), glibc's memory retention, SIGPIPE ignored (a client that
// disappears must never kill the daemon through a write), the stop
// handlers. Returns the stop eventfd, or -1 (errno set).
int SetUpProcess(vaed::models::MklReproducibilityOutcome* mkl) {
  *mkl = vaed::models::SetUpMklForReproducibleDecodes();
  if (!vaed::engine::RetainFreedMemoryForReuse()) {
    std::fprintf(stderr, "vaed: warning: glibc refused the memory-retention policy\n");
  }
  signal(SIGPIPE, SIG_IGN);
  return InstallStopHandlers();
}

// Runs the control loop until a stop signal or a fatal error; the exit code.
int Serve(const vaed::server::DaemonOptions& options, const vaed::engine::RuntimeFacts& facts,
          const std::vector<vaed::models::ModelRegistry*>& registries, int stop_fd) {
  auto loop = vaed::server::ControlLoop::Create(options, facts, registries, stop_fd);
  if (!loop.ok()) {
    spdlog::critical("starting: {}", loop.status().ToString());
    return 1;
  }
  const vaed::Status s = (*loop)->Run();
  loop->reset();  // joins the executor, unlinks the socket
  if (!s.ok()) {
    spdlog::critical("control loop failed: {}", s.ToString());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  vaed::models::MklReproducibilityOutcome mkl;
  const int stop_fd = SetUpProcess(&mkl);
  if (stop_fd < 0) {
    std::perror("vaed: setting up signal handling");
    return 1;
  }
  vaed::server::CommandLine cli = vaed::server::ParseCommandLine(argc, argv);
  if (cli.exit_now) return cli.exit_code;
  const vaed::server::DaemonOptions& options = cli.options;
  vaed::server::SetupLogging(options.log.format, options.log.level);
  spdlog::info("vaed {} starting (LibTorch {}; config: {})", VAED_VERSION, TORCH_VERSION,
               options.source);
  if (mkl.reproducible()) {
    spdlog::info("{}", mkl.Describe());
  } else {
    spdlog::warn("{}", mkl.Describe());
  }
  // Everything that can fail without loading anything, before anything
  // slow (the weights can take minutes).
  if (vaed::Status s = vaed::server::CheckBeforeLoading(options); !s.ok()) {
    spdlog::critical("{}", s.ToString());
    return 1;
  }
  at::set_num_threads(options.executor.intra_op_threads);
  // Count tensor memory from the first weight on (peaks in replies, the
  // budget, stack_tiling auto's measured estimates).
  if (!vaed::models::InstallTensorMemoryTracking()) {
    spdlog::warn("tensor memory tracking unavailable: no budget, no measured memory estimates");
  }
  if (!RaiseOpenFilesLimit(options.server)) return 1;
  vaed::engine::RuntimeFacts facts;
  auto ranks = LoadRanks(options, &facts);
  if (!ranks.ok()) {
    spdlog::critical("{}", ranks.status().ToString());
    return 1;
  }
  if (vaed::Status s = CheckStudentDefault(options, *ranks->registries.front()); !s.ok()) {
    spdlog::critical("{}", s.message());
    return 1;
  }
  auto memory = StartTensorBudget(options.executor);
  if (!memory.ok()) {
    spdlog::critical("{}", memory.status().message());
    return 1;
  }
  facts.request_memory =
      RequestMemoryLimit(facts.rank_devices, *ranks, memory->first, memory->second);
  const int code = Serve(options, facts, ranks->Registries(), stop_fd);
  close(stop_fd);
  return code;
}
