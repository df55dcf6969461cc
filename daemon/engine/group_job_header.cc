#include "daemon/engine/group_job_header.h"

#include <string>

namespace vaed::engine {

namespace {

enum Word : size_t {
  kMagic = 0,
  kVersion = 1,
  kGo = 2,
  kLatentRank = 3,
  kShape0 = 4,  // .. kShape0 + kMaxLatentRank - 1
  kNameBytes = 9,
  kStackTiling = 10,
  kCompile = 11,
  kHasTiling = 12,
  kTileLatent = 13,
  kOverlapLatent = 14,
  kSlowUnitMs = 15,
  kLatentSpace = 16,
};
static_assert(kShape0 + kMaxLatentRank == kNameBytes);
static_assert(kLatentSpace + 1 == kGroupJobHeaderWords);

Status BadWord(Word word, const std::string& rule) {
  return InvalidArgument("group job header word " + std::to_string(static_cast<size_t>(word)) +
                         " " + rule);
}

}  // namespace

GroupJobHeader MakeGroupJobHeader(const std::vector<int64_t>& latent_shape,
                                  int64_t model_name_bytes,
                                  const models::DecodeSettings& settings) {
  GroupJobHeader h;
  h.go = true;
  h.latent_shape = latent_shape;
  h.model_name_bytes = model_name_bytes;
  h.stack_tiling = settings.stack_tiling;
  h.compile = settings.compile;
  h.tiling = settings.tiling;
  h.slow_unit_ms = settings.faults.slow_unit_ms;
  h.latent_space = settings.latent_space;
  return h;
}

models::DecodeSettings MemberSettings(const GroupJobHeader& header) {
  models::DecodeSettings s;
  s.stack_tiling = header.stack_tiling;
  s.compile = header.compile;
  s.tiling = header.tiling;
  s.faults.slow_unit_ms = header.slow_unit_ms;
  s.latent_space = header.latent_space;
  return s;
}

std::array<int64_t, kGroupJobHeaderWords> EncodeGroupJobHeader(const GroupJobHeader& h) {
  std::array<int64_t, kGroupJobHeaderWords> w{};
  w[kMagic] = kGroupJobMagic;
  w[kVersion] = kGroupJobVersion;
  w[kGo] = h.go ? 1 : 0;
  if (!h.go) return w;
  const size_t rank = std::min(h.latent_shape.size(), kMaxLatentRank);
  w[kLatentRank] = static_cast<int64_t>(rank);
  for (size_t d = 0; d < rank; ++d) w[kShape0 + d] = h.latent_shape[d];
  w[kNameBytes] = h.model_name_bytes;
  w[kStackTiling] = static_cast<int64_t>(h.stack_tiling);
  w[kCompile] = static_cast<int64_t>(h.compile);
  w[kHasTiling] = h.tiling.has_value() ? 1 : 0;
  if (h.tiling) {
    w[kTileLatent] = h.tiling->tile_latent;
    w[kOverlapLatent] = h.tiling->overlap_latent;
  }
  w[kSlowUnitMs] = h.slow_unit_ms;
  w[kLatentSpace] = static_cast<int64_t>(h.latent_space);
  return w;
}

Result<GroupJobHeader> DecodeGroupJobHeader(std::span<const int64_t> w) {
  if (w.size() < kGroupJobHeaderWords) {
    return InvalidArgument("group job header has " + std::to_string(w.size()) + " words; version " +
                           std::to_string(kGroupJobVersion) + " has " +
                           std::to_string(kGroupJobHeaderWords));
  }
  if (w[kMagic] != kGroupJobMagic) return BadWord(kMagic, "is not the group job magic");
  if (w[kVersion] != kGroupJobVersion) {
    return InvalidArgument("group job header version " + std::to_string(w[kVersion]) +
                           "; this daemon reads version " + std::to_string(kGroupJobVersion));
  }
  GroupJobHeader h;
  h.go = w[kGo] != 0;
  if (!h.go) return h;
  const int64_t rank = w[kLatentRank];
  if (rank < 1 || rank > static_cast<int64_t>(kMaxLatentRank)) {
    return BadWord(kLatentRank, "(latent rank) is " + std::to_string(rank) + "; must be 1..5");
  }
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t extent = w[kShape0 + static_cast<size_t>(d)];
    if (extent < 0) {
      return BadWord(static_cast<Word>(kShape0 + static_cast<size_t>(d)),
                     "(latent extent) is negative");
    }
    h.latent_shape.push_back(extent);
  }
  h.model_name_bytes = w[kNameBytes];
  if (h.model_name_bytes < 0 || h.model_name_bytes > kMaxModelNameBytes) {
    return BadWord(kNameBytes, "(model name length) is " + std::to_string(h.model_name_bytes) +
                                   "; must be 0.." + std::to_string(kMaxModelNameBytes));
  }
  if (w[kStackTiling] < static_cast<int64_t>(models::StackTiling::kDefault) ||
      w[kStackTiling] > static_cast<int64_t>(models::StackTiling::kAuto)) {
    return BadWord(kStackTiling, "(stack_tiling) is not a StackTiling value");
  }
  h.stack_tiling = static_cast<models::StackTiling>(w[kStackTiling]);
  if (w[kCompile] < static_cast<int64_t>(models::CompileMode::kOff) ||
      w[kCompile] > static_cast<int64_t>(models::CompileMode::kOn)) {
    return BadWord(kCompile, "(compile) is not a CompileMode value");
  }
  h.compile = static_cast<models::CompileMode>(w[kCompile]);
  if (w[kHasTiling] != 0) {
    h.tiling =
        models::TilingOverride{.tile_latent = w[kTileLatent], .overlap_latent = w[kOverlapLatent]};
  }
  h.slow_unit_ms = static_cast<int>(w[kSlowUnitMs]);
  if (w[kLatentSpace] < static_cast<int64_t>(models::LatentSpace::kNormalized) ||
      w[kLatentSpace] > static_cast<int64_t>(models::LatentSpace::kDenormalized)) {
    return BadWord(kLatentSpace, "(latent_space) is not a LatentSpace value");
  }
  h.latent_space = static_cast<models::LatentSpace>(w[kLatentSpace]);
  return h;
}

}  // namespace vaed::engine
