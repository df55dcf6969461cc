// How the in-process LibTorch benchmarks (vaed_bench_h3_video,
// vaed_bench_h3_audio) run: their command line, then the measurement under
// the daemon's settings, with LibTorch's exceptions stopped at this one
// edge.
#ifndef VAED_OPS_BENCH_IN_PROCESS_BENCH_H_
#define VAED_OPS_BENCH_IN_PROCESS_BENCH_H_

#include <CLI/CLI.hpp>
#include <functional>

namespace vaed::bench {

// Sets MKL up for reproducible decodes as the daemon does (models::
// SetUpMklForReproducibleDecodes; MKL_CBWR overrides), sets spdlog to
// warnings only, applies the daemon's allocator policy
// (engine::RetainFreedMemoryForReuse) unless `glibc_default_malloc`, and
// returns run()'s exit code. The model APIs return Status; what LibTorch
// still throws outside them (thread pool, randn, reference matmuls,
// torch::equal) is printed as "<program>: <status>" (models::
// CurrentTorchErrorStatus) to stderr and gives exit code 1. Call once.
int RunInProcessBenchmark(const char* program, bool glibc_default_malloc,
                          const std::function<int()>& run);

// The whole main() of such a benchmark: `define` describes the program
// and binds the options of an Options (which has a bool
// glibc_default_malloc) to a CLI::App; a command line CLI11 rejects (or
// --help) ends with CLI11's exit code; otherwise
// RunInProcessBenchmark(program, o.glibc_default_malloc, run(o)).
template <typename Options>
int InProcessBenchmarkMain(int argc, char** argv, const char* program,
                           void (*define)(CLI::App& app, Options* options),
                           int (*run)(const Options& options)) {
  Options o;
  CLI::App app;
  define(app, &o);
  CLI11_PARSE(app, argc, argv);
  return RunInProcessBenchmark(program, o.glibc_default_malloc, [&o, run] { return run(o); });
}

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_IN_PROCESS_BENCH_H_
