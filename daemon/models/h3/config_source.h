// What the two H3 config loaders (video_config.cc, audio_config.cc) share:
// reading a JSON file, the one place nlohmann::json exceptions are
// translated, and the names config fields have in the source being read, so
// that errors name the field the user wrote ("<file>: field
// 'vit_decoder_kwargs.heads' ...") rather than the struct member.
//
// Internal to daemon/models/h3; torch-free. Thread-safety: pure functions
// and a value type.
#ifndef VAED_DAEMON_MODELS_H3_CONFIG_SOURCE_H_
#define VAED_DAEMON_MODELS_H3_CONFIG_SOURCE_H_

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "vaed/status.h"

namespace vaed::models::h3 {

// Parses `text`, read from `path` (named in the errors). Errors:
// kInvalidArgument "<path>: not valid JSON: ...", kResourceExhausted when
// out of memory, kInternal for any other exception. Never throws.
Result<nlohmann::json> ParseJson(const std::string& text, const std::string& path);

// Reads the file at `path` (ReadFileToString's errors: kNotFound, kIoError,
// ...) and parses it (ParseJson's errors).
Result<nlohmann::json> ReadJsonFile(const std::string& path);

// The name each field of a config struct has in messages: the struct
// member's own name unless the source spells it otherwise (Rename()).
class FieldNames {
 public:
  // How `member` (the struct member's name, e.g. "heads") is named.
  std::string operator()(std::string_view member) const {
    auto it = renamed_.find(member);
    return it == renamed_.end() ? std::string(member) : it->second;
  }
  // Names `member` `spelled` from now on.
  void Rename(std::string_view member, std::string spelled) {
    renamed_.insert_or_assign(std::string(member), std::move(spelled));
  }

 private:
  std::map<std::string, std::string, std::less<>> renamed_;
};

}  // namespace vaed::models::h3

#endif  // VAED_DAEMON_MODELS_H3_CONFIG_SOURCE_H_
