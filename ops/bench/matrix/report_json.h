// vaed_bench_matrix --json FILE: the results as one JSON document, read by
// ops/bench/plot_bench.py. Seconds and bytes; null where a figure was not
// measured.
//
// Thread-safety: pure functions (WriteMatrixJson writes one file).
#ifndef VAED_OPS_BENCH_MATRIX_REPORT_JSON_H_
#define VAED_OPS_BENCH_MATRIX_REPORT_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "ops/bench/matrix/options.h"
#include "ops/bench/matrix/results.h"
#include "vaed/status.h"

namespace vaed::bench {

// {machine {threads, hostname, hardware_concurrency}, daemon {binary,
// version}, model {kind, weights, config, plan_cache_capacity}, settings
// {warmup, iterations, seed, modes, vae_shares, output_format; with groups
// also group_ranks, group_sizes}, cold_start_s {dtype: seconds | null},
// runs [one object per (cell, mode): dtype, latent_shape, latent_source,
// output_shape, output_bytes, mode, request {profile, stack_tiling,
// compile[, group_size]}, status, reason; when measured also the timings,
// peaks, tiling, speedups, output equality and, with groups, group {...};
// a cell that could not run: dtype, latent_shape, latent_source, status
// "failed", reason], amdahl [{dtype, latent_shape, mode, vae_share,
// vae_speedup, end_to_end_speedup}]}.
nlohmann::json MatrixRunToJson(const MatrixOptions& o, const MatrixRun& run);

// Writes `doc` (indented by 2, newline-terminated) to `path`, creating its
// parent directories. kIoError "writing <path>: <strerror>" on failure.
Status WriteJsonFile(const std::string& path, const nlohmann::json& doc);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_REPORT_JSON_H_
