// vaed_bench_matrix --gate NAME: a release gate (ops/bench/release_gate.h)
// run through a daemon this program starts with the generated config of
// matrix/options.h: every cell of the gate, each decoded once per mode of
// --modes (eager first: the byte reference) with its stereo audio when the
// model has an audio decoder, one line per (cell, mode) on stdout as it
// finishes, then a summary; with --json also the results as one document.
// Progress and the daemon's start-up go to stderr (spdlog).
#ifndef VAED_OPS_BENCH_MATRIX_GATE_RUNNER_H_
#define VAED_OPS_BENCH_MATRIX_GATE_RUNNER_H_

#include "ops/bench/matrix/options.h"

namespace vaed::bench {

// Runs gate o.gate (o checked by ValidateMatrixOptions) with o's daemon and
// model settings, o.dtypes.front(), o.modes, o.gate_scale, o.seed (cell i
// decodes random normal latents seeded o.seed + 2i, audio o.seed + 2i + 1)
// and o.json_path. Returns the exit code: 0 when every cell passed or was
// skipped; 1 when a cell failed, the daemon did not start or did not stop
// cleanly, or the JSON could not be written. Not thread-safe (starts and
// stops a daemon).
int RunReleaseGate(const MatrixOptions& o);

}  // namespace vaed::bench

#endif  // VAED_OPS_BENCH_MATRIX_GATE_RUNNER_H_
