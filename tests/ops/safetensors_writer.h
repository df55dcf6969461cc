// Test helper: writes small safetensors files (README §1 layout: u64 header
// length, JSON header padded with spaces to a multiple of 8, data buffer
// tiled by data_offsets).
#ifndef VAED_TESTS_OPS_SAFETENSORS_WRITER_H_
#define VAED_TESTS_OPS_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vaed::ops_test {

struct TestTensor {
  std::string name;
  std::string dtype;  // "F32", "U8", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline void WriteSafetensors(const std::string& path, const std::vector<TestTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << text;
  for (const auto& t : tensors) {
    f.write(reinterpret_cast<const char*>(t.bytes.data()),
            static_cast<std::streamsize>(t.bytes.size()));
  }
}

}  // namespace vaed::ops_test

#endif  // VAED_TESTS_OPS_SAFETENSORS_WRITER_H_
