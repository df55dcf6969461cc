#include "daemon/models/taef2_network.h"

#include <utility>

namespace vaed::models {
namespace taef2 {

uint64_t ResidentBytes(const std::vector<Param>& params) {
  uint64_t bytes = 0;
  for (const Param& p : params) bytes += static_cast<uint64_t>(p.slot->nbytes());
  return bytes;
}

namespace {

torch::Tensor Conv3(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return torch::conv2d(x, w, b, /*stride=*/1, /*padding=*/1);
}

torch::Tensor Conv1(const torch::Tensor& x, const torch::Tensor& w) {
  return torch::conv2d(x, w);  // no bias, stride 1, no padding
}

// README §4 "Block(x)".
torch::Tensor RunBlock(torch::Tensor x, const BlockWeights& b) {
  if (b.mid) {
    torch::Tensor g = Conv1(x, b.pool0_w);
    g = torch::group_norm(g, kGnGroups, b.pool1_w, b.pool1_b, kGnEps).relu_();
    x = x + Conv1(g, b.pool3_w);
  }
  torch::Tensor h = Conv3(x, b.conv0_w, b.conv0_b).relu_();
  h = Conv3(h, b.conv2_w, b.conv2_b).relu_();
  h = Conv3(h, b.conv4_w, b.conv4_b);
  return h.add_(x).relu_();
}

// Nearest x2: out[y][x] = in[y/2][x/2] (README §4, modules 6, 11, 16).
torch::Tensor Upsample2x(const torch::Tensor& x) {
  return torch::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)});
}

}  // namespace
}  // namespace taef2

std::vector<taef2::Param> Taef2Decoder::Weights::Params() {
  using taef2::Init;
  using taef2::kC;
  using taef2::kPoolC;
  std::vector<taef2::Param> p;
  auto conv3 = [](int64_t out, int64_t in) { return std::vector<int64_t>{out, in, 3, 3}; };
  auto block = [&](int module, taef2::BlockWeights& b) {
    const std::string k = std::to_string(module) + ".";
    if (b.mid) {
      p.push_back({k + "pool.0.weight", {kPoolC, kC, 1, 1}, &b.pool0_w, Init::kConvLinear});
      p.push_back({k + "pool.1.weight", {kPoolC}, &b.pool1_w, Init::kGnGamma});
      p.push_back({k + "pool.1.bias", {kPoolC}, &b.pool1_b, Init::kGnBeta});
      p.push_back({k + "pool.3.weight", {kC, kPoolC, 1, 1}, &b.pool3_w, Init::kConvResidual});
    }
    p.push_back({k + "conv.0.weight", conv3(kC, kC), &b.conv0_w, Init::kConvRelu});
    p.push_back({k + "conv.0.bias", {kC}, &b.conv0_b, Init::kBias});
    p.push_back({k + "conv.2.weight", conv3(kC, kC), &b.conv2_w, Init::kConvRelu});
    p.push_back({k + "conv.2.bias", {kC}, &b.conv2_b, Init::kBias});
    p.push_back({k + "conv.4.weight", conv3(kC, kC), &b.conv4_w, Init::kConvResidual});
    p.push_back({k + "conv.4.bias", {kC}, &b.conv4_b, Init::kBias});
  };
  p.push_back({"1.weight", conv3(kC, Taef2Decoder::kLatentChannels), &in_w, Init::kConvRelu});
  p.push_back({"1.bias", {kC}, &in_b, Init::kBias});
  for (int i = 0; i < 3; ++i) block(3 + i, mid[i]);
  p.push_back({"7.weight", conv3(kC, kC), &up1_w, Init::kConvLinear});
  for (int i = 0; i < 3; ++i) block(8 + i, stage1[i]);
  p.push_back({"12.weight", conv3(kC, kC), &up2_w, Init::kConvLinear});
  for (int i = 0; i < 3; ++i) block(13 + i, stage2[i]);
  p.push_back({"17.weight", conv3(kC, kC), &up3_w, Init::kConvLinear});
  block(18, stage3);
  p.push_back({"19.weight", conv3(Taef2Decoder::kOutputChannels, kC), &out_w, Init::kConvOutput});
  p.push_back({"19.bias", {Taef2Decoder::kOutputChannels}, &out_b, Init::kOutputBias});
  return p;
}

torch::Tensor Taef2Decoder::Forward(const torch::Tensor& latent) const {
  return Tail(Stem(latent));
}

torch::Tensor Taef2Decoder::Stem(const torch::Tensor& latent) const {
  const Weights& w = *weights_;
  torch::Tensor x = torch::tanh(latent / 3.0).mul_(3.0);  // module 0, soft clamp
  x = taef2::Conv3(x, w.in_w, w.in_b).relu_();            // modules 1, 2
  for (const taef2::BlockWeights& b : w.mid) x = taef2::RunBlock(std::move(x), b);
  return x;
}

torch::Tensor Taef2Decoder::Tail(const torch::Tensor& features) const {
  using taef2::Conv3;
  using taef2::RunBlock;
  using taef2::Upsample2x;
  const Weights& w = *weights_;
  torch::Tensor x = Conv3(Upsample2x(features), w.up1_w, {});  // modules 6, 7
  for (const taef2::BlockWeights& b : w.stage1) x = RunBlock(std::move(x), b);
  x = Conv3(Upsample2x(x), w.up2_w, {});  // modules 11, 12
  for (const taef2::BlockWeights& b : w.stage2) x = RunBlock(std::move(x), b);
  x = Conv3(Upsample2x(x), w.up3_w, {});  // modules 16, 17
  x = RunBlock(std::move(x), w.stage3);
  return Conv3(x, w.out_w, w.out_b);  // module 19, no activation
}

}  // namespace vaed::models
