// MKL set up for reproducible decodes, once per process.
//
// LibTorch 2.11's CPU build links Intel oneMKL statically into
// libtorch_cpu.so: MKL serves the float32 matmuls (sgemm) and, through its
// vector math library (VML), LibTorch's elementwise cos, sin, exp, tanh,
// ... Two settings make a decode's bytes the same from call to call:
//
// 1. VML initialised on one thread before any parallel work. VML sets
//    itself up on its first call in the process; when two of LibTorch's
//    intra-op threads make that first call at the same moment, the elements
//    of one of them can come out of another code path (cos off by up to
//    1.5e-4). Measured on a 2-core Xeon (AVX-512) with 3-4 processes at
//    once: the first cos of a [230, 230] tensor with 2 threads differed from
//    every later one in 6 of 300 and 8 of 160 processes, and in 0 of 300
//    after one single-threaded VML call at start-up. In the decoders this
//    was the first decode of a process (the H3 RoPE tables, TAEF2's tanh)
//    differing in its last bits from every later decode of the same latent.
// 2. MKL's Conditional Numerical Reproducibility (CNR) in AUTO mode: MKL
//    fixes, once per process, the fastest code path this CPU supports, and
//    gives the same results for the same inputs and thread count on every
//    call (oneMKL Developer Guide, "Obtaining Numerically Reproducible
//    Results"); without it MKL documents no such promise.
//
// Results are equal within one machine and CPU type, not across CPU types;
// MKL_CBWR in the environment (honoured, never overridden; COMPATIBLE gives
// the same results on every x86-64 CPU, slower) replaces AUTO.
//
// Thread-safety: call SetUpMklForReproducibleDecodes once, from main(),
// before any LibTorch computation and before threads start: MKL refuses a
// CNR change after its first computation. No LibTorch headers: programs
// without LibTorch link it too (the answer is then kNoMkl).
#ifndef VAED_DAEMON_MODELS_MKL_REPRODUCIBILITY_H_
#define VAED_DAEMON_MODELS_MKL_REPRODUCIBILITY_H_

#include <string>

namespace vaed::models {

enum class MklReproducibility {
  kPinnedAuto,       // vaed set CNR AUTO
  kFromEnvironment,  // MKL_CBWR was set: MKL follows it
  kNoMkl,            // no MKL in this process (a LibTorch without MKL, or none)
  kTooLate,          // MKL had computed already and refused the change
  kRefused,          // MKL answered another error code
};

struct MklReproducibilityOutcome {
  MklReproducibility result = MklReproducibility::kNoMkl;
  int mkl_code = 0;              // MKL's return code where kRefused or kTooLate
  std::string environment;       // MKL_CBWR's value where kFromEnvironment
  bool vml_initialised = false;  // VML's first call made here, on one thread

  // One line for the start-up log, e.g. "MKL numerical reproducibility:
  // AUTO (set by vaed; MKL_CBWR overrides); VML initialised".
  std::string Describe() const;
  // True where MKL follows a reproducible mode (pinned or from MKL_CBWR)
  // and VML was initialised here.
  bool reproducible() const;
};

// Turns on CNR AUTO unless MKL_CBWR is set, then makes VML's first call on
// the calling thread.
MklReproducibilityOutcome SetUpMklForReproducibleDecodes();

// MKL's current CNR branch (MKL_CBWR_BRANCH_OFF = 1, AUTO = 2,
// COMPATIBLE = 3, ...), or -1 without MKL.
int CurrentMklReproducibilityBranch();

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_MKL_REPRODUCIBILITY_H_
