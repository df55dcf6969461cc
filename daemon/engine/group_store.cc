#include "daemon/engine/group_store.h"

#include <charconv>
#include <random>
#include <vector>

#include "daemon/models/torch_status.h"

namespace vaed::engine {

namespace {

// The store adapter's edge: c10d throws c10::Error (and std exceptions).
template <typename Fn>
auto Guard(const std::string& what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (...) {
    return models::CurrentTorchErrorStatus("store: " + what);
  }
}

}  // namespace

std::string IncarnationKey(const parallel::GroupSpec& spec, int node) {
  return spec.name + "/node" + std::to_string(node) + "/incarnation";
}
std::string GenerationCounterKey(const parallel::GroupSpec& spec) {
  return spec.name + "/generation_counter";
}
std::string LatestKey(const parallel::GroupSpec& spec) { return spec.name + "/latest"; }
std::string StateKey(const parallel::GroupSpec& spec, uint64_t generation) {
  return spec.name + "/gen" + std::to_string(generation) + "/state";
}
std::string JoinedKey(const parallel::GroupSpec& spec, uint64_t generation, int node) {
  return spec.name + "/gen" + std::to_string(generation) + "/joined/node" + std::to_string(node);
}
std::string JobKey(const parallel::GroupSpec& spec, uint64_t generation, int64_t n) {
  return spec.name + "/gen" + std::to_string(generation) + "/job" + std::to_string(n);
}
std::string LayoutKey(int node) { return "layout/node" + std::to_string(node); }

uint64_t NewIncarnation() {
  std::random_device device;
  std::mt19937_64 bits((uint64_t{device()} << 32) ^ device());
  uint64_t id = 0;
  while (id == 0) id = bits();
  return id;
}

Status GroupStore::Set(const std::string& key, const std::string& value) {
  return Guard("setting " + key, [&]() -> Status {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return Status::Ok();
  });
}

Result<std::optional<std::string>> GroupStore::Get(const std::string& key) {
  return Guard("reading " + key, [&]() -> Result<std::optional<std::string>> {
    if (!store_->check({key})) return std::optional<std::string>();
    const std::vector<uint8_t> value = store_->get(key);
    return std::optional<std::string>(std::string(value.begin(), value.end()));
  });
}

Result<std::optional<int64_t>> GroupStore::GetInt(const std::string& key) {
  VAED_ASSIGN_OR_RETURN(std::optional<std::string> text, Get(key));
  if (!text) return std::optional<int64_t>();
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size()) return std::optional<int64_t>();
  return std::optional<int64_t>(v);
}

Result<int64_t> GroupStore::Add(const std::string& key, int64_t delta) {
  return Guard("adding to " + key, [&]() -> Result<int64_t> { return store_->add(key, delta); });
}

Result<bool> GroupStore::Has(const std::string& key) {
  return Guard("checking " + key, [&]() -> Result<bool> { return store_->check({key}); });
}

Status GroupStore::Delete(const std::string& key) {
  return Guard("deleting " + key, [&]() -> Status {
    store_->deleteKey(key);
    return Status::Ok();
  });
}

}  // namespace vaed::engine
