// vaed_bench_matrix's report on stdout: the settings, the cold starts and,
// per (dtype, latent) cell, the mode table, each mode's decisions, the
// Amdahl end-to-end speedups and (with --group-sizes) the VAE group table.
// Seconds with three decimals, bytes in binary units.
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_BENCH_MATRIX_REPORT_TEXT_H_
#define VAED_OPS_BENCH_MATRIX_REPORT_TEXT_H_

#include <ostream>

#include "ops/bench/matrix/options.h"
#include "ops/bench/matrix/results.h"

namespace vaed::bench {

// Writes the whole report to `out`.
void PrintMatrixReport(const MatrixOptions& o, const MatrixRun& run, std::ostream& out);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_REPORT_TEXT_H_
