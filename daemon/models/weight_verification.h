// Weights verified, not only logged: every weight file a
// model entry names is checked against the SHA-256 the operator expects
// before the model is built, and a mismatch refuses the model. A corrupted
// weights file otherwise decodes into plausible-looking garbage that is
// easily mistaken for a tiling bug.
//
// Where an expected digest comes from (either or both; both must match):
//   - the entry's `weights_sha256` / `audio_weights_sha256` keys
//     (ModelConfig), for a single weights file;
//   - a `SHA256SUMS` file in the weight file's directory, in the format
//     `sha256sum` writes ("<64 hex>  <name>" or "<64 hex> *<name>" per line;
//     `sha256sum -c` reads it), that lists the file by its base name. This
//     covers the shards of a *.safetensors.index.json too (and the index).
//
// A model's state: "verified" (every weight file had an expected digest and
// matched), "unverified" (at least one file had none; logged naming it),
// "generated" (no weight files: demo or random weights).
//
// Digests are computed once per process per file version (WeightFileSha256):
// the verification, and each rank's loader that logs the digest, read a
// multi-GB checkpoint once, not once per rank.
//
// Thread-safety: every function may be called from any thread.
#ifndef VAED_DAEMON_MODELS_WEIGHT_VERIFICATION_H_
#define VAED_DAEMON_MODELS_WEIGHT_VERIFICATION_H_

#include <optional>
#include <string>
#include <vector>

#include "daemon/models/model_config.h"
#include "vaed/status.h"

namespace vaed::models {

inline constexpr char kWeightsVerified[] = "verified";
inline constexpr char kWeightsUnverified[] = "unverified";
inline constexpr char kWeightsGenerated[] = "generated";

// One weight file of a model entry.
struct WeightFileCheck {
  std::string key;   // the entry key that names it: "models.entry[0].weights"
  std::string path;  // as configured, or a shard path from the index
  // Where each expected digest came from: "models.entry[0].weights_sha256",
  // "/srv/w/SHA256SUMS". Empty: unverified (and not hashed here).
  std::vector<std::string> sources;
  std::string sha256;  // lowercase hex when hashed, else ""
};

struct WeightsVerification {
  std::string state = kWeightsGenerated;  // kWeights{Verified,Unverified,Generated}
  std::vector<WeightFileCheck> files;
};

// The SHA-256 of the file at `path` (64 lowercase hex digits), computed once
// per process for each (device, inode, size, modification time): a file
// replaced or rewritten since is hashed again. Errors: as vaed::Sha256File
// (kNotFound, kIoError, kInternal), the message starting with the path.
Result<std::string> WeightFileSha256(const std::string& path);

// The digest `sums_path` (a SHA256SUMS file) lists for the base name
// `name` (or "./name"), lowercased; nullopt when the file is absent or does
// not list it. Errors: kIoError for an unreadable file; kInvalidArgument
// for a line that is not "<64 hex digits><space><space or *><name>", or for
// the name listed twice with different digests, naming the file and lines.
Result<std::optional<std::string>> ListedSha256(const std::string& sums_path,
                                                const std::string& name);

// Whether `text` is a SHA-256 as a config key takes it: 64 hex digits
// (either case).
bool IsSha256Hex(const std::string& text);

// Verifies the weight files of entry `index` of the config (before it is
// loaded): each file with an expected digest is hashed and compared.
// Errors: kFailedPrecondition on a mismatch, naming the model, the key, the
// file, the expected digest and its source, and the actual digest; the
// errors of WeightFileSha256 / ListedSha256 / reading the index with the
// key as context.
Result<WeightsVerification> VerifyWeights(const ModelConfig& config, size_t index);

}  // namespace vaed::models

#endif  // VAED_DAEMON_MODELS_WEIGHT_VERIFICATION_H_
