// The description of a job on a VAE group, as the output rank broadcasts it
// to the group's other ranks (group_job.h): the one encoding in which group
// jobs travel, between the ranks of one daemon and between daemons.
//
// Layout (version 1): kGroupJobHeaderWords little-endian int64 words, host
// order on the wire (Gloo/NCCL copy the bytes; every daemon of a group runs
// on the same architecture):
//   [0] magic kGroupJobMagic, [1] version, [2] go (0 = stand down),
//   [3] latent rank (1..5), [4..8] latent shape (unused dims 0),
//   [9] model name length in bytes (the name follows in its own broadcast),
//   [10] StackTiling, [11] CompileMode, [12] tiling override present,
//   [13] tile_latent, [14] overlap_latent (latent cells), [15] slow_unit_ms,
//   [16] LatentSpace (version 2).
// Only the settings a member decodes with travel: injected faults fire on
// the output rank only, except slowness, which every rank takes.
//
// Versioning: a new field takes a new word and a new version; a member that
// receives a header it cannot read (other magic, other version) stands down
// with an error naming both versions, and the output rank falls back.
//
// Thread-safety: pure functions.
#ifndef VAED_DAEMON_ENGINE_GROUP_JOB_HEADER_H_
#define VAED_DAEMON_ENGINE_GROUP_JOB_HEADER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "daemon/models/vae_model.h"
#include "vaed/status.h"

namespace vaed::engine {

inline constexpr int64_t kGroupJobMagic = 0x7661656447524a42;  // "vaedGRJB"
inline constexpr int64_t kGroupJobVersion = 2;
inline constexpr size_t kGroupJobHeaderWords = 17;
inline constexpr size_t kMaxLatentRank = 5;
inline constexpr int64_t kMaxModelNameBytes = 4096;

struct GroupJobHeader {
  bool go = false;                    // false: the job will not run; members stand down
  std::vector<int64_t> latent_shape;  // float32 latent, rank 1..kMaxLatentRank
  int64_t model_name_bytes = 0;       // 0..kMaxModelNameBytes
  models::StackTiling stack_tiling = models::StackTiling::kDefault;
  models::CompileMode compile = models::CompileMode::kOff;
  std::optional<models::TilingOverride> tiling;
  int slow_unit_ms = 0;
  models::LatentSpace latent_space = models::LatentSpace::kNormalized;
};

// The header of a job that runs: `latent_shape`, the model name's length
// and the member-relevant settings of `settings`.
GroupJobHeader MakeGroupJobHeader(const std::vector<int64_t>& latent_shape,
                                  int64_t model_name_bytes, const models::DecodeSettings& settings);

// The settings a member decodes with (cancellation, progress and the group
// are the member's own).
models::DecodeSettings MemberSettings(const GroupJobHeader& header);

std::array<int64_t, kGroupJobHeaderWords> EncodeGroupJobHeader(const GroupJobHeader& header);

// Errors (kInvalidArgument, naming the word): a short buffer, another magic
// or version ("group job header version 2; this daemon reads version 1"),
// a latent rank outside 1..5 or a negative extent, a name length outside
// 0..kMaxModelNameBytes, an unknown StackTiling / CompileMode / LatentSpace
// value.
Result<GroupJobHeader> DecodeGroupJobHeader(std::span<const int64_t> words);

}  // namespace vaed::engine

#endif  // VAED_DAEMON_ENGINE_GROUP_JOB_HEADER_H_
