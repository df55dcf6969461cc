// vaed: the per-node VAE decode daemon. See README.md and
// ../shared/DESIGN.md for what it serves and how.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "daemon/models/model_registry.h"
#include "daemon/server/config.h"
#include "daemon/server/control_loop.h"

namespace {

// SIGTERM and SIGINT are blocked in every thread (threads inherit the mask)
// and read through a signalfd by the control loop, so a stop request goes
// through what the loop blocks on.
int BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return -1;
  return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

}  // namespace

int main(int argc, char** argv) {
  // A client that disappears must never kill the daemon through a write.
  signal(SIGPIPE, SIG_IGN);
  const int stop_fd = BlockStopSignals();
  if (stop_fd < 0) {
    std::perror("vaed: setting up signal handling");
    return 1;
  }

  vaed::server::CommandLine cli = vaed::server::ParseCommandLine(argc, argv);
  if (cli.exit_now) return cli.exit_code;
  const vaed::server::DaemonOptions& options = cli.options;

  spdlog::set_level(spdlog::level::from_str(options.log.level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::info("vaed {} starting (config: {})", VAED_VERSION, options.source);
  at::set_num_threads(options.executor.intra_op_threads);

  auto registry = vaed::models::ModelRegistry::Create(options.models.entries,
                                                      options.models.default_model);
  if (!registry.ok()) {
    spdlog::critical("loading models: {}", registry.status().ToString());
    return 1;
  }
  auto loop = vaed::server::ControlLoop::Create(options, registry->get(), stop_fd);
  if (!loop.ok()) {
    spdlog::critical("starting: {}", loop.status().ToString());
    return 1;
  }
  const vaed::Status s = (*loop)->Run();
  loop->reset();  // joins the executor, unlinks the socket
  close(stop_fd);
  if (!s.ok()) {
    spdlog::critical("control loop failed: {}", s.ToString());
    return 1;
  }
  return 0;
}
