// vaed_bench_h3_audio: how long the H3 audio decoder takes per second of
// audio on this machine.
//
// Builds the audio decoder (the released configuration with seeded random
// weights by default: the cost does not depend on the weight values; or
// real weights with --weights and --config), then decodes --seconds of
// audio (40 latent frames per second, 800 samples per latent frame at
// 32 kHz) mono (batch 1) and stereo (batch 2, the official layout: left and
// right as two batch items), after one untimed warm-up each. Reports wall
// seconds per decode, seconds of compute per second of audio, and the
// real-time factor. Uses the daemon's memory policy unless
// --glibc-default-malloc. Figures to read, not pass/fail criteria.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/models/h3/audio_decoder.h"
#include "ops/bench/bench_cli.h"
#include "ops/bench/in_process_bench.h"
#include "ops/common/text_format.h"

namespace {

using vaed::models::h3::AudioDecoder;
using vaed::models::h3::AudioDecoderConfig;
using Clock = std::chrono::steady_clock;

// The command line (see DefineOptions() for each flag's help).
struct BenchOptions {
  double seconds = 10.0;              // of audio to decode; rounded to whole latent frames
  int threads = 2;                    // LibTorch intra-op threads
  int iterations = 1;                 // timed decodes per layout; the fastest is reported
  uint64_t seed = 1;                  // of the latents and the random weights
  std::string weights;                // real weights (safetensors); "" = seeded random weights
  std::string config;                 // decoder config JSON; "" = the released configuration
  bool json = false;                  // also print the figures as JSON
  bool glibc_default_malloc = false;  // skip the daemon's memory policy
};

int Run(const BenchOptions& o) {
  if (!std::isfinite(o.seconds)) {  // CLI::Range lets NaN through
    std::cerr << "vaed_bench_h3_audio: --seconds must be a finite number in [0.025, 600]\n";
    return 2;
  }
  at::set_num_threads(o.threads);
  torch::NoGradGuard no_grad;
  AudioDecoderConfig config = AudioDecoderConfig::Official();
  if (!o.config.empty()) {
    auto loaded = AudioDecoderConfig::LoadJsonFile(o.config);
    if (!loaded.ok()) {
      std::cerr << "vaed_bench_h3_audio: " << loaded.status().ToString() << "\n";
      return 2;
    }
    config = *loaded;
  }
  auto decoder = o.weights.empty() ? AudioDecoder::CreateRandom(config, o.seed)
                                   : AudioDecoder::Load(config, o.weights);
  if (!decoder.ok()) {
    std::cerr << "vaed_bench_h3_audio: " << decoder.status().ToString() << "\n";
    return 1;
  }
  const int64_t hop = config.hop_samples();
  const double latent_rate = double(config.sample_rate) / double(hop);  // 40 Hz
  const int64_t latent_frames = std::max<int64_t>(1, int64_t(o.seconds * latent_rate + 0.5));
  const double audio_seconds = double(latent_frames * hop) / double(config.sample_rate);
  std::cout << "H3 audio decoder benchmark: " << latent_frames
            << " latent frames = " << latent_frames * hop << " samples = " << audio_seconds
            << " s of " << config.sample_rate << " Hz audio; "
            << (o.weights.empty() ? "random" : "real") << " weights ("
            << vaed::ops::HumanBytes((*decoder)->resident_bytes()) << "), " << o.threads
            << " intra-op threads\n";

  vaed::ops::TextTable table({"channels", "decode s", "s per s of audio", "real-time factor"},
                             {false, true, true, true});
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t channels : {1, 2}) {
    torch::Generator g = at::detail::createCPUGenerator(o.seed + channels);
    torch::Tensor latent =
        torch::randn({channels, config.latent_channels, latent_frames}, g, torch::kFloat);
    torch::Tensor z = (*decoder)->Denormalize(latent);
    torch::Tensor out = (*decoder)->Forward(z);  // warm-up
    double best = 1e300;
    for (int i = 0; i < o.iterations; ++i) {
      const auto t0 = Clock::now();
      out = (*decoder)->Forward(z);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    if (out.size(2) != latent_frames * hop) {
      std::cerr << "vaed_bench_h3_audio: decoded " << out.size(2) << " samples, expected "
                << latent_frames * hop << "\n";
      return 1;
    }
    const double per_second = best / audio_seconds;
    table.AddRow({channels == 1 ? "mono" : "stereo", vaed::ops::FormatFixed(best, 3),
                  vaed::ops::FormatFixed(per_second, 4),
                  vaed::ops::FormatFixed(1.0 / per_second, 2) + "x"});
    rows.push_back(
        {{"channels", channels}, {"decode_s", best}, {"seconds_per_audio_second", per_second}});
  }
  std::cout << "\n" << table.Render();
  if (o.json) {
    const nlohmann::json doc = {{"latent_frames", latent_frames},
                                {"audio_seconds", audio_seconds},
                                {"threads", o.threads},
                                {"results", rows}};
    std::cout << doc.dump(2) << "\n";
  }
  return 0;
}

// Describes the program and declares every option, bound to `*o`.
void DefineOptions(CLI::App& app, BenchOptions* o) {
  app.description(
      "H3 audio decoder benchmark: decode time per second of 32 kHz audio, mono and "
      "stereo (official configuration, random weights unless --weights)");
  vaed::bench::AddRangeOption(app, "--seconds", &o->seconds, "seconds of audio to decode", 0.025,
                              600.0);
  vaed::bench::AddRangeOption(app, "--threads", &o->threads, "LibTorch intra-op threads", 1, 1024);
  app.add_option("--iterations", o->iterations, "timed decodes per layout (min is reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o->seed, "seed of the latents and random weights")
      ->capture_default_str();
  app.add_option("--weights", o->weights, "real audio decoder weights (safetensors)")
      ->check(CLI::ExistingFile);
  app.add_option("--config", o->config, "audio decoder config JSON (default: released values)")
      ->check(CLI::ExistingFile);
  app.add_flag("--json", o->json, "also print the figures as JSON");
  app.add_flag("--glibc-default-malloc", o->glibc_default_malloc,
               "keep glibc's default malloc settings instead of the daemon's memory policy");
}

}  // namespace

int main(int argc, char** argv) {
  return vaed::bench::InProcessBenchmarkMain(argc, argv, "vaed_bench_h3_audio", DefineOptions, Run);
}
