#include "ops/bench/matrix/results.h"

#include "ops/common/sample_stats.h"

namespace vaed::bench {

const char* StateName(ModeState s) {
  switch (s) {
    case ModeState::kOk:
      return "ok";
    case ModeState::kUnsupported:
      return "unsupported";
    case ModeState::kFailed:
      return "failed";
  }
  return "?";
}

std::string ModeResult::name() const { return VariantName(*spec, group_size); }

std::optional<double> ModeResult::TimingMedian(const std::string& component) const {
  auto it = timing_s.find(component);
  if (it == timing_s.end() || it->second.empty()) return std::nullopt;
  return ops::Median(it->second);
}

std::string VaeComponent(ModelKind kind) {
  return kind == ModelKind::kTaef2 ? "taef2.decode_latent" : "video_vae.decode_latent";
}

double EndToEndSpeedup(double vae_share, double vae_speedup) {
  return 1.0 / ((1.0 - vae_share) + vae_share / vae_speedup);
}

bool IsReference(const MatrixOptions& o, const ModeResult& m) {
  return m.spec->baseline &&
         m.group_size == (o.group_sizes.empty() ? 0 : o.group_sizes.front());
}

std::string ReferenceName(const MatrixOptions& o) {
  return o.group_sizes.empty() ? "eager" : "eager S=" + std::to_string(o.group_sizes.front());
}

std::optional<double> RankDecodeMedian(const RankStats& r) {
  return r.decode_s.empty() ? std::nullopt : std::optional<double>(ops::Median(r.decode_s));
}

}  // namespace vaed::bench
