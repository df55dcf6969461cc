#include "daemon/models/h3/audio_config.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/models/h3/config_source.h"
#include "daemon/models/read_file.h"

namespace vaed::models::h3 {
namespace {

using Json = nlohmann::json;

// FL2VA/audio_vae/config.json of MiniMax-H3 at 8d8824e (also the diffusers
// audio_vae/config.json), in the double precision the file stores; the
// pipeline rounds them to fp32 tensors.
constexpr double kOfficialLatentsMean[32] = {
    -0.020211687488382354, 0.3876466479950502,   -0.04398279799186767, -0.28591514936373,
    0.08179686214561671,   -0.35782641352446604, 0.040623809960919084, -0.01552534501956604,
    -0.223362481667332,    0.1821006842509091,   0.2941778783780663,   -0.07901167601970885,
    -0.056815072777201,    -0.3699028221860095,  -0.31616315591624855, 0.5905951377425391,
    -0.052139568068853864, 0.013673160263486295, -0.03691647864630577, 0.09732660653298163,
    -0.3394662328788498,   -0.30685677538541667, -0.24504598907458763, -0.034698524462007344,
    0.02868032184767538,   -0.21217779266454084, -0.1678263169941987,  0.3221287889040614,
    -0.1223055851554907,   0.4356604928128464,   -0.0502599202236253,  0.3979258376211797,
};
constexpr double kOfficialLatentsStd[32] = {
    1.6895524230479284, 2.76263727217653,   1.7945344281264435, 1.6801681847309828,
    1.6390226546605453, 2.7788298348882177, 1.7659090095747236, 1.6199757612137327,
    2.6336525640336896, 1.8539356672817833, 2.5056497896915633, 1.811019237886178,
    1.9579657790720237, 1.6685498243529284, 1.4922469314453364, 3.298670198067373,
    1.9491804496832168, 1.8720003270431442, 1.8334080103291832, 1.6488070416529093,
    1.6176957696319716, 1.9131449234774398, 1.5695245398428617, 1.6943659940415912,
    1.8318420762504692, 1.5540637421583379, 1.9344930328968526, 1.599198216109855,
    1.718045989838149,  1.6307219190837705, 1.8661226051202384, 1.5613768203168363,
};

// Upper bound on hop_samples(), so that sample counts stay far from int64
// overflow for any latent length the daemon accepts.
constexpr int64_t kMaxHopSamples = int64_t{1} << 24;
// Bound on the number of stages (channel halvings) Validate() accepts.
constexpr size_t kMaxStages = 24;

std::string Indexed(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

std::string ListToString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Status ValidateWithNames(const AudioDecoderConfig& c, std::string_view source,
                         const FieldNames& n) {
  auto bad = [&](const std::string& field, const std::string& rule) {
    return InvalidArgument(std::string(source) + ": field '" + field + "' " + rule);
  };
  auto at_least_1 = [&](const std::string& field, int64_t v) -> Status {
    if (v < 1) return bad(field, "is " + std::to_string(v) + "; must be >= 1");
    return Status::Ok();
  };
  VAED_RETURN_IF_ERROR(at_least_1(n("sample_rate"), c.sample_rate));
  VAED_RETURN_IF_ERROR(at_least_1(n("latent_channels"), c.latent_channels));
  VAED_RETURN_IF_ERROR(at_least_1(n("latent_dim"), c.latent_dim));

  if (c.upsample_rates.empty() || c.upsample_rates.size() > kMaxStages) {
    return bad(n("upsample_rates"), "has " + std::to_string(c.upsample_rates.size()) +
                                     " entries; must have 1 to " + std::to_string(kMaxStages));
  }
  if (c.upsample_kernel_sizes.size() != c.upsample_rates.size()) {
    return bad(n("upsample_kernel_sizes"), "has " + std::to_string(c.upsample_kernel_sizes.size()) +
                                            " entries; must have " +
                                            std::to_string(c.upsample_rates.size()) +
                                            " (one per entry of " + n("upsample_rates") + ")");
  }
  int64_t hop = 1;
  for (size_t i = 0; i < c.upsample_rates.size(); ++i) {
    const int64_t u = c.upsample_rates[i];
    const int64_t k = c.upsample_kernel_sizes[i];
    if (u < 1 || u > kMaxHopSamples) {
      return bad(Indexed(n("upsample_rates"), i), "is " + std::to_string(u) + "; must be in [1, " +
                                                   std::to_string(kMaxHopSamples) + "]");
    }
    if (k < u || (k - u) % 2 != 0 || k > kMaxHopSamples) {
      return bad(Indexed(n("upsample_kernel_sizes"), i),
                 "is " + std::to_string(k) + "; must be >= the rate " + std::to_string(u) +
                     " and differ from it by an even number (padding (k - rate) / 2 must "
                     "give exact x" +
                     std::to_string(u) + " upsampling)");
    }
    hop *= u;
    if (hop > kMaxHopSamples) {
      return bad(n("upsample_rates"), ListToString(c.upsample_rates) + " multiplies to more than " +
                                       std::to_string(kMaxHopSamples) + " samples per frame");
    }
  }
  const int64_t stages = static_cast<int64_t>(c.upsample_rates.size());
  const int64_t divisor = int64_t{1} << stages;
  if (c.upsample_initial_channel < divisor || c.upsample_initial_channel % divisor != 0) {
    return bad(n("upsample_initial_channel"),
               "is " + std::to_string(c.upsample_initial_channel) +
                   "; must be a positive multiple of 2^" + std::to_string(stages) + " = " +
                   std::to_string(divisor) + " (the channels halve at every stage)");
  }

  if (c.resblock_kernel_sizes.empty()) return bad(n("resblock_kernel_sizes"), "is empty");
  if (c.resblock_dilations.size() != c.resblock_kernel_sizes.size()) {
    return bad(n("resblock_dilations"), "has " + std::to_string(c.resblock_dilations.size()) +
                                         " entries; must have " +
                                         std::to_string(c.resblock_kernel_sizes.size()) +
                                         " (one per entry of " + n("resblock_kernel_sizes") + ")");
  }
  for (size_t i = 0; i < c.resblock_kernel_sizes.size(); ++i) {
    const int64_t k = c.resblock_kernel_sizes[i];
    if (k < 1 || k % 2 == 0 || k > 1023) {
      return bad(Indexed(n("resblock_kernel_sizes"), i),
                 "is " + std::to_string(k) + "; must be odd and in [1, 1023]");
    }
    const std::vector<int64_t>& dil = c.resblock_dilations[i];
    if (dil.empty()) return bad(Indexed(n("resblock_dilations"), i), "is empty");
    for (size_t j = 0; j < dil.size(); ++j) {
      if (dil[j] < 1 || dil[j] > 1024) {
        return bad(Indexed(Indexed(n("resblock_dilations"), i), j),
                   "is " + std::to_string(dil[j]) + "; must be in [1, 1024]");
      }
    }
  }

  const size_t channels = static_cast<size_t>(c.latent_channels);
  for (const auto& [field, values, is_std] : {std::tuple{n("latents_mean"), &c.latents_mean, false},
                                              std::tuple{n("latents_std"), &c.latents_std, true}}) {
    if (values->size() != channels) {
      return bad(field, "has " + std::to_string(values->size()) + " values; must have " +
                            std::to_string(channels) + " (one per latent channel)");
    }
    for (size_t i = 0; i < channels; ++i) {
      const float v = (*values)[i];
      if (!std::isfinite(v) || (is_std && !(v > 0.0f))) {
        return bad(Indexed(field, i), "is " + std::to_string(v) + "; must be finite" +
                                          std::string(is_std ? " and > 0" : ""));
      }
    }
  }
  if (!std::isfinite(c.output_clamp) || !(c.output_clamp > 0.0f)) {
    return bad(n("output_clamp"), "is " + std::to_string(c.output_clamp) + "; must be finite and > 0");
  }
  return Status::Ok();
}

// Typed access to JSON members; every error names the file and the field
// path ("bigvgan_h.upsample_rates[2]").
class JsonFields {
 public:
  explicit JsonFields(std::string source) : source_(std::move(source)) {}

  Status Bad(const std::string& field, const std::string& rule) const {
    return InvalidArgument(source_ + ": field '" + field + "' " + rule);
  }

  // The member `key` of object `obj`, whose own path is `prefix` ("" for
  // the document root).
  Result<const Json*> Member(const Json& obj, const std::string& prefix,
                             const std::string& key) const {
    const std::string field = Path(prefix, key);
    if (!obj.is_object())
      return Bad(prefix, "is " + std::string(obj.type_name()) + "; expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) return Bad(field, "is missing");
    return &*it;
  }

  bool Has(const Json& obj, const std::string& key) const {
    return obj.is_object() && obj.contains(key);
  }

  Result<int64_t> Int(const Json& v, const std::string& field) const {
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX)) {
      return v.get<int64_t>();
    }
    return Bad(field, "is " + v.dump() + "; expected an integer");
  }
  Result<int64_t> IntMember(const Json& obj, const std::string& prefix,
                            const std::string& key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Member(obj, prefix, key));
    return Int(*v, Path(prefix, key));
  }

  Result<std::vector<int64_t>> IntList(const Json& v, const std::string& field) const {
    if (!v.is_array()) return Bad(field, "is " + v.dump() + "; expected a list of integers");
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      VAED_ASSIGN_OR_RETURN(int64_t x, Int(v[i], Indexed(field, i)));
      out.push_back(x);
    }
    return out;
  }
  Result<std::vector<int64_t>> IntListMember(const Json& obj, const std::string& prefix,
                                             const std::string& key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Member(obj, prefix, key));
    return IntList(*v, Path(prefix, key));
  }

  Result<std::vector<std::vector<int64_t>>> IntListListMember(const Json& obj,
                                                              const std::string& prefix,
                                                              const std::string& key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Member(obj, prefix, key));
    const std::string field = Path(prefix, key);
    if (!v->is_array()) return Bad(field, "is " + v->dump() + "; expected a list of lists");
    std::vector<std::vector<int64_t>> out;
    for (size_t i = 0; i < v->size(); ++i) {
      VAED_ASSIGN_OR_RETURN(std::vector<int64_t> x, IntList((*v)[i], Indexed(field, i)));
      out.push_back(std::move(x));
    }
    return out;
  }

  // A list of numbers rounded to float32 (round to nearest, as torch.tensor
  // does when it builds an fp32 tensor from Python floats).
  Result<std::vector<float>> FloatListMember(const Json& obj, const std::string& prefix,
                                             const std::string& key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Member(obj, prefix, key));
    const std::string field = Path(prefix, key);
    if (!v->is_array()) return Bad(field, "is " + v->dump() + "; expected a list of numbers");
    std::vector<float> out;
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& x = (*v)[i];
      if (!x.is_number()) {
        return Bad(Indexed(field, i), "is " + x.dump() + "; expected a number");
      }
      out.push_back(static_cast<float>(x.get<double>()));
    }
    return out;
  }

  Result<bool> BoolMember(const Json& obj, const std::string& prefix,
                          const std::string& key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Member(obj, prefix, key));
    if (!v->is_boolean())
      return Bad(Path(prefix, key), "is " + v->dump() + "; expected true or false");
    return v->get<bool>();
  }

  Result<std::string> StringMember(const Json& obj, const std::string& prefix,
                                   const std::string& key) const {
    VAED_ASSIGN_OR_RETURN(const Json* v, Member(obj, prefix, key));
    if (!v->is_string()) return Bad(Path(prefix, key), "is " + v->dump() + "; expected a string");
    return v->get<std::string>();
  }

  // Requires the string member `key` to equal `expected` (the only value
  // this decoder implements).
  Status ExpectString(const Json& obj, const std::string& prefix, const std::string& key,
                      const std::string& expected) const {
    VAED_ASSIGN_OR_RETURN(std::string v, StringMember(obj, prefix, key));
    if (v != expected) {
      return Bad(Path(prefix, key), "is \"" + v + "\"; only \"" + expected + "\" is supported");
    }
    return Status::Ok();
  }
  Status ExpectBool(const Json& obj, const std::string& prefix, const std::string& key,
                    bool expected) const {
    VAED_ASSIGN_OR_RETURN(bool v, BoolMember(obj, prefix, key));
    if (v != expected) {
      return Bad(Path(prefix, key), std::string("is ") + (v ? "true" : "false") + "; only " +
                                        (expected ? "true" : "false") + " is supported");
    }
    return Status::Ok();
  }

  static std::string Path(const std::string& prefix, const std::string& key) {
    return prefix.empty() ? key : prefix + "." + key;
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

// The object member whose key is `name` or starts with "<name> (" (the
// golden config annotates its keys, e.g. "bigvgan_h (built by ...)").
const Json* FindAnnotated(const Json& root, const std::string& name, std::string* key_out) {
  if (!root.is_object()) return nullptr;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == name || it.key().rfind(name + " (", 0) == 0) {
      *key_out = it.key();
      return &it.value();
    }
  }
  return nullptr;
}

// BigVGAN tables DacAudioVAE builds for a sample rate
// (dac_audio_vae.py:175-200): rates, kernels; resblocks are 3/7/11 x 1,3,5.
bool OfficialTables(int64_t sample_rate, AudioDecoderConfig* c) {
  if (sample_rate == 32000) {
    c->upsample_rates = {5, 5, 2, 2, 2, 2, 2};
    c->upsample_kernel_sizes = {9, 9, 4, 4, 4, 4, 4};
  } else if (sample_rate == 16000) {
    c->upsample_rates = {5, 5, 2, 2, 2, 2};
    c->upsample_kernel_sizes = {9, 9, 4, 4, 4, 4};
  } else {
    return false;
  }
  c->resblock_kernel_sizes = {3, 7, 11};
  c->resblock_dilations = {{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
  c->snake_logscale = true;
  c->output_clamp = 1.0f;
  return true;
}

// Golden test config (shared/golden/h3/audio_tiny_config.json).
Result<AudioDecoderConfig> FromGolden(const JsonFields& f, const Json& root, const Json& h) {
  const std::string hp = "bigvgan_h";
  std::string cc_key;
  const Json* cc = FindAnnotated(root, "component_config", &cc_key);
  if (cc == nullptr) return f.Bad("component_config", "is missing");
  const std::string cp = "component_config";

  AudioDecoderConfig c;
  VAED_RETURN_IF_ERROR(f.ExpectString(h, hp, "resblock", "1"));
  VAED_RETURN_IF_ERROR(f.ExpectString(h, hp, "activation", "snakebeta"));
  VAED_RETURN_IF_ERROR(f.ExpectBool(h, hp, "use_tanh_at_final", false));
  VAED_RETURN_IF_ERROR(f.ExpectBool(h, hp, "use_bias_at_final", false));
  VAED_ASSIGN_OR_RETURN(c.latent_dim, f.IntMember(h, hp, "num_mels"));
  VAED_ASSIGN_OR_RETURN(c.upsample_initial_channel, f.IntMember(h, hp, "upsample_initial_channel"));
  VAED_ASSIGN_OR_RETURN(c.upsample_rates, f.IntListMember(h, hp, "upsample_rates"));
  VAED_ASSIGN_OR_RETURN(c.upsample_kernel_sizes, f.IntListMember(h, hp, "upsample_kernel_sizes"));
  VAED_ASSIGN_OR_RETURN(c.resblock_kernel_sizes, f.IntListMember(h, hp, "resblock_kernel_sizes"));
  VAED_ASSIGN_OR_RETURN(c.resblock_dilations,
                        f.IntListListMember(h, hp, "resblock_dilation_sizes"));
  VAED_ASSIGN_OR_RETURN(c.snake_logscale, f.BoolMember(h, hp, "snake_logscale"));
  VAED_ASSIGN_OR_RETURN(c.sample_rate, f.IntMember(*cc, cp, "sample_rate"));
  VAED_ASSIGN_OR_RETURN(c.latent_channels, f.IntMember(*cc, cp, "latent_channels"));
  VAED_ASSIGN_OR_RETURN(c.latents_mean, f.FloatListMember(*cc, cp, "latents_mean"));
  VAED_ASSIGN_OR_RETURN(c.latents_std, f.FloatListMember(*cc, cp, "latents_std"));
  c.output_clamp = 1.0f;

  FieldNames n;
  n.Rename("sample_rate", cp + ".sample_rate");
  n.Rename("latent_channels", cp + ".latent_channels");
  n.Rename("latent_dim", hp + ".num_mels");
  n.Rename("upsample_initial_channel", hp + ".upsample_initial_channel");
  n.Rename("upsample_rates", hp + ".upsample_rates");
  n.Rename("upsample_kernel_sizes", hp + ".upsample_kernel_sizes");
  n.Rename("resblock_kernel_sizes", hp + ".resblock_kernel_sizes");
  n.Rename("resblock_dilations", hp + ".resblock_dilation_sizes");
  n.Rename("latents_mean", cp + ".latents_mean");
  n.Rename("latents_std", cp + ".latents_std");
  VAED_RETURN_IF_ERROR(ValidateWithNames(c, f.source(), n));
  return c;
}

// diffusers config (audio_vae/config.json, AutoencoderKLMiniMaxH3Audio).
Result<AudioDecoderConfig> FromDiffusers(const JsonFields& f, const Json& root) {
  AudioDecoderConfig c;
  VAED_ASSIGN_OR_RETURN(c.sample_rate, f.IntMember(root, "", "sampling_rate"));
  VAED_ASSIGN_OR_RETURN(c.latent_channels, f.IntMember(root, "", "latent_channels"));
  VAED_ASSIGN_OR_RETURN(c.latent_dim, f.IntMember(root, "", "latent_dim"));
  VAED_ASSIGN_OR_RETURN(c.upsample_initial_channel, f.IntMember(root, "", "decoder_dim"));
  VAED_ASSIGN_OR_RETURN(c.upsample_rates, f.IntListMember(root, "", "decoder_rates"));
  VAED_ASSIGN_OR_RETURN(c.upsample_kernel_sizes, f.IntListMember(root, "", "decoder_kernel_sizes"));
  VAED_ASSIGN_OR_RETURN(c.resblock_kernel_sizes,
                        f.IntListMember(root, "", "resblock_kernel_sizes"));
  VAED_ASSIGN_OR_RETURN(c.resblock_dilations,
                        f.IntListListMember(root, "", "resblock_dilation_sizes"));
  VAED_ASSIGN_OR_RETURN(c.latents_mean, f.FloatListMember(root, "", "latents_mean"));
  VAED_ASSIGN_OR_RETURN(c.latents_std, f.FloatListMember(root, "", "latents_std"));
  c.snake_logscale = true;  // fixed in the diffusers port, as in the original
  c.output_clamp = 1.0f;

  FieldNames n;
  n.Rename("sample_rate", "sampling_rate");
  n.Rename("upsample_initial_channel", "decoder_dim");
  n.Rename("upsample_rates", "decoder_rates");
  n.Rename("upsample_kernel_sizes", "decoder_kernel_sizes");
  n.Rename("resblock_dilations", "resblock_dilation_sizes");
  VAED_RETURN_IF_ERROR(ValidateWithNames(c, f.source(), n));
  return c;
}

// Official component config (FL2VA/audio_vae/config.json) plus the
// metadata.json it names; mirrors what MiniMaxH3AudioVAE.from_pretrained
// passes to DacAudioVAE (minimax_h3_audio_vae.py).
Result<AudioDecoderConfig> FromComponent(const JsonFields& f, const Json& root,
                                         const std::string& path) {
  AudioDecoderConfig c;
  VAED_ASSIGN_OR_RETURN(c.latent_channels, f.IntMember(root, "", "latent_channels"));
  VAED_ASSIGN_OR_RETURN(c.latents_mean, f.FloatListMember(root, "", "latents_mean"));
  VAED_ASSIGN_OR_RETURN(c.latents_std, f.FloatListMember(root, "", "latents_std"));
  VAED_ASSIGN_OR_RETURN(const int64_t component_rate, f.IntMember(root, "", "sample_rate"));
  VAED_ASSIGN_OR_RETURN(std::string meta_rel, f.StringMember(root, "", "source_metadata_path"));

  const std::string meta_path =
      (std::filesystem::path(path).parent_path() / meta_rel).lexically_normal().string();
  Result<std::string> meta_text = ReadFileToString(meta_path);
  if (!meta_text.ok()) {
    return meta_text.status().WithContext(path + ": reading source_metadata_path");
  }
  VAED_ASSIGN_OR_RETURN(Json meta, ParseJson(*meta_text, meta_path));
  const JsonFields m(meta_path);
  VAED_ASSIGN_OR_RETURN(const Json* md, m.Member(meta, "", "metadata"));
  VAED_ASSIGN_OR_RETURN(const Json* kw, m.Member(*md, "metadata", "kwargs"));
  const std::string kp = "metadata.kwargs";

  VAED_ASSIGN_OR_RETURN(c.sample_rate, m.IntMember(*kw, kp, "sample_rate"));
  if (c.sample_rate != component_rate) {
    return m.Bad(kp + ".sample_rate", "is " + std::to_string(c.sample_rate) + " but " + path +
                                          " says sample_rate " + std::to_string(component_rate));
  }
  if (!OfficialTables(c.sample_rate, &c)) {
    return m.Bad(kp + ".sample_rate", "is " + std::to_string(c.sample_rate) +
                                          "; DacAudioVAE defines BigVGAN only for 32000 and "
                                          "16000");
  }
  if (m.Has(*kw, "decoder_type")) {
    VAED_RETURN_IF_ERROR(m.ExpectString(*kw, kp, "decoder_type", "bigvgan"));
  }
  if (m.Has(*kw, "decoder_rates")) {
    VAED_ASSIGN_OR_RETURN(std::vector<int64_t> rates, m.IntListMember(*kw, kp, "decoder_rates"));
    if (rates != c.upsample_rates) {
      return m.Bad(kp + ".decoder_rates", "is " + ListToString(rates) + "; the BigVGAN table for " +
                                              std::to_string(c.sample_rate) + " Hz is " +
                                              ListToString(c.upsample_rates));
    }
  }
  if (m.Has(*kw, "vae_latent_channels")) {
    VAED_ASSIGN_OR_RETURN(int64_t ch, m.IntMember(*kw, kp, "vae_latent_channels"));
    if (ch != c.latent_channels) {
      return m.Bad(kp + ".vae_latent_channels", "is " + std::to_string(ch) + " but " + path +
                                                    " says latent_channels " +
                                                    std::to_string(c.latent_channels));
    }
  }
  VAED_ASSIGN_OR_RETURN(c.upsample_initial_channel, m.IntMember(*kw, kp, "decoder_dim"));
  // from_pretrained does not pass encoder_dim or latent_dim, so DacAudioVAE
  // uses latent_dim = 64 * 2^len(encoder_rates) (dac_audio_vae.py:146-147).
  VAED_ASSIGN_OR_RETURN(std::vector<int64_t> encoder_rates,
                        m.IntListMember(*kw, kp, "encoder_rates"));
  if (encoder_rates.size() > 16) {
    return m.Bad(kp + ".encoder_rates",
                 "has " + std::to_string(encoder_rates.size()) + " entries; expected at most 16");
  }
  c.latent_dim = int64_t{64} << encoder_rates.size();
  if (m.Has(*kw, "latent_dim")) {
    VAED_ASSIGN_OR_RETURN(int64_t stated, m.IntMember(*kw, kp, "latent_dim"));
    if (stated != c.latent_dim) {
      return m.Bad(kp + ".latent_dim",
                   "is " + std::to_string(stated) + " but the official loader builds " +
                       std::to_string(c.latent_dim) + " (64 * 2^len(encoder_rates))");
    }
  }

  FieldNames n;
  n.Rename("upsample_initial_channel", kp + ".decoder_dim");
  n.Rename("latent_dim", kp + ".encoder_rates");
  VAED_RETURN_IF_ERROR(ValidateWithNames(c, path + " (with " + meta_path + ")", n));
  return c;
}

}  // namespace

AudioDecoderConfig AudioDecoderConfig::Official() {
  AudioDecoderConfig c;
  for (double v : kOfficialLatentsMean) c.latents_mean.push_back(static_cast<float>(v));
  for (double v : kOfficialLatentsStd) c.latents_std.push_back(static_cast<float>(v));
  return c;
}

int64_t AudioDecoderConfig::hop_samples() const {
  int64_t hop = 1;
  for (int64_t u : upsample_rates) hop *= u;
  return hop;
}

Status AudioDecoderConfig::Validate(std::string_view source) const {
  return ValidateWithNames(*this, source, FieldNames());
}

Result<AudioDecoderConfig> AudioDecoderConfig::LoadJsonFile(const std::string& path) {
  VAED_ASSIGN_OR_RETURN(Json root, ReadJsonFile(path));
  const JsonFields f(path);
  if (!root.is_object()) {
    return InvalidArgument(path + ": top level is " + std::string(root.type_name()) +
                           "; expected a JSON object");
  }
  std::string h_key;
  if (const Json* h = FindAnnotated(root, "bigvgan_h", &h_key); h != nullptr) {
    return FromGolden(f, root, *h);
  }
  const std::string class_name = root.contains("_class_name") && root["_class_name"].is_string()
                                     ? root["_class_name"].get<std::string>()
                                     : std::string();
  if (class_name == "AutoencoderKLMiniMaxH3Audio") return FromDiffusers(f, root);
  if (class_name == "MiniMaxH3AudioVAE") return FromComponent(f, root, path);
  return InvalidArgument(
      path +
      ": not a recognised H3 audio VAE config: expected a \"bigvgan_h\" object (golden "
      "test config) or _class_name \"AutoencoderKLMiniMaxH3Audio\" (diffusers) or "
      "\"MiniMaxH3AudioVAE\" (official FL2VA component), found _class_name \"" +
      class_name + "\"");
}

}  // namespace vaed::models::h3
