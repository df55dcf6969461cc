#include "daemon/models/h3/config_source.h"

#include <exception>
#include <new>

#include "daemon/models/read_file.h"

namespace vaed::models::h3 {

Result<nlohmann::json> ParseJson(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(path + ": not valid JSON: " + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(path + ": out of memory while parsing JSON");
  } catch (const std::exception& e) {
    return Internal(path + ": unexpected error while parsing JSON: " + e.what());
  }
}

Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  VAED_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJson(text, path);
}

}  // namespace vaed::models::h3
