// A tiny H3 video decoder with seeded random weights for tests that need a
// real ViT decoder but not the shared data: the golden tiny geometry (2
// blocks of width 128, 2 heads of 64, FFN 512) on the official tiling.
// Cheap: a [1, 24, 7, 16, 16] window decodes in well under a second.
#ifndef VAED_TESTS_MODELS_H3_TINY_VIDEO_VAE_H_
#define VAED_TESTS_MODELS_H3_TINY_VIDEO_VAE_H_

#include <cstdint>
#include <memory>

#include "daemon/models/h3/video_vae.h"

namespace vaed::models::h3::test_util {

// The model "h3_tiny" with weights from `seed`; an error when creation
// fails (the caller asserts ok()).
inline Result<std::unique_ptr<VideoVae>> TinyRandomVideoVae(uint64_t seed) {
  VideoDecoderConfig config = VideoDecoderConfig::Official();
  config.depth = 2;
  config.dim = 128;
  config.heads = 2;
  config.dim_head = 64;
  config.ffn_inner = 512;
  VideoVaeOptions options;
  options.name = "h3_tiny";
  options.config = &config;  // read by Create() only
  options.seed = seed;
  return VideoVae::Create(options);
}

}  // namespace vaed::models::h3::test_util

#endif  // VAED_TESTS_MODELS_H3_TINY_VIDEO_VAE_H_
