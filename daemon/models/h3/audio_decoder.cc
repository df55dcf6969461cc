#include "daemon/models/h3/audio_decoder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/models/device_placement.h"
#include "daemon/models/safetensors.h"
#include "daemon/models/torch_dtype.h"
#include "daemon/models/torch_status.h"
#include "daemon/models/weight_verification.h"

namespace vaed::models::h3 {
namespace {

// safetensors data is little-endian and is copied into host tensors as is.
static_assert(std::endian::native == std::endian::little, "vaed assumes a little-endian host");

// Anti-aliased activation geometry for ratio 2 and 12 taps
// (dac_alias_free_resample.py / dac_alias_free_filter.py):
//   UpSample1d:   pad = 12/2 - 1 = 5 (replicate, both sides);
//                 crop = 5*2 + (12-2)/2 = 15 (left), 5*2 + (12-2+1)/2 = 15 (right)
//   DownSample1d: replicate pad 12/2 - 1 = 5 (left), 12/2 = 6 (right), stride 2
constexpr int64_t kRatio = 2;
constexpr int64_t kUpPad = AudioDecoder::kFilterTaps / kRatio - 1;
constexpr int64_t kUpCropLeft = kUpPad * kRatio + (AudioDecoder::kFilterTaps - kRatio) / 2;
constexpr int64_t kUpCropRight = kUpPad * kRatio + (AudioDecoder::kFilterTaps - kRatio + 1) / 2;
constexpr int64_t kDownPadLeft = AudioDecoder::kFilterTaps / 2 - 1;
constexpr int64_t kDownPadRight = AudioDecoder::kFilterTaps / 2;
// Named one-element size arguments (a literal 0 would also match the
// string_view `padding` overloads of torch::conv1d).
constexpr int64_t kZero = 0;
constexpr int64_t kOne = 1;
static_assert(kUpPad == 5 && kUpCropLeft == 15 && kUpCropRight == 15);
// SnakeBeta's `no_div_by_zero` (dac_activations.py).
constexpr double kSnakeEps = 1e-9;
// conv_pre / conv_post: kernel 7, padding 3 (dac_bigvgan.py).
constexpr int64_t kPrePostKernel = 7;
constexpr int64_t kPrePostPadding = 3;

// Encoder-side key prefixes of the full audio VAE state_dict (spec §3.3);
// skipped by Load().
constexpr std::string_view kEncoderPrefixes[] = {"encoder.", "pre_block.", "mean_proj.",
                                                 "logs_proj."};

// How CreateRandom() draws a tensor (golden README §4 "Audio"); ignored
// when loading a file.
enum class Init {
  kInProj,       // dec_in_proj.weight: N(0, 1/fan_in)
  kBias,         // N(0, 0.1^2)
  kSnake,        // log alpha / log beta: N(0, 0.5^2)
  kFilter,       // kaiser-sinc low-pass, as the official constructor computes it
  kWeightG,      // U(0.4, 1.2)
  kWeightGPost,  // conv_post g: 0.3
};

}  // namespace

// Conv1d / ConvTranspose1d with its weight norm folded. Not in the
// anonymous namespace because AudioDecoder::Weights holds it.
struct H3AudioConv {
  torch::Tensor weight;  // folded, float32
  torch::Tensor bias;    // undefined when the conv has none
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t stride = 1;  // ConvTranspose1d only
};

// One Activation1d(SnakeBeta): per-channel terms precomputed from the
// stored parameters exactly as SnakeBeta.forward computes them per call.
struct H3AudioSnake {
  torch::Tensor alpha;      // [1, C, 1]: e^alpha (log-scale) or alpha
  torch::Tensor inv_beta;   // [1, C, 1]: 1 / (e^beta + 1e-9) or 1 / (beta + 1e-9)
  torch::Tensor up_filter;  // [1, 1, 12], stored buffer
  std::array<torch::Tensor, AudioDecoder::kFilterTaps> up_taps;  // up_filter's values, 0-dim
  torch::Tensor down_filter;                                     // [1, 1, 12], stored buffer
};

struct H3AudioAmpBlock {
  std::vector<H3AudioConv> convs1;  // dilated, one per dilation
  std::vector<H3AudioConv> convs2;  // dilation 1
  // Two per dilation: acts[2n] runs before convs1[n], acts[2n+1] before convs2[n].
  std::vector<H3AudioSnake> acts;
};

struct H3AudioStage {
  H3AudioConv up;  // ConvTranspose1d
  std::vector<H3AudioAmpBlock> blocks;
};

// All decoder tensors, float32, on the decoder's device.
struct H3AudioWeights {
  torch::Tensor latents_mean;  // [1, C, 1]
  torch::Tensor latents_std;   // [1, C, 1]
  H3AudioConv in_proj;
  H3AudioConv conv_pre;
  std::vector<H3AudioStage> stages;
  H3AudioSnake act_post;
  H3AudioConv conv_post;
};

struct AudioDecoder::Weights {
  H3AudioWeights w;
};

namespace {

void AddConvSlots(H3AudioConv& c, std::vector<torch::Tensor*>* slots) {
  slots->push_back(&c.weight);
  slots->push_back(&c.bias);
}

void AddSnakeSlots(H3AudioSnake& a, std::vector<torch::Tensor*>* slots) {
  for (torch::Tensor* t : {&a.alpha, &a.inv_beta, &a.up_filter, &a.down_filter}) {
    slots->push_back(t);
  }
  for (torch::Tensor& tap : a.up_taps) slots->push_back(&tap);
}

// Every tensor of `w` (undefined ones included: MoveTensorsTo skips them).
std::vector<torch::Tensor*> Slots(H3AudioWeights& w) {
  std::vector<torch::Tensor*> slots{&w.latents_mean, &w.latents_std};
  AddConvSlots(w.in_proj, &slots);
  AddConvSlots(w.conv_pre, &slots);
  for (H3AudioStage& stage : w.stages) {
    AddConvSlots(stage.up, &slots);
    for (H3AudioAmpBlock& block : stage.blocks) {
      for (H3AudioConv& c : block.convs1) AddConvSlots(c, &slots);
      for (H3AudioConv& c : block.convs2) AddConvSlots(c, &slots);
      for (H3AudioSnake& a : block.acts) AddSnakeSlots(a, &slots);
    }
  }
  AddSnakeSlots(w.act_post, &slots);
  AddConvSlots(w.conv_post, &slots);
  return slots;
}

}  // namespace

namespace {

// Where WeightsBuilder gets its tensors: a weights file or a generator.
// Methods may throw c10::Error; callers catch.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // The float32 contiguous tensor `key` of `shape`.
  virtual Result<torch::Tensor> Plain(const std::string& key, const std::vector<int64_t>& shape,
                                      Init init) = 0;
  // {g, v} of the weight-normed conv `prefix`: v of `v_shape`, g of
  // [v_shape[0], 1, 1].
  virtual Result<std::pair<torch::Tensor, torch::Tensor>> WeightNorm(
      const std::string& prefix, const std::vector<int64_t>& v_shape, Init g_init) = 0;
};

// Copies one tensor out of the mapping (which may be misaligned) and casts
// it to float32. May throw c10::Error.
torch::Tensor ToFloatTensor(const TensorEntry& e) {
  return CopyOutOfMapping(e).to(torch::kFloat).contiguous();
}

class FileSource final : public TensorSource {
 public:
  explicit FileSource(const SafetensorsFile& file)
      : file_(file), base_(std::filesystem::path(file.path()).filename().string()) {}

  Result<torch::Tensor> Plain(const std::string& key, const std::vector<int64_t>& shape,
                              Init /*init*/) override {
    // Any float dtype is accepted and cast; anything else is reported as
    // "expected float32", the dtype of the golden and released weights.
    const TensorEntry* found = file_.Find(key);
    const DType dtype =
        found != nullptr && IsFloatDType(found->dtype) ? found->dtype : DType::kFloat32;
    VAED_ASSIGN_OR_RETURN(const TensorEntry* entry, file_.Require(key, dtype, shape));
    used_.insert(key);
    return ToFloatTensor(*entry);
  }

  Result<std::pair<torch::Tensor, torch::Tensor>> WeightNorm(const std::string& prefix,
                                                             const std::vector<int64_t>& v_shape,
                                                             Init /*g_init*/) override {
    const std::string legacy_g = prefix + ".weight_g";
    const std::string legacy_v = prefix + ".weight_v";
    const std::string param_g = prefix + ".parametrizations.weight.original0";
    const std::string param_v = prefix + ".parametrizations.weight.original1";
    const bool legacy = file_.Find(legacy_g) != nullptr || file_.Find(legacy_v) != nullptr;
    const bool param = file_.Find(param_g) != nullptr || file_.Find(param_v) != nullptr;
    if (!legacy && !param) {
      return NotFound(base_ + ": tensor '" + legacy_g + "' is missing (and so is its other " +
                      "spelling '" + param_g + "'); expected shape " +
                      ShapeToString({v_shape[0], 1, 1}));
    }
    // With both spellings present the unused pair is reported as unexpected.
    const std::string& g_key = legacy ? legacy_g : param_g;
    const std::string& v_key = legacy ? legacy_v : param_v;
    VAED_ASSIGN_OR_RETURN(torch::Tensor g, Plain(g_key, {v_shape[0], 1, 1}, Init::kWeightG));
    VAED_ASSIGN_OR_RETURN(torch::Tensor v, Plain(v_key, v_shape, Init::kWeightG));
    return std::pair{std::move(g), std::move(v)};
  }

  const std::set<std::string>& used() const { return used_; }

 private:
  const SafetensorsFile& file_;
  std::string base_;
  std::set<std::string> used_;
};

}  // namespace

// Follows the official kaiser_sinc_filter1d (dac_alias_free_filter.py, after
// julius.lowpass): Kaiser window whose beta comes from the attenuation
// formula, times the sinc, on the time grid -5.5..5.5, normalised to sum 1.
torch::Tensor AudioDecoder::KaiserSincFilter() {
  constexpr double kCutoff = 0.5 / kRatio;
  constexpr double kHalfWidth = 0.6 / kRatio;
  constexpr int64_t kHalf = AudioDecoder::kFilterTaps / 2;
  const double delta_f = 4 * kHalfWidth;
  const double a = 2.285 * (kHalf - 1) * std::numbers::pi * delta_f + 7.95;
  double beta = 0.0;
  if (a > 50.0) {
    beta = 0.1102 * (a - 8.7);
  } else if (a >= 21.0) {
    beta = 0.5842 * std::pow(a - 21.0, 0.4) + 0.07886 * (a - 21.0);
  }
  const torch::Tensor window = torch::kaiser_window(AudioDecoder::kFilterTaps, /*periodic=*/false,
                                                    beta, torch::TensorOptions(torch::kFloat));
  const torch::Tensor time =
      torch::arange(-kHalf, kHalf, torch::TensorOptions(torch::kLong)).to(torch::kFloat) + 0.5;
  torch::Tensor filter = (2 * kCutoff) * window * torch::sinc(2 * kCutoff * time);
  filter = filter / filter.sum();
  return filter.view({1, 1, AudioDecoder::kFilterTaps}).contiguous();
}

namespace {

class RandomSource final : public TensorSource {
 public:
  RandomSource(uint64_t seed, bool snake_logscale)
      : gen_(at::detail::createCPUGenerator(seed)), snake_logscale_(snake_logscale) {}

  Result<torch::Tensor> Plain(const std::string& /*key*/, const std::vector<int64_t>& shape,
                              Init init) override {
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    switch (init) {
      case Init::kInProj: {
        const int64_t fan_in = shape[1] * shape[2];
        return torch::randn(shape, gen_, f32).mul_(std::sqrt(1.0 / static_cast<double>(fan_in)));
      }
      case Init::kBias:
        return torch::randn(shape, gen_, f32).mul_(0.1);
      case Init::kSnake: {
        torch::Tensor t = torch::randn(shape, gen_, f32).mul_(0.5);
        return snake_logscale_ ? t : t.exp_();
      }
      case Init::kFilter:
        return AudioDecoder::KaiserSincFilter();
      case Init::kWeightG:
        return torch::rand(shape, gen_, f32).mul_(0.8).add_(0.4);
      case Init::kWeightGPost:
        return torch::full(shape, 0.3, f32);
    }
    return Internal("h3 audio decoder: unknown init");
  }

  Result<std::pair<torch::Tensor, torch::Tensor>> WeightNorm(const std::string& prefix,
                                                             const std::vector<int64_t>& v_shape,
                                                             Init g_init) override {
    VAED_ASSIGN_OR_RETURN(torch::Tensor g, Plain(prefix, {v_shape[0], 1, 1}, g_init));
    torch::Tensor v = torch::randn(v_shape, gen_, torch::TensorOptions().dtype(torch::kFloat));
    return std::pair{std::move(g), std::move(v)};
  }

 private:
  at::Generator gen_;
  bool snake_logscale_;
};

// Builds every decoder tensor of `c` from `src`, with weight norms folded.
// May throw c10::Error.
class WeightsBuilder {
 public:
  WeightsBuilder(const AudioDecoderConfig& c, TensorSource& src) : c_(c), src_(src) {}

  Result<std::unique_ptr<H3AudioWeights>> Build() {
    auto w = std::make_unique<H3AudioWeights>();
    const int64_t lc = c_.latent_channels;
    w->latents_mean =
        torch::tensor(c_.latents_mean, torch::TensorOptions(torch::kFloat)).view({1, lc, 1});
    w->latents_std =
        torch::tensor(c_.latents_std, torch::TensorOptions(torch::kFloat)).view({1, lc, 1});
    resident_bytes_ += static_cast<uint64_t>(w->latents_mean.nbytes() + w->latents_std.nbytes());

    VAED_ASSIGN_OR_RETURN(w->in_proj.weight,
                          Param("dec_in_proj.weight", {c_.latent_dim, lc, 1}, Init::kInProj));
    VAED_ASSIGN_OR_RETURN(w->in_proj.bias, Param("dec_in_proj.bias", {c_.latent_dim}, Init::kBias));

    const int64_t c0 = c_.upsample_initial_channel;
    VAED_ASSIGN_OR_RETURN(w->conv_pre, Conv("decoder.conv_pre", {c0, c_.latent_dim, kPrePostKernel},
                                            /*bias_channels=*/c0, Init::kWeightG));
    w->conv_pre.padding = kPrePostPadding;

    for (int64_t s = 0; s < c_.stages(); ++s) {
      H3AudioStage stage;
      const int64_t u = c_.upsample_rates[s];
      const int64_t k = c_.upsample_kernel_sizes[s];
      const int64_t c_in = c0 >> s;
      const int64_t c_out = c_.stage_channels(s);
      // ConvTranspose1d weight is [in, out, k]; weight norm over dim 0 (in).
      VAED_ASSIGN_OR_RETURN(stage.up,
                            Conv("decoder.ups." + std::to_string(s) + ".0", {c_in, c_out, k},
                                 /*bias_channels=*/c_out, Init::kWeightG));
      stage.up.stride = u;
      stage.up.padding = (k - u) / 2;
      w->stages.push_back(std::move(stage));
    }
    // The official ModuleList holds all ups first, then all resblocks.
    const int64_t kernels = static_cast<int64_t>(c_.resblock_kernel_sizes.size());
    for (int64_t s = 0; s < c_.stages(); ++s) {
      for (int64_t j = 0; j < kernels; ++j) {
        const std::string p = "decoder.resblocks." + std::to_string(s * kernels + j);
        VAED_ASSIGN_OR_RETURN(H3AudioAmpBlock block,
                              AmpBlock(p, c_.stage_channels(s), c_.resblock_kernel_sizes[j],
                                       c_.resblock_dilations[j]));
        w->stages[s].blocks.push_back(std::move(block));
      }
    }
    const int64_t c_last = c_.stage_channels(c_.stages() - 1);
    VAED_ASSIGN_OR_RETURN(w->act_post, Snake("decoder.activation_post", c_last));
    VAED_ASSIGN_OR_RETURN(w->conv_post, Conv("decoder.conv_post", {1, c_last, kPrePostKernel},
                                             /*bias_channels=*/0, Init::kWeightGPost));
    w->conv_post.padding = kPrePostPadding;
    return w;
  }

  uint64_t resident_bytes() const { return resident_bytes_; }

 private:
  Result<torch::Tensor> Param(const std::string& key, const std::vector<int64_t>& shape,
                              Init init) {
    VAED_ASSIGN_OR_RETURN(torch::Tensor t, src_.Plain(key, shape, init));
    resident_bytes_ += static_cast<uint64_t>(t.nbytes());
    return t;
  }

  // A weight-normed conv; the weight is torch::_weight_norm(v, g, 0), the op
  // torch.nn.utils.parametrizations.weight_norm (and the legacy hook)
  // evaluates, so the folded weight is bitwise what the official module
  // convolves with.
  // `bias_channels` is the bias length (0: no bias).
  Result<H3AudioConv> Conv(const std::string& prefix, const std::vector<int64_t>& v_shape,
                           int64_t bias_channels, Init g_init) {
    H3AudioConv conv;
    VAED_ASSIGN_OR_RETURN(auto gv, src_.WeightNorm(prefix, v_shape, g_init));
    conv.weight = torch::_weight_norm(gv.second, gv.first, /*dim=*/0);
    resident_bytes_ += static_cast<uint64_t>(conv.weight.nbytes());
    if (bias_channels > 0) {
      VAED_ASSIGN_OR_RETURN(conv.bias, Param(prefix + ".bias", {bias_channels}, Init::kBias));
    }
    return conv;
  }

  Result<H3AudioSnake> Snake(const std::string& prefix, int64_t channels) {
    H3AudioSnake a;
    VAED_ASSIGN_OR_RETURN(torch::Tensor alpha,
                          src_.Plain(prefix + ".act.alpha", {channels}, Init::kSnake));
    VAED_ASSIGN_OR_RETURN(torch::Tensor beta,
                          src_.Plain(prefix + ".act.beta", {channels}, Init::kSnake));
    // SnakeBeta.forward: alpha.unsqueeze(0).unsqueeze(-1), exp() when
    // log-scale; snakebeta(): (beta + 1e-9).reciprocal().
    a.alpha = alpha.unsqueeze(0).unsqueeze(-1);
    torch::Tensor b = beta.unsqueeze(0).unsqueeze(-1);
    if (c_.snake_logscale) {
      a.alpha = torch::exp(a.alpha);
      b = torch::exp(b);
    }
    a.inv_beta = (b + kSnakeEps).reciprocal();
    VAED_ASSIGN_OR_RETURN(a.up_filter, Param(prefix + ".upsample.filter",
                                             {1, 1, AudioDecoder::kFilterTaps}, Init::kFilter));
    for (int64_t k = 0; k < AudioDecoder::kFilterTaps; ++k) {
      a.up_taps[k] = a.up_filter[0][0][k].clone();
    }
    VAED_ASSIGN_OR_RETURN(a.down_filter, Param(prefix + ".downsample.lowpass.filter",
                                               {1, 1, AudioDecoder::kFilterTaps}, Init::kFilter));
    resident_bytes_ += static_cast<uint64_t>(a.alpha.nbytes() + a.inv_beta.nbytes());
    return a;
  }

  Result<H3AudioAmpBlock> AmpBlock(const std::string& prefix, int64_t channels, int64_t kernel,
                                   const std::vector<int64_t>& dilations) {
    H3AudioAmpBlock b;
    for (size_t n = 0; n < dilations.size(); ++n) {
      VAED_ASSIGN_OR_RETURN(H3AudioConv conv, Conv(prefix + ".convs1." + std::to_string(n),
                                                   {channels, channels, kernel},
                                                   /*bias_channels=*/channels, Init::kWeightG));
      conv.dilation = dilations[n];
      conv.padding = (kernel * dilations[n] - dilations[n]) / 2;  // get_padding(k, d)
      b.convs1.push_back(std::move(conv));
    }
    for (size_t n = 0; n < dilations.size(); ++n) {
      VAED_ASSIGN_OR_RETURN(H3AudioConv conv, Conv(prefix + ".convs2." + std::to_string(n),
                                                   {channels, channels, kernel},
                                                   /*bias_channels=*/channels, Init::kWeightG));
      conv.padding = (kernel - 1) / 2;
      b.convs2.push_back(std::move(conv));
    }
    for (size_t m = 0; m < 2 * dilations.size(); ++m) {
      VAED_ASSIGN_OR_RETURN(H3AudioSnake a,
                            Snake(prefix + ".activations." + std::to_string(m), channels));
      b.acts.push_back(std::move(a));
    }
    return b;
  }

  const AudioDecoderConfig& c_;
  TensorSource& src_;
  uint64_t resident_bytes_ = 0;
};

// Builds every tensor; `doing` says what for LibTorch errors.
Result<std::unique_ptr<H3AudioWeights>> BuildWeights(WeightsBuilder& builder,
                                                     const std::string& doing) {
  try {
    torch::NoGradGuard no_grad;
    Result<std::unique_ptr<H3AudioWeights>> built = builder.Build();
    if (!built.ok()) return built.status().WithContext("h3 audio decoder");
    return built;
  } catch (...) {
    return CurrentTorchErrorStatus(doing);
  }
}

bool IsEncoderKey(const std::string& name) {
  for (std::string_view p : kEncoderPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

// ---- forward pass (may throw c10::Error) ----
// Each function follows the official module's op order and operand order;
// see the header's numerics note.

torch::Tensor Conv1d(const torch::Tensor& x, const H3AudioConv& c) {
  return torch::conv1d(x, c.weight, c.bias, /*stride=*/1, c.padding, c.dilation);
}

// UpSample1d's depthwise F.conv_transpose1d(x, filter.expand(C, -1, -1),
// stride=2, groups=C) on the padded input `xp` [B, C, L], giving
// [B, C, 2 (L - 1) + 12], computed tap by tap.
//
// Why not torch::conv_transpose1d: LibTorch 1.13 ran a grouped transposed
// conv on CPU one group at a time (slow_conv_transpose2d per channel: a K=1
// gemm, then col2im), which dominated the decode (18,000 calls per decode
// for the official widths). That path computes each product w[k] * x[i]
// once, rounded to fp32, and col2im adds them into a zeroed output in
// ascending tap order k. The loop below does the same operations in the
// same order (a multiply, then an add into a strided view, no FMA), so the
// result was bitwise identical to that path (the golden vectors' arithmetic);
// on LibTorch 2.11 the golden test checks it within the golden tolerance.
torch::Tensor UpsampleTaps(const torch::Tensor& xp, const H3AudioSnake& a) {
  const int64_t len = xp.size(2);
  const int64_t span = (len - 1) * kRatio + 1;  // last output index touched by one tap, + 1
  torch::Tensor out =
      torch::zeros({xp.size(0), xp.size(1), span - 1 + AudioDecoder::kFilterTaps}, xp.options());
  torch::Tensor product = torch::empty_like(xp);
  for (int64_t k = 0; k < AudioDecoder::kFilterTaps; ++k) {
    torch::mul_out(product, xp, a.up_taps[k]);
    out.slice(/*dim=*/2, k, k + span, kRatio).add_(product);
  }
  return out;
}

// Activation1d(SnakeBeta): UpSample1d -> SnakeBeta -> DownSample1d.
// The in-place steps compute the same elementwise values as the official
// out-of-place x + (beta + eps).reciprocal() * sin(alpha * x).pow(2), with
// fewer large allocations.
torch::Tensor AntiAliasSnake(const torch::Tensor& x, const H3AudioSnake& a) {
  const int64_t channels = x.size(1);
  torch::Tensor up = UpsampleTaps(torch::replication_pad1d(x, {kUpPad, kUpPad}), a).mul_(kRatio);
  up = up.slice(/*dim=*/2, kUpCropLeft, up.size(2) - kUpCropRight);
  torch::Tensor y = (a.alpha * up).sin_().pow_(2).mul_(a.inv_beta).add_(up);
  y = torch::replication_pad1d(y, {kDownPadLeft, kDownPadRight});
  return torch::conv1d(y, a.down_filter.expand({channels, -1, -1}), torch::Tensor(),
                       /*stride=*/kRatio, /*padding=*/at::IntArrayRef(kZero),
                       /*dilation=*/at::IntArrayRef(kOne), /*groups=*/channels);
}

// AMPBlock1.forward.
torch::Tensor AmpBlockForward(torch::Tensor x, const H3AudioAmpBlock& b) {
  for (size_t n = 0; n < b.convs1.size(); ++n) {
    torch::Tensor xt = AntiAliasSnake(x, b.acts[2 * n]);
    xt = Conv1d(xt, b.convs1[n]);
    xt = AntiAliasSnake(xt, b.acts[2 * n + 1]);
    xt = Conv1d(xt, b.convs2[n]);
    x = xt.add_(x);  // xt + x; xt is a fresh tensor
  }
  return x;
}

}  // namespace

AudioDecoder::AudioDecoder(AudioDecoderConfig config, std::unique_ptr<Weights> weights,
                           torch::Device device)
    : config_(std::move(config)), weights_(std::move(weights)), device_(device) {}

AudioDecoder::~AudioDecoder() = default;

Result<std::unique_ptr<AudioDecoder>> AudioDecoder::Load(const AudioDecoderConfig& config,
                                                         const std::string& weights_path,
                                                         torch::Device device) {
  const std::string what = "h3 audio decoder (" + weights_path + ")";
  VAED_RETURN_IF_ERROR(config.Validate("h3 audio decoder config"));
  if (weights_path.empty()) return InvalidArgument("h3 audio decoder: weights_path is empty");

  Result<std::unique_ptr<SafetensorsFile>> opened = SafetensorsFile::Open(weights_path);
  if (!opened.ok()) return opened.status().WithContext("h3 audio decoder");
  const SafetensorsFile& file = **opened;

  FileSource source(file);
  WeightsBuilder builder(config, source);
  VAED_ASSIGN_OR_RETURN(std::unique_ptr<H3AudioWeights> built,
                        BuildWeights(builder, what + ": loading weights"));

  int64_t ignored = 0;
  std::vector<std::string> unexpected;
  for (const std::string& name : file.names()) {
    if (source.used().count(name) != 0) continue;
    if (IsEncoderKey(name)) {
      ++ignored;
    } else {
      unexpected.push_back(name);
    }
  }
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 5; ++i) {
      list += (i ? ", '" : "'") + unexpected[i] + "'";
    }
    if (unexpected.size() > 5) list += ", ...";
    return InvalidArgument(what + ": holds " + std::to_string(unexpected.size()) +
                           " tensors that are not H3 audio decoder (or encoder) tensors for this "
                           "config (" +
                           list + ")");
  }

  Result<std::string> sha = WeightFileSha256(weights_path);
  if (!sha.ok()) return sha.status().WithContext("h3 audio decoder");
  VAED_RETURN_IF_ERROR(MoveTensorsTo(Slots(*built), device, what));

  auto decoder = std::unique_ptr<AudioDecoder>(
      new AudioDecoder(config, std::make_unique<Weights>(Weights{std::move(*built)}), device));
  decoder->weights_path_ = weights_path;
  decoder->weights_sha256_ = *sha;
  decoder->resident_bytes_ = builder.resident_bytes();
  decoder->ignored_encoder_tensors_ = ignored;
  spdlog::info(
      "h3 audio decoder: loaded {} ({} decoder tensors, {} encoder tensors ignored, {} bytes "
      "resident as fp32, sha256 {})",
      weights_path, source.used().size(), ignored, decoder->resident_bytes_,
      decoder->weights_sha256_);
  return decoder;
}

Result<std::unique_ptr<AudioDecoder>> AudioDecoder::CreateRandom(const AudioDecoderConfig& config,
                                                                 uint64_t seed,
                                                                 torch::Device device) {
  VAED_RETURN_IF_ERROR(config.Validate("h3 audio decoder config"));
  RandomSource source(seed, config.snake_logscale);
  WeightsBuilder builder(config, source);
  VAED_ASSIGN_OR_RETURN(
      std::unique_ptr<H3AudioWeights> built,
      BuildWeights(builder, "h3 audio decoder: generating random weights (seed " +
                                std::to_string(seed) + ")"));
  VAED_RETURN_IF_ERROR(MoveTensorsTo(Slots(*built), device, "h3 audio decoder"));
  auto decoder = std::unique_ptr<AudioDecoder>(
      new AudioDecoder(config, std::make_unique<Weights>(Weights{std::move(*built)}), device));
  decoder->resident_bytes_ = builder.resident_bytes();
  spdlog::warn("h3 audio decoder: RANDOM weights (seed {}), not a trained model", seed);
  return decoder;
}

torch::Tensor AudioDecoder::Denormalize(const torch::Tensor& latent) const {
  TORCH_CHECK(latent.dim() == 3 && latent.size(1) == config_.latent_channels,
              "h3 audio latent must be [B, ", config_.latent_channels, ", T], got ",
              latent.sizes());
  TORCH_CHECK(latent.scalar_type() == torch::kFloat, "h3 audio latent must be float32, got ",
              latent.scalar_type());
  return latent * weights_->w.latents_std + weights_->w.latents_mean;
}

torch::Tensor AudioDecoder::Forward(const torch::Tensor& z) const {
  TORCH_CHECK(
      z.dim() == 3 && z.size(0) >= 1 && z.size(1) == config_.latent_channels && z.size(2) >= 1,
      "h3 audio decoder input must be [B >= 1, ", config_.latent_channels, ", T >= 1], got ",
      z.sizes());
  TORCH_CHECK(z.scalar_type() == torch::kFloat, "h3 audio decoder input must be float32, got ",
              z.scalar_type());
  TORCH_CHECK(z.device() == device_, "h3 audio decoder runs on ", device_, ", input is on ",
              z.device());
  torch::NoGradGuard no_grad;
  const H3AudioWeights& w = weights_->w;

  torch::Tensor x = Conv1d(z, w.in_proj);  // DacAudioVAE.decode: dec_in_proj
  x = Conv1d(x, w.conv_pre);
  for (const H3AudioStage& stage : w.stages) {
    x = torch::conv_transpose1d(x, stage.up.weight, stage.up.bias, stage.up.stride,
                                stage.up.padding);
    // BigVGAN.forward: xs = sum of the blocks (in place), then xs / count.
    torch::Tensor xs;
    for (const H3AudioAmpBlock& block : stage.blocks) {
      if (!xs.defined()) {
        xs = AmpBlockForward(x, block);
      } else {
        xs += AmpBlockForward(x, block);
      }
    }
    x = xs / static_cast<int64_t>(stage.blocks.size());
  }
  x = AntiAliasSnake(x, w.act_post);
  x = Conv1d(x, w.conv_post);
  const double c = config_.output_clamp;
  return torch::clamp(x, -c, c);
}

}  // namespace vaed::models::h3
