#include "daemon/models/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace vaed {
namespace {

using Json = nlohmann::json;

constexpr size_t kLengthPrefixBytes = 8;
// Same cap as the reference implementation: a header this large is a
// corrupt length, not a real file.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;
constexpr std::string_view kMetadataKey = "__metadata__";

// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// safetensors dtype names vaed supports. ParseDType() also accepts the long
// names ("float32"), which are not valid in a safetensors header.
Result<DType> ParseSafetensorsDType(const std::string& name) {
  if (name == "F32") return DType::kFloat32;
  if (name == "F16") return DType::kFloat16;
  if (name == "BF16") return DType::kBFloat16;
  if (name == "U8") return DType::kUInt8;
  return InvalidArgument("dtype '" + name + "' is not supported (supported: F32, F16, BF16, U8)");
}

std::string Quoted(std::string_view name) {
  std::string s = "tensor '";
  s += name;
  s += "'";
  return s;
}

std::string RangeToString(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Reads a JSON non-negative integer that must fit in int64.
Result<uint64_t> ReadCount(const Json& v, const std::string& what) {
  if (!v.is_number_unsigned()) {
    return InvalidArgument(what + " is " + v.dump() + "; expected a non-negative integer");
  }
  const uint64_t n = v.get<uint64_t>();
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgument(what + " is " + std::to_string(n) + "; larger than int64 allows");
  }
  return n;
}

// Parses one header entry (everything except "__metadata__"). The data
// pointer is filled in by the caller once the ranges are checked.
struct ParsedEntry {
  TensorEntry entry;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Result<ParsedEntry> ParseEntry(const std::string& name, const Json& v) {
  const std::string what = Quoted(name);
  if (!v.is_object()) {
    return InvalidArgument(what + " is " + std::string(v.type_name()) +
                           "; expected an object with dtype, shape and data_offsets");
  }
  for (const auto& [field, unused] : v.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets") {
      return InvalidArgument(what + " has unknown field '" + field +
                             "' (allowed: dtype, shape, data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(field)) return InvalidArgument(what + " has no '" + field + "' field");
  }

  ParsedEntry p;
  p.entry.name = name;

  const Json& dtype = v.at("dtype");
  if (!dtype.is_string()) {
    return InvalidArgument(what + " dtype is " + dtype.dump() + "; expected a string");
  }
  Result<DType> parsed_dtype = ParseSafetensorsDType(dtype.get<std::string>());
  if (!parsed_dtype.ok()) return parsed_dtype.status().WithContext(what);
  p.entry.dtype = *parsed_dtype;

  const Json& shape = v.at("shape");
  if (!shape.is_array()) {
    return InvalidArgument(what + " shape is " + shape.dump() + "; expected an array");
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    VAED_ASSIGN_OR_RETURN(uint64_t d,
                          ReadCount(shape[i], what + " shape[" + std::to_string(i) + "]"));
    p.entry.shape.push_back(static_cast<int64_t>(d));
  }

  const Json& offsets = v.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    return InvalidArgument(what + " data_offsets is " + offsets.dump() + "; expected [begin, end]");
  }
  VAED_ASSIGN_OR_RETURN(p.begin, ReadCount(offsets[0], what + " data_offsets[0]"));
  VAED_ASSIGN_OR_RETURN(p.end, ReadCount(offsets[1], what + " data_offsets[1]"));
  if (p.begin > p.end) {
    return InvalidArgument(what + " data_offsets " + RangeToString(p.begin, p.end) +
                           " has begin > end");
  }
  p.entry.nbytes = p.end - p.begin;

  VAED_ASSIGN_OR_RETURN(uint64_t expected_bytes,
                        ContiguousBytes(p.entry.dtype, p.entry.shape, what));
  if (p.entry.nbytes != expected_bytes) {
    return InvalidArgument(what + " spans " + std::to_string(p.entry.nbytes) + " bytes but dtype " +
                           dtype.get<std::string>() + " shape " + ShapeToString(p.entry.shape) +
                           " needs " + std::to_string(expected_bytes) + " bytes");
  }
  return p;
}

// Parses the JSON header. Rejects duplicate keys at any depth, which
// nlohmann::json would otherwise resolve silently (last one wins).
// The only place nlohmann::json exceptions are translated.
Result<Json> ParseHeaderJson(const char* begin, const char* end) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string()) {
          const auto& key = parsed.get_ref<const std::string&>();
          if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    Json header = Json::parse(begin, end, callback);
    if (!duplicate.empty()) {
      return InvalidArgument("header has duplicate key '" + duplicate + "'");
    }
    return header;
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("header is not valid JSON: ") + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while parsing the header");
  } catch (const std::exception& e) {
    return Internal(std::string("unexpected error while parsing the header: ") + e.what());
  }
}

Result<std::map<std::string, std::string>> ParseMetadata(const Json& v) {
  if (!v.is_object()) {
    return InvalidArgument("__metadata__ is " + std::string(v.type_name()) +
                           "; expected an object of strings");
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      return InvalidArgument("__metadata__['" + key + "'] is " + value.dump() +
                             "; expected a string");
    }
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// Checks that the sorted ranges tile [0, buffer_bytes) exactly.
Status CheckTiling(std::vector<const ParsedEntry*> sorted, uint64_t buffer_bytes) {
  std::sort(sorted.begin(), sorted.end(), [](const ParsedEntry* a, const ParsedEntry* b) {
    if (a->begin != b->begin) return a->begin < b->begin;
    if (a->end != b->end) return a->end < b->end;
    return a->entry.name < b->entry.name;
  });
  uint64_t covered = 0;  // end of the data tiled so far
  const ParsedEntry* previous = nullptr;
  for (const ParsedEntry* p : sorted) {
    if (p->end > buffer_bytes) {
      return InvalidArgument(
          Quoted(p->entry.name) + " data_offsets " + RangeToString(p->begin, p->end) +
          " run past the end of the data buffer (" + std::to_string(buffer_bytes) + " bytes)");
    }
    if (p->begin > covered) {
      return InvalidArgument("gap in the data buffer: bytes " + RangeToString(covered, p->begin) +
                             " belong to no tensor (next is " + Quoted(p->entry.name) + " at " +
                             RangeToString(p->begin, p->end) + ")");
    }
    if (p->begin < covered) {
      return InvalidArgument(Quoted(p->entry.name) + " data " + RangeToString(p->begin, p->end) +
                             " overlaps " + Quoted(previous->entry.name) + " data " +
                             RangeToString(previous->begin, previous->end));
    }
    covered = p->end;
    previous = p;
  }
  if (covered != buffer_bytes) {
    return InvalidArgument("data buffer is " + std::to_string(buffer_bytes) +
                           " bytes but the tensors end at byte " + std::to_string(covered) + ": " +
                           std::to_string(buffer_bytes - covered) + " trailing bytes");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open safetensors file " + path);
  FdCloser closer(fd);

  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "fstat " + path);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + ": not a regular file");
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < kLengthPrefixBytes) {
    return InvalidArgument(path + ": file is " + std::to_string(file_bytes) +
                           " bytes, too short for the 8-byte header length");
  }

  // Construct the owner before mapping so the mapping is released on every
  // error path below.
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return ErrnoStatus(errno, "mmap " + path);
  file->map_ = map;
  file->map_bytes_ = file_bytes;
  const auto* bytes = static_cast<const uint8_t*>(map);

  auto fail = [&path](const Status& s) { return s.WithContext(path); };

  uint64_t header_bytes = 0;
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    header_bytes |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  }
  const uint64_t after_prefix = file_bytes - kLengthPrefixBytes;
  if (header_bytes > after_prefix) {
    return fail(InvalidArgument("header length " + std::to_string(header_bytes) +
                                " runs past the end of the file (" + std::to_string(after_prefix) +
                                " bytes follow the 8-byte length)"));
  }
  if (header_bytes > kMaxHeaderBytes) {
    return fail(InvalidArgument("header length " + std::to_string(header_bytes) + " exceeds the " +
                                std::to_string(kMaxHeaderBytes) + "-byte limit"));
  }
  if (header_bytes < 2) {
    return fail(InvalidArgument("header length " + std::to_string(header_bytes) +
                                " is too short for a JSON object"));
  }

  const char* header_begin = reinterpret_cast<const char*>(bytes + kLengthPrefixBytes);
  Result<Json> header = ParseHeaderJson(header_begin, header_begin + header_bytes);
  if (!header.ok()) return fail(header.status());
  if (!header->is_object()) {
    return fail(InvalidArgument("header is a JSON " + std::string(header->type_name()) +
                                "; expected an object"));
  }

  std::vector<ParsedEntry> parsed;
  parsed.reserve(header->size());
  for (const auto& [name, value] : header->items()) {
    if (name == kMetadataKey) {
      Result<std::map<std::string, std::string>> metadata = ParseMetadata(value);
      if (!metadata.ok()) return fail(metadata.status());
      file->metadata_ = std::move(metadata).value();
      continue;
    }
    Result<ParsedEntry> entry = ParseEntry(name, value);
    if (!entry.ok()) return fail(entry.status());
    parsed.push_back(std::move(entry).value());
  }

  const uint64_t data_start = kLengthPrefixBytes + header_bytes;
  const uint64_t buffer_bytes = file_bytes - data_start;
  std::vector<const ParsedEntry*> pointers;
  pointers.reserve(parsed.size());
  for (const ParsedEntry& p : parsed) pointers.push_back(&p);
  VAED_RETURN_IF_ERROR(fail(CheckTiling(std::move(pointers), buffer_bytes)));

  file->entries_.reserve(parsed.size());
  for (ParsedEntry& p : parsed) {
    p.entry.data = bytes + data_start + p.begin;
    file->entries_.push_back(std::move(p.entry));
  }
  std::sort(file->entries_.begin(), file->entries_.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  return file;
}

SafetensorsFile::~SafetensorsFile() { Reset(); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      entries_(std::move(other.entries_)),
      metadata_(std::move(other.metadata_)) {
  other.entries_.clear();
  other.metadata_.clear();
}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    entries_ = std::move(other.entries_);
    metadata_ = std::move(other.metadata_);
    other.entries_.clear();
    other.metadata_.clear();
  }
  return *this;
}

void SafetensorsFile::Reset() noexcept {
  entries_.clear();
  if (map_ != nullptr) {
    // munmap only fails for invalid arguments, which would be a bug here;
    // there is nothing useful to do about it in a destructor.
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    map_bytes_ = 0;
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const TensorEntry& e : entries_) out.push_back(e.name);
  return out;
}

const TensorEntry* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const TensorEntry& e, std::string_view n) { return e.name < n; });
  if (it == entries_.end() || it->name != name) return nullptr;
  return &*it;
}

Result<const TensorEntry*> SafetensorsFile::Require(std::string_view name, DType dtype,
                                                    const std::vector<int64_t>& shape) const {
  const size_t slash = path_.rfind('/');
  const std::string file = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  const TensorEntry* e = Find(name);
  if (e == nullptr) return NotFound(file + ": " + Quoted(name) + " is missing");
  if (e->dtype != dtype) {
    return InvalidArgument(file + ": " + Quoted(name) + " has dtype " +
                           std::string(DTypeName(e->dtype)) + ", expected " +
                           std::string(DTypeName(dtype)));
  }
  if (e->shape != shape) {
    return InvalidArgument(file + ": " + Quoted(name) + " has shape " + ShapeToString(e->shape) +
                           ", expected " + ShapeToString(shape));
  }
  return e;
}

}  // namespace vaed
