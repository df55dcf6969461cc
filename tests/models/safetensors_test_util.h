// Test helpers: write small (possibly malformed) safetensors files.
#ifndef VAED_TESTS_MODELS_SAFETENSORS_TEST_UTIL_H_
#define VAED_TESTS_MODELS_SAFETENSORS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/test_paths.h"

namespace vaed::test_util {

// "<8-byte LE header length><header><data>"; `header` is written verbatim.
inline std::string SafetensorsBytes(const std::string& header, const std::string& data) {
  std::string out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

struct TestTensor {
  std::string name;
  std::string dtype;  // safetensors dtype name, e.g. "F32"
  std::vector<int64_t> shape;
  std::string bytes;  // raw data
};

// A well-formed file: tensors laid out back to back in the given order.
inline std::string SafetensorsBytes(const std::vector<TestTensor>& tensors,
                                    const std::string& metadata_json = "") {
  std::string header = "{";
  std::string data;
  bool first = true;
  if (!metadata_json.empty()) {
    header += "\"__metadata__\":" + metadata_json;
    first = false;
  }
  for (const TestTensor& t : tensors) {
    if (!first) header += ",";
    first = false;
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  return SafetensorsBytes(header, data);
}

// A fresh directory under the system temp dir, removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "vaed_models_test.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `contents` to <dir>/<name> and returns the path.
  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string p = path_ + "/" + name;
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!f) ADD_FAILURE() << "could not write " << p;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string SharedDataPath(const std::string& file) {
  return std::string(VAED_SHARED_DIR) + "/data/taef2/" + file;
}

inline bool Exists(const std::string& path) { return std::filesystem::exists(path); }

}  // namespace vaed::test_util

#endif  // VAED_TESTS_MODELS_SAFETENSORS_TEST_UTIL_H_
