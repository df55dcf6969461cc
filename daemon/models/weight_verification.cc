#include "daemon/models/weight_verification.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <map>
#include <spdlog/spdlog.h>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

#include "daemon/models/h3/video_config.h"
#include "daemon/models/read_file.h"
#include "daemon/models/sha256.h"
#include "vaed/mutex.h"

namespace vaed::models {

namespace {

constexpr char kSumsFileName[] = "SHA256SUMS";

// (device, inode, size, mtime seconds, mtime nanoseconds) of a file version.
using FileVersion = std::tuple<dev_t, ino_t, off_t, time_t, long>;

class DigestCache {
 public:
  Result<std::string> Get(const std::string& path) VAED_EXCLUDES(mu_) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, path);
    const FileVersion version{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec,
                              st.st_mtim.tv_nsec};
    MutexLock lock(&mu_);  // held while hashing: a second rank waits, then hits
    auto it = digests_.find(version);
    if (it != digests_.end()) return it->second;
    Result<std::string> digest = Sha256File(path);
    if (digest.ok()) digests_.emplace(version, *digest);
    return digest;
  }

 private:
  Mutex mu_;
  std::map<FileVersion, std::string> digests_ VAED_GUARDED_BY(mu_);
};

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The files behind one weights key: the file itself, and for a sharded
// checkpoint's index also every shard it maps tensors to.
Result<std::vector<std::string>> FilesOf(const std::string& path) {
  std::vector<std::string> files{path};
  if (!h3::IsShardedIndex(path)) return files;
  VAED_ASSIGN_OR_RETURN(h3::SafetensorsIndex index, h3::ReadSafetensorsIndex(path));
  files.insert(files.end(), index.shard_paths.begin(), index.shard_paths.end());
  return files;
}

// Expected digests of `file`: the key's (when given), then its directory's
// SHA256SUMS entry. (source, lowercase digest) pairs.
Result<std::vector<std::pair<std::string, std::string>>> ExpectedDigests(
    const std::string& file, const std::string& key_name, const std::string& key_value) {
  std::vector<std::pair<std::string, std::string>> expected;
  if (!key_value.empty()) expected.emplace_back(key_name, Lower(key_value));
  const std::filesystem::path p(file);
  const std::string sums = (p.parent_path() / kSumsFileName).string();
  VAED_ASSIGN_OR_RETURN(std::optional<std::string> listed,
                        ListedSha256(sums, p.filename().string()));
  if (listed) expected.emplace_back(sums, *listed);
  return expected;
}

// Checks one file against what is expected of it; fills `check`.
Status CheckFile(const std::string& model, const std::string& key_name,
                 const std::string& key_value, WeightFileCheck* check) {
  VAED_ASSIGN_OR_RETURN(auto expected, ExpectedDigests(check->path, key_name, key_value));
  if (expected.empty()) return Status::Ok();
  VAED_ASSIGN_OR_RETURN(check->sha256, WeightFileSha256(check->path));
  for (const auto& [source, digest] : expected) {
    if (digest != check->sha256) {
      return FailedPrecondition("model '" + model + "': " + check->key + " file " + check->path +
                                " has SHA-256 " + check->sha256 + ", but " + source +
                                " expects " + digest +
                                "; refusing to load it (a corrupted or different weights file)");
    }
    check->sources.push_back(source);
  }
  return Status::Ok();
}

// Checks every file behind one weights key of entry `prefix`.
Status CheckKey(const ModelConfig& config, const std::string& prefix, const std::string& key,
                const std::string& path, const std::string& expected,
                WeightsVerification* out) {
  if (path.empty()) return Status::Ok();
  const std::string key_name = prefix + key;
  Result<std::vector<std::string>> files = FilesOf(path);
  if (!files.ok()) return files.status().WithContext(key_name);
  for (size_t i = 0; i < files->size(); ++i) {
    WeightFileCheck check{key_name, (*files)[i], {}, ""};
    // A key's digest is the configured file's, never a shard's.
    Status s = CheckFile(config.name, key_name + "_sha256", i == 0 ? expected : "", &check);
    if (!s.ok()) return s.code() == StatusCode::kFailedPrecondition ? s : s.WithContext(key_name);
    out->files.push_back(std::move(check));
  }
  return Status::Ok();
}

void LogVerification(const std::string& model, const WeightsVerification& v) {
  for (const WeightFileCheck& f : v.files) {
    if (f.sources.empty()) {
      spdlog::warn("model '{}': {} file {} is unverified: no {}_sha256 key, and no {} in its "
                   "directory lists it",
                   model, f.key, f.path, f.key, kSumsFileName);
    } else {
      std::string sources;
      for (const std::string& s : f.sources) sources += (sources.empty() ? "" : ", ") + s;
      spdlog::info("model '{}': {} file {} verified (sha256 {}, expected by {})", model, f.key,
                   f.path, f.sha256, sources);
    }
  }
}

}  // namespace

Result<std::string> WeightFileSha256(const std::string& path) {
  static DigestCache* cache = new DigestCache();  // never destroyed: used until exit
  return cache->Get(path);
}

bool IsSha256Hex(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

Result<std::optional<std::string>> ListedSha256(const std::string& sums_path,
                                                const std::string& name) {
  struct stat st {};
  if (::stat(sums_path.c_str(), &st) != 0 && errno == ENOENT) return std::optional<std::string>();
  VAED_ASSIGN_OR_RETURN(std::string text, ReadFileToString(sums_path));
  std::istringstream lines(text);
  std::string line;
  std::optional<std::string> listed;
  int listed_at = 0;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.size() < 67 || !IsSha256Hex(line.substr(0, 64)) || line[64] != ' ' ||
        (line[65] != ' ' && line[65] != '*')) {
      return InvalidArgument(sums_path + " line " + std::to_string(number) +
                             ": not \"<64 hex digits>  <file name>\" (the sha256sum format)");
    }
    // sha256sum writes "./name" for files named that way; both are the file.
    const std::string listed_name = line.substr(66);
    if (listed_name != name && listed_name != "./" + name) continue;
    const std::string digest = Lower(line.substr(0, 64));
    if (listed && *listed != digest) {
      // sha256sum -c would fail one of the two lines: so does this.
      return InvalidArgument(sums_path + " lists " + name + " twice with different digests (lines " +
                             std::to_string(listed_at) + " and " + std::to_string(number) + ")");
    }
    listed = digest;
    listed_at = number;
  }
  return listed;
}

Result<WeightsVerification> VerifyWeights(const ModelConfig& config, size_t index) {
  const std::string prefix = "models.entry[" + std::to_string(index) + "].";
  WeightsVerification v;
  VAED_RETURN_IF_ERROR(
      CheckKey(config, prefix, "weights", config.weights_path, config.weights_sha256, &v));
  VAED_RETURN_IF_ERROR(CheckKey(config, prefix, "audio_weights", config.audio_weights_path,
                                config.audio_weights_sha256, &v));
  if (!v.files.empty()) {
    const bool all = std::all_of(v.files.begin(), v.files.end(),
                                 [](const WeightFileCheck& f) { return !f.sources.empty(); });
    v.state = all ? kWeightsVerified : kWeightsUnverified;
  }
  LogVerification(config.name, v);
  return v;
}

}  // namespace vaed::models
