#include "daemon/models/mkl_reproducibility.h"

#include <cmath>
#include <cstdlib>

// oneMKL's entry points as libtorch_cpu.so exports them: the service
// layer's CNR calls (the public mkl_cbwr_set / mkl_cbwr_get of
// mkl_service.h forward to these) and VML's vmsCos (mkl_vml_functions.h,
// LP64: MKL_INT is int). Weak: a program without MKL sees null.
extern "C" int mkl_serv_cbwr_set(int) __attribute__((weak));
extern "C" int mkl_serv_cbwr_get(int) __attribute__((weak));
extern "C" void vmsCos(int n, const float* a, float* r, long long mode) __attribute__((weak));

namespace vaed::models {
namespace {

// mkl_service.h's values.
constexpr int kMklCbwrBranch = 1;  // MKL_CBWR_BRANCH: ask for the code-path branch
constexpr int kMklCbwrAuto = 2;    // MKL_CBWR_AUTO
constexpr int kMklCbwrSuccess = 0;
constexpr int kMklCbwrModeChangeFailure = -8;  // MKL_CBWR_ERR_MODE_CHANGE_FAILURE
// mkl_vml_defines.h's: the mode LibTorch's own VML calls pass
// (VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE).
constexpr long long kVmlHa = 0x2, kVmlFtzDazOff = 0x140000, kVmlErrModeIgnore = 0x100;

MklReproducibilityOutcome PinCnr() {
  MklReproducibilityOutcome out;
  if (mkl_serv_cbwr_set == nullptr) return out;  // kNoMkl
  if (const char* env = std::getenv("MKL_CBWR"); env != nullptr && *env != '\0') {
    out.result = MklReproducibility::kFromEnvironment;
    out.environment = env;
    return out;
  }
  out.mkl_code = mkl_serv_cbwr_set(kMklCbwrAuto);
  if (out.mkl_code == kMklCbwrSuccess) {
    out.result = MklReproducibility::kPinnedAuto;
  } else if (out.mkl_code == kMklCbwrModeChangeFailure) {
    out.result = MklReproducibility::kTooLate;
  } else {
    out.result = MklReproducibility::kRefused;
  }
  return out;
}

// VML's first call, here and alone; true when it answered cos(0) = 1.
bool InitialiseVml() {
  if (vmsCos == nullptr) return false;
  float in[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  float out[8] = {};
  vmsCos(8, in, out, kVmlHa | kVmlFtzDazOff | kVmlErrModeIgnore);
  return out[0] == 1.0f && std::fabs(out[1] - 0.5403023f) < 1e-6f;
}

}  // namespace

MklReproducibilityOutcome SetUpMklForReproducibleDecodes() {
  MklReproducibilityOutcome out = PinCnr();
  if (out.result != MklReproducibility::kNoMkl) out.vml_initialised = InitialiseVml();
  return out;
}

int CurrentMklReproducibilityBranch() {
  return mkl_serv_cbwr_get == nullptr ? -1 : mkl_serv_cbwr_get(kMklCbwrBranch);
}

bool MklReproducibilityOutcome::reproducible() const {
  return vml_initialised && (result == MklReproducibility::kPinnedAuto ||
                             result == MklReproducibility::kFromEnvironment);
}

std::string MklReproducibilityOutcome::Describe() const {
  std::string cnr;
  switch (result) {
    case MklReproducibility::kPinnedAuto:
      cnr = "AUTO (set by vaed; MKL_CBWR overrides)";
      break;
    case MklReproducibility::kFromEnvironment:
      cnr = "MKL_CBWR=" + environment + " (from the environment)";
      break;
    case MklReproducibility::kNoMkl:
      return "MKL numerical reproducibility: no MKL in this LibTorch";
    case MklReproducibility::kTooLate:
      cnr = "OFF (MKL had run before vaed could set it)";
      break;
    case MklReproducibility::kRefused:
      cnr = "OFF (MKL refused AUTO with code " + std::to_string(mkl_code) + ")";
      break;
  }
  std::string line = "MKL numerical reproducibility: " + cnr;
  line += vml_initialised ? "; VML initialised" : "; VML did not answer its first call";
  if (!reproducible()) line += "; repeated decodes may differ in the last bits";
  return line;
}

}  // namespace vaed::models
